//! HTTP/2 spoken by hand on the Unix socket where tonic's stack cannot help: rewriting an
//! `:authority` h2 would refuse (`authority`), and answering another user's connection without
//! letting it reach h2 at all (`refusal`). Both share the framing in `frame`.

pub(crate) mod authority;
mod frame;
pub(crate) mod refusal;
