//! Compiles `proto/ptyd/v1/ptyd.proto` with a vendored `protoc` and emits a descriptor set for
//! server reflection. The generated messages also derive `serde::Serialize`, which is what the
//! CLI's `--json` prints: the proto field names, enums by the names the contract uses (the
//! functions in `src/pb.rs`), a oneof as its one set field.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: build scripts are single-threaded; prost-build reads PROTOC from the environment.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let enum_as_name = |f: &str| format!("#[serde(serialize_with = \"crate::pb::json::{f}\")]");
    tonic_prost_build::configure()
        // prost's codec, but a request that does not decode is the caller's INVALID_ARGUMENT.
        .codec_path("crate::pb::codec::ProstCodec")
        .file_descriptor_set_path(out.join("ptyd_descriptor.bin"))
        .message_attribute(".ptyd.v1", "#[derive(serde::Serialize)]")
        .enum_attribute(
            ".ptyd.v1.SendResponse.result",
            "#[derive(serde::Serialize)]",
        )
        .enum_attribute(".ptyd.v1.SendEvent.event", "#[derive(serde::Serialize)]")
        .enum_attribute(
            ".ptyd.v1.SendResponse.result",
            "#[serde(rename_all = \"snake_case\")]",
        )
        .enum_attribute(
            ".ptyd.v1.SendEvent.event",
            "#[serde(rename_all = \"snake_case\")]",
        )
        .field_attribute("ptyd.v1.SendResponse.result", "#[serde(flatten)]")
        .field_attribute("ptyd.v1.SendEvent.event", "#[serde(flatten)]")
        // A foreground send has no job id: print none rather than "".
        .field_attribute(
            "ptyd.v1.SendResponse.job_id",
            "#[serde(skip_serializing_if = \"String::is_empty\")]",
        )
        .field_attribute(
            ".ptyd.v1.ForegroundResult.wait_reason",
            enum_as_name("wait_reason"),
        )
        .field_attribute(
            ".ptyd.v1.JobOutputResponse.wait_reason",
            enum_as_name("wait_reason"),
        )
        .field_attribute(
            ".ptyd.v1.JobOutputResponse.status",
            enum_as_name("job_status"),
        )
        .field_attribute(
            ".ptyd.v1.JobKillResponse.status",
            enum_as_name("job_status"),
        )
        .field_attribute(
            ".ptyd.v1.CloseResponse.outcome",
            enum_as_name("close_outcome"),
        )
        .compile_protos(&["proto/ptyd/v1/ptyd.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
