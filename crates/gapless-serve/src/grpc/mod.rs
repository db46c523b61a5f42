//! The OTG API over gRPC: service `otg.Openapi` of the OTG models (`--otg-grpc-listen`,
//! default `127.0.0.1:40051`, plain HTTP/2 as snappi's and gosnappi's insecure channels
//! expect), with the same handlers as the HTTP listener. The streaming twins of the unary
//! methods (`streamSetConfig`, `streamGetMetrics`, ...) carry the same messages cut into
//! `otg.Data` chunks ([`stream`]); the messages and the handlers are in `messages`.
//!
//! No code is generated from `otg.proto`: each request's bytes are read with its message
//! descriptor (from `proto/otg.fds`, see `scripts/otg_descriptor.py`) into the proto3 JSON
//! form with the proto's own field names, which is the JSON the HTTP API takes; each reply is
//! written back the same way. So one mapping of config, metrics and errors serves both.
//! Fields the proto does not have (gapless's `x_gapless` figures) are left out of gRPC
//! replies; the HTTP API carries them.
//!
//! Checks, before a request is read: the `:authority` names this server (as Host over HTTP:
//! DNS rebinding), no `Origin` (a browser's grpc-web), a `application/grpc` content type, the
//! client's request rate, and the bearer token in the `authorization` metadata when the
//! server has one (compared in constant time). Errors are gRPC statuses whose message is the
//! OTG error's JSON (`{code, kind, errors}`), which snappi reads back into its error type.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};

use prost::bytes::{Buf, BufMut, Bytes};
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{http, BoxFuture, Service};
use tonic::Status;

use crate::model::POOL;
use crate::Shared;
use messages::{from_json, handle, refuse, to_json, types};

mod messages;
pub mod stream;

pub use messages::SERVICE;

/// The service, cloned per connection.
#[derive(Clone)]
pub struct Openapi {
    state: Shared,
    guard: Arc<crate::guard::Guard>,
}

impl Openapi {
    pub fn new(state: Shared, guard: crate::guard::Guard) -> Openapi {
        LazyLock::force(&POOL);
        Openapi {
            state,
            guard: Arc::new(guard),
        }
    }
}

impl tonic::server::NamedService for Openapi {
    const NAME: &'static str = SERVICE;
}

impl Service<http::Request<Body>> for Openapi {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            // A refused call still has its message read (bounded by the size limit) before
            // the status goes back: answering first and resetting the stream while the
            // client still sends makes some clients report a framing error, not the status.
            let refused = this.admit(&req).err();
            let method = req.uri().path().rsplit('/').next().unwrap_or_default().to_string();
            let mut grpc = tonic::server::Grpc::new(RawCodec)
                .max_decoding_message_size(crate::limits::BODY_LIMIT)
                .max_encoding_message_size(64 << 20);
            let state = this.state.clone();
            Ok(match stream::twin(&method) {
                Some(t @ stream::Twin::In { .. }) => {
                    grpc.client_streaming(
                        stream::Gather {
                            state,
                            twin: t,
                            refused,
                        },
                        req,
                    )
                    .await
                }
                Some(t @ stream::Twin::Out { .. }) => {
                    grpc.server_streaming(
                        stream::Scatter {
                            state,
                            twin: t,
                            refused,
                        },
                        req,
                    )
                    .await
                }
                None => grpc.unary(Call { this, method, refused }, req).await,
            })
        })
    }
}

impl Openapi {
    /// The checks every request passes before it is read (see the module's doc).
    fn admit(&self, req: &http::Request<Body>) -> Result<(), Status> {
        let authority = req.uri().authority().map(|a| a.to_string()).or_else(|| {
            let h = req.headers().get(http::header::HOST)?;
            h.to_str().ok().map(str::to_string)
        });
        if !authority.as_deref().is_some_and(|a| self.guard.host_allowed(a)) {
            return Err(Status::permission_denied(format!(
                "the authority {authority:?} does not name this server ({}): refused, as a page whose name points here (DNS rebinding) would be. Fix: connect by the listen address or localhost, or start the server with --allow-host NAME",
                self.guard.listen
            )));
        }
        if req.headers().contains_key(http::header::ORIGIN) {
            return Err(Status::permission_denied(
                "a request from a web page (it has an Origin) is refused on the gRPC listener. Fix: call it from a script (snappi, gosnappi, grpcio)",
            ));
        }
        let ct = req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if !ct.is_some_and(|t| t.starts_with("application/grpc")) {
            return Err(Status::invalid_argument(format!(
                "content type {ct:?} is not gRPC. Fix: send application/grpc (a gRPC client does)"
            )));
        }
        let peer = req
            .extensions()
            .get::<tonic::transport::server::TcpConnectInfo>()
            .and_then(|c| c.remote_addr());
        if !self
            .state
            .limits
            .take(crate::limits::client(peer.map(|a: SocketAddr| a.ip())))
        {
            return Err(Status::resource_exhausted(
                "too many requests from this client. Fix: poll less often, or start the server with a larger --client-rate",
            ));
        }
        self.token(req)
    }

    fn token(&self, req: &http::Request<Body>) -> Result<(), Status> {
        let Some(want) = self.guard.token.as_deref() else {
            return Ok(());
        };
        let given = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match given {
            Some(t) if crate::guard::tokens_equal(t, want) => Ok(()),
            _ => Err(Status::unauthenticated(
                "this server needs its token. Fix: send the metadata authorization: Bearer TOKEN with every call",
            )),
        }
    }
}

/// One unary call: its method's request read as JSON, handled, and its reply written.
struct Call {
    this: Openapi,
    method: String,
    /// Why the call is refused, when it is (see [`Openapi::admit`]).
    refused: Option<Status>,
}

impl Service<tonic::Request<Bytes>> for Call {
    type Response = tonic::Response<Bytes>;
    type Error = Status;
    type Future = BoxFuture<Self::Response, Status>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::Request<Bytes>) -> Self::Future {
        let (s, method, refused) = (self.this.state.clone(), self.method.clone(), self.refused.clone());
        Box::pin(async move {
            if let Some(status) = refused {
                return Err(status);
            }
            let (input, output) = types(&method)?;
            let body = to_json(&input, req.into_inner())?;
            let reply = handle(&s, &method, body).await.map_err(refuse)?;
            Ok(tonic::Response::new(from_json(&output, reply)?))
        })
    }
}

/// Passes message bytes through: the messages are read by descriptor, not by type.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }

    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}
