//! All protobuf glue: the code generated from `proto/ptyd/v1/ptyd.proto` (package `ptyd.v1`),
//! its encoded descriptor for server reflection, and conversions from domain types.
#![allow(missing_docs, clippy::all)]

tonic::include_proto!("ptyd.v1");

/// The encoded file descriptor set, served by gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("ptyd_descriptor");

use crate::process::pty::ExitKind;
use crate::session::Status;
use crate::waiting;

impl From<Status> for SessionStatus {
    fn from(status: Status) -> SessionStatus {
        match status {
            Status::Running => SessionStatus {
                state: "running".into(),
                exit_code: None,
                signal: None,
            },
            Status::Exited(ExitKind::Code(c)) => SessionStatus {
                state: "exited".into(),
                exit_code: Some(c),
                signal: None,
            },
            Status::Exited(ExitKind::Signal(s)) => SessionStatus {
                state: "exited".into(),
                exit_code: None,
                signal: Some(s.as_str().to_owned()),
            },
        }
    }
}

impl From<waiting::WaitReason> for WaitReason {
    fn from(reason: waiting::WaitReason) -> WaitReason {
        match reason {
            waiting::WaitReason::Prompt => WaitReason::Prompt,
            waiting::WaitReason::StdinRead => WaitReason::StdinRead,
            waiting::WaitReason::InferredIdle => WaitReason::InferredIdle,
            waiting::WaitReason::Timeout => WaitReason::Timeout,
            waiting::WaitReason::SessionExit => WaitReason::SessionExit,
        }
    }
}
