//! A typed client over the daemon's Unix socket, used by the CLI, the ACP shim and the tests.

use crate::error::Result;
use crate::pb::terminals_client::TerminalsClient;
use std::path::Path;
use tonic::transport::{Channel, Endpoint, Uri};

/// Largest message either side accepts: a 16 MiB result plus its envelope.
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// A channel to the daemon listening on `path`. The HTTP/2 authority is `localhost`, which every
/// gRPC server accepts (a socket path there is rejected by some).
pub async fn channel(path: &Path) -> Result<Channel> {
    // Never a socket another user could have put in our daemon's place.
    crate::private_dir::check_socket(path)?;
    let path = path.to_owned();
    let endpoint = Endpoint::try_from("http://localhost")?;
    let channel = endpoint
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await?;
    Ok(channel)
}

/// A `Terminals` client connected to the daemon listening on `path`.
pub async fn connect(path: &Path) -> Result<TerminalsClient<Channel>> {
    Ok(TerminalsClient::new(channel(path).await?)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES))
}
