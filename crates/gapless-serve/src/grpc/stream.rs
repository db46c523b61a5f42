//! The streaming twins of the unary methods (`streamSetConfig`, `streamGetMetrics`, ...),
//! which snappi uses with `enable_grpc_streaming` and gosnappi for large messages: the
//! request's or the reply's message travels as its bytes cut into `otg.Data` chunks. A
//! twin is served by its unary method's handler, so both give the same answers.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::Stream;
use prost::bytes::Bytes;
use prost::Message;
use serde_json::{json, Value};
use tonic::codegen::{BoxFuture, Service};
use tonic::{Status, Streaming};

use super::messages::{from_json, handle, refuse, to_json, types};
use crate::model::POOL;
use crate::Shared;

/// `otg.Data`: one chunk of a message's bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Data {
    #[prost(uint64, tag = "1")]
    pub chunk_size: u64,
    #[prost(bytes = "bytes", tag = "2")]
    pub datum: Bytes,
}

/// The chunk size of replies, snappi's default.
const CHUNK: usize = 4 << 20;

/// A streaming method: its unary twin, the twin's request or reply field that travels in
/// chunks, and that field's message type (none for a capture's raw bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Twin {
    In {
        unary: &'static str,
        key: &'static str,
        message: &'static str,
    },
    Out {
        unary: &'static str,
        key: &'static str,
        message: Option<&'static str>,
    },
}

/// The twin of a streaming method of `otg.Openapi`.
pub fn twin(method: &str) -> Option<Twin> {
    let (unary, key, message) = match method {
        "streamSetConfig" => ("SetConfig", "config", "otg.Config"),
        "streamSetControlState" => ("SetControlState", "control_state", "otg.ControlState"),
        "streamSetControlAction" => ("SetControlAction", "control_action", "otg.ControlAction"),
        "streamGetConfig" => ("GetConfig", "config", "otg.Config"),
        "streamGetMetrics" => ("GetMetrics", "metrics_response", "otg.MetricsResponse"),
        "streamGetStates" => ("GetStates", "states_response", "otg.StatesResponse"),
        "streamGetCapture" => ("GetCapture", "response_bytes", ""),
        _ => return None,
    };
    Some(if method.starts_with("streamSet") {
        Twin::In { unary, key, message }
    } else {
        let message = (!message.is_empty()).then_some(message);
        Twin::Out { unary, key, message }
    })
}

fn descriptor(name: &str) -> Result<prost_reflect::MessageDescriptor, Status> {
    POOL.get_message_by_name(name)
        .ok_or_else(|| Status::internal(format!("otg.fds has no message {name}")))
}

/// A client-streaming call: the chunks gathered (up to the body limit), read as the
/// twin's request field, and answered by the twin.
pub struct Gather {
    pub state: Shared,
    pub twin: Twin,
    pub refused: Option<Status>,
}

impl Service<tonic::Request<Streaming<Bytes>>> for Gather {
    type Response = tonic::Response<Bytes>;
    type Error = Status;
    type Future = BoxFuture<Self::Response, Status>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::Request<Streaming<Bytes>>) -> Self::Future {
        let (s, twin, refused) = (self.state.clone(), self.twin, self.refused.clone());
        Box::pin(async move {
            // Read (within the body limit) before any refusal, as a unary call is: a status
            // sent while the client still streams reads as a framing error to some clients.
            let bytes = gather(req.into_inner()).await;
            if let Some(status) = refused {
                return Err(status);
            }
            let Twin::In { unary, key, message } = twin else {
                return Err(Status::internal("a client stream of a reply"));
            };
            let bytes = bytes?;
            let inner = to_json(&descriptor(message)?, bytes)?;
            let (_, output) = types(unary)?;
            let reply = handle(&s, unary, json!({ key: inner })).await.map_err(refuse)?;
            Ok(tonic::Response::new(from_json(&output, reply)?))
        })
    }
}

/// The chunks' bytes, in order; more than the body limit in all is refused.
async fn gather(mut chunks: Streaming<Bytes>) -> Result<Bytes, Status> {
    let mut all = Vec::new();
    while let Some(msg) = chunks.message().await? {
        let d =
            Data::decode(msg).map_err(|e| Status::invalid_argument(format!("otg.Data: not a valid message: {e}")))?;
        if all.len() + d.datum.len() > crate::limits::BODY_LIMIT {
            return Err(Status::resource_exhausted(format!(
                "the streamed message is over {} bytes. Fix: send a smaller config",
                crate::limits::BODY_LIMIT
            )));
        }
        all.extend_from_slice(&d.datum);
    }
    Ok(all.into())
}

