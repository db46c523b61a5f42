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

/// What a gRPC service of this server holds (OTG's and gNMI's): the state, and the guard
/// its calls pass.
#[derive(Clone)]
pub(crate) struct Guarded {
    pub state: Shared,
    pub guard: Arc<crate::guard::Guard>,
}

/// A call as it arrives: why it is refused (when it is), its method, and the codec.
pub(crate) struct Arrival {
    pub refused: Option<Status>,
    pub method: String,
    pub grpc: tonic::server::Grpc<RawCodec>,
}

impl Guarded {
    pub fn new(state: Shared, guard: crate::guard::Guard) -> Guarded {
        Guarded {
            state,
            guard: Arc::new(guard),
        }
    }

    /// The checks of [`admit`] and the call's method. A refused call still has its message
    /// read (up to `max_in` bytes) before the status goes back: answering first and
    /// resetting the stream while the client still sends makes some clients report a
    /// framing error, not the status.
    pub fn arrive(&self, req: &http::Request<Body>, max_in: usize) -> Arrival {
        Arrival {
            refused: admit(&self.state, &self.guard, req).err(),
            method: req.uri().path().rsplit('/').next().unwrap_or_default().to_string(),
            grpc: tonic::server::Grpc::new(RawCodec)
                .max_decoding_message_size(max_in)
                .max_encoding_message_size(64 << 20),
        }
    }
}

/// The service, cloned per connection.
#[derive(Clone)]
pub struct Openapi(Guarded);

impl Openapi {
    pub fn new(state: Shared, guard: crate::guard::Guard) -> Openapi {
        LazyLock::force(&POOL);
        Openapi(Guarded::new(state, guard))
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
            let Arrival {
                refused,
                method,
                mut grpc,
            } = this.0.arrive(&req, crate::limits::BODY_LIMIT);
            let state = this.0.state.clone();
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

/// The checks every gRPC request passes before it is read (see the module's doc); the gNMI
/// listener's too.
pub(crate) fn admit(state: &Shared, guard: &crate::guard::Guard, req: &http::Request<Body>) -> Result<(), Status> {
    let authority = req.uri().authority().map(|a| a.to_string()).or_else(|| {
        let h = req.headers().get(http::header::HOST)?;
        h.to_str().ok().map(str::to_string)
    });
    // A TLS client that overrides the server's name (pygnmi's skip_verify, grpc's
    // ssl_target_name_override) sends that name without a port: it names this listener.
    let with_port = |a: &str| match a.rsplit_once(':') {
        Some((_, p)) if !a.ends_with(']') && p.parse::<u16>().is_ok() => a.to_string(),
        _ => format!("{a}:{}", guard.listen.port()),
    };
    if !authority.as_deref().is_some_and(|a| guard.host_allowed(&with_port(a))) {
        return Err(Status::permission_denied(format!(
            "the authority {authority:?} does not name this server ({}): refused, as a page whose name points here (DNS rebinding) would be. Fix: connect by the listen address or localhost, or start the server with --allow-host NAME",
            guard.listen
        )));
    }
    if req.headers().contains_key(http::header::ORIGIN) {
        return Err(Status::permission_denied(
            "a request from a web page (it has an Origin) is refused on the gRPC listeners. Fix: call it from a script (snappi, gosnappi, grpcio, pygnmi, ondatra)",
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
    if !state.limits.take(crate::limits::client(peer(req).map(|a| a.ip()))) {
        return Err(Status::resource_exhausted(
            "too many requests from this client. Fix: poll less often, or start the server with a larger --client-rate",
        ));
    }
    token(guard, req)
}

/// The client's address, over plain TCP or TLS.
fn peer(req: &http::Request<Body>) -> Option<SocketAddr> {
    let ext = req.extensions();
    ext.get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|c| c.remote_addr())
        .or_else(|| ext.get::<crate::tls::GrpcPeer>().map(|p| p.0))
}

/// The token, when the server has one: as `authorization: Bearer TOKEN`, or as the
/// `password` metadata that ondatra's static binding sends (its `username` is not checked).
fn token(guard: &crate::guard::Guard, req: &http::Request<Body>) -> Result<(), Status> {
    let Some(want) = guard.token.as_deref() else {
        return Ok(());
    };
    let header = |k: &str| req.headers().get(k).and_then(|v| v.to_str().ok());
    let given = header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| header("password"));
    match given {
        Some(t) if crate::guard::tokens_equal(t, want) => Ok(()),
        _ => Err(Status::unauthenticated(
            "this server needs its token. Fix: send the metadata authorization: Bearer TOKEN (or password: TOKEN, as ondatra's binding options do) with every call",
        )),
    }
}

/// One unary call: its method's request read as JSON, handled, and its reply written.
struct Call {
    this: Openapi,
    method: String,
    /// Why the call is refused, when it is (see [`admit`]).
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
        let (s, method, refused) = (self.this.0.state.clone(), self.method.clone(), self.refused.clone());
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
pub(crate) struct RawCodec;

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
