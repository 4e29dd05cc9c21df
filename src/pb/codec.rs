//! The codec of the generated service and client: prost's, except that a request that does not
//! decode (malformed protobuf, a string field that is not UTF-8) is the caller's fault and so
//! `INVALID_ARGUMENT`, not the `INTERNAL` prost's codec answers (which reads as a bug in ptyd).

use std::marker::PhantomData;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// prost's codec with decode errors as `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub struct ProstCodec<T, U> {
    _types: PhantomData<(T, U)>,
}

impl<T, U> Default for ProstCodec<T, U> {
    fn default() -> Self {
        ProstCodec {
            _types: PhantomData,
        }
    }
}

impl<T, U> Codec for ProstCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = CallerDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        CallerDecoder(ProstDecoder::default())
    }
}

/// prost's decoder, whose errors name the message as the caller's.
#[derive(Debug, Clone)]
pub struct CallerDecoder<U>(ProstDecoder<U>);

impl<U: prost::Message + Default> Decoder for CallerDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|status| {
            Status::invalid_argument(format!(
                "the message is not a valid protobuf encoding of {}: {}",
                std::any::type_name::<U>()
                    .rsplit("::")
                    .next()
                    .unwrap_or("it"),
                status.message()
            ))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
