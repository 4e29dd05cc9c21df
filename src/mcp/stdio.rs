//! The stdio transport of `ptyd mcp`: stdin and stdout read and written in the runtime, not in
//! a blocking thread, whenever the client gave pipes or sockets. Node's `child_process` (the
//! official TypeScript SDK's `StdioClientTransport`) gives Unix socket pairs, which rmcp's
//! non-blocking path (FIFOs only) does not take; its fallback reads stdin in a blocking thread,
//! which costs a hand-off per message and, while the client keeps stdin open, keeps the process
//! from exiting after a signal (the runtime waits for that thread). Anything else (a terminal, a
//! file) uses rmcp's handles.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use tokio::io::{AsyncRead, AsyncWrite};

/// The server's reading half.
pub(crate) type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// The server's writing half.
pub(crate) type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// stdin and stdout for rmcp's `serve`.
pub(crate) fn transport() -> (Reader, Writer) {
    let Some(input) = socket(std::io::stdin().as_fd()) else {
        let (reader, writer) = rmcp::transport::stdio_pipes();
        return (Box::new(reader), Box::new(writer));
    };
    // stdout made non-blocking would make stderr non-blocking too when both are one socket (a
    // client that merges them), and log lines could then be dropped: write it through tokio's
    // handle then.
    let shares_stderr = inode(std::io::stdout().as_fd()).is_some()
        && inode(std::io::stdout().as_fd()) == inode(std::io::stderr().as_fd());
    let output: Writer = match socket(std::io::stdout().as_fd()).filter(|_| !shares_stderr) {
        Some(output) => Box::new(output),
        None => Box::new(tokio::io::stdout()),
    };
    (Box::new(input), output)
}

/// `fd` as a non-blocking Unix stream, when it is a socket. The copy shares the descriptor's
/// open file, so the process's own fd becomes non-blocking too; nothing else in `ptyd mcp`
/// reads stdin or writes stdout, and sessions' processes never inherit them.
fn socket(fd: BorrowedFd<'_>) -> Option<tokio::net::UnixStream> {
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    if !file.metadata().ok()?.file_type().is_socket() {
        return None;
    }
    let stream = std::os::unix::net::UnixStream::from(OwnedFd::from(file));
    stream.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(stream).ok()
}

/// The (device, inode) of what `fd` refers to.
fn inode(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    let meta = file.metadata().ok()?;
    Some((meta.dev(), meta.ino()))
}