/// A server-streaming call: the twin's answer, its reply field's bytes sent as chunks.
pub struct Scatter {
    pub state: Shared,
    pub twin: Twin,
    pub refused: Option<Status>,
}

type Chunks = Pin<Box<dyn Stream<Item = Result<Bytes, Status>> + Send>>;

impl Service<tonic::Request<Bytes>> for Scatter {
    type Response = tonic::Response<Chunks>;
    type Error = Status;
    type Future = BoxFuture<Self::Response, Status>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::Request<Bytes>) -> Self::Future {
        let (s, twin, refused) = (self.state.clone(), self.twin, self.refused.clone());
        Box::pin(async move {
            if let Some(status) = refused {
                return Err(status);
            }
            let Twin::Out { unary, key, message } = twin else {
                return Err(Status::internal("a server stream of a request"));
            };
            let (input, _) = types(unary)?;
            let body = to_json(&input, req.into_inner())?;
            let bytes = reply_bytes(&s, unary, key, message, body).await?;
            let chunks: Vec<Result<Bytes, Status>> = chunked(bytes).into_iter().map(Ok).collect();
            let stream: Chunks = Box::pin(futures_util::stream::iter(chunks));
            Ok(tonic::Response::new(stream))
        })
    }
}

/// The bytes of the twin's reply field: its message encoded, or a capture's file as it is
/// (read straight, not through the unary reply's base64).
async fn reply_bytes(s: &Shared, unary: &str, key: &str, message: Option<&str>, body: Value) -> Result<Bytes, Status> {
    match message {
        Some(m) => {
            let reply = handle(s, unary, body).await.map_err(refuse)?;
            from_json(&descriptor(m)?, reply[key].clone())
        }
        None => {
            let (bytes, _) = crate::otg::capture_file(s, &body["capture_request"])
                .await
                .map_err(refuse)?;
            Ok(Bytes::from(bytes))
        }
    }
}

/// `bytes` as encoded `otg.Data` chunks of at most [`CHUNK`] bytes (one, empty, for none).
fn chunked(bytes: Bytes) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        let end = (at + CHUNK).min(bytes.len());
        let d = Data {
            chunk_size: CHUNK as u64,
            datum: bytes.slice(at..end),
        };
        out.push(Bytes::from(d.encode_to_vec()));
        at = end;
        if at >= bytes.len() {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_matches_otg_proto_and_every_streaming_method_has_a_twin() {
        let d = descriptor("otg.Data").unwrap();
        let fields: Vec<(String, u32)> = d.fields().map(|f| (f.name().to_string(), f.number())).collect();
        assert_eq!(fields, vec![("chunk_size".to_string(), 1), ("datum".to_string(), 2)]);
        let svc = POOL.get_service_by_name(super::super::SERVICE).unwrap();
        for m in svc.methods().filter(|m| m.name().starts_with("stream")) {
            let t = twin(m.name()).unwrap_or_else(|| panic!("{} has no twin", m.name()));
            match t {
                Twin::In { unary, message, .. } => {
                    assert!(m.is_client_streaming() && !m.is_server_streaming(), "{}", m.name());
                    let (input, _) = types(unary).unwrap();
                    let field = input.fields().next().unwrap();
                    assert_eq!(
                        field.kind().as_message().map(|d| d.full_name().to_string()),
                        Some(message.to_string())
                    );
                }
                Twin::Out { unary, message, .. } => {
                    assert!(m.is_server_streaming() && !m.is_client_streaming(), "{}", m.name());
                    assert_eq!(
                        m.input().full_name(),
                        types(unary).unwrap().0.full_name(),
                        "{}",
                        m.name()
                    );
                    if let Some(msg) = message {
                        let (_, output) = types(unary).unwrap();
                        let field = output.fields().next().unwrap();
                        assert_eq!(
                            field.kind().as_message().map(|d| d.full_name().to_string()),
                            Some(msg.to_string())
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn chunks_reassemble_to_the_bytes() {
        let big = Bytes::from((0..(CHUNK * 2 + 5)).map(|i| i as u8).collect::<Vec<u8>>());
        let parts = chunked(big.clone());
        assert_eq!(parts.len(), 3);
        let back: Vec<u8> = parts
            .iter()
            .flat_map(|p| Data::decode(p.clone()).unwrap().datum.to_vec())
            .collect();
        assert_eq!(Bytes::from(back), big);
        assert_eq!(chunked(Bytes::new()).len(), 1);
    }
}
