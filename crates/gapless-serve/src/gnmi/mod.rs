//! gNMI on the OTG YANG models (`--gnmi-listen`, default `127.0.0.1:50051`, TLS with the OTG
//! API's certificate, as ixia-c's gNMI server beside its controller): ondatra and
//! featureprofiles read every result this way. Read-only: `Capabilities`, `Get` and
//! `Subscribe` (ONCE, POLL, and STREAM with TARGET_DEFINED, ON_CHANGE or SAMPLE); `Set` is
//! UNIMPLEMENTED.
//!
//! The leaves come from [`tree`] (the handlers of the OTG API's metrics and states), are typed
//! and checked by `gapless_gnmi` (the schema of the models at a pinned commit), and each
//! Subscribe stream's timing is `gapless_gnmi::subscribe::Session`'s (sans IO);
//! [`subscribe`] only carries it. Requests pass the same checks as OTG gRPC's
//! (`crate::grpc::admit`): the authority, no Origin, the content type, the client's rate,
//! and the token (as a bearer token or ondatra's `password` metadata).

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

use gapless_gnmi::json::{Json, MODULES};
use gapless_gnmi::path::{Elem, Path};
use gapless_gnmi::schema::Schema;
use gapless_gnmi::state::{Leaf, Scalar};
use prost::bytes::Bytes;
use prost::Message;
use tonic::body::Body;
use tonic::codegen::{http, BoxFuture, Service};
use tonic::Status;

use crate::grpc::{Arrival, Guarded};
use crate::Shared;

pub mod proto;
mod subscribe;
pub mod tree;

use proto::encoding;

/// The service's full name in gnmi.proto.
pub const SERVICE: &str = "gnmi.gNMI";
/// Updates in one notification at most (a client's default message limit is 4 MiB).
const UPDATES_PER_NOTIFICATION: usize = 1_000;

/// The service, cloned per connection.
#[derive(Clone)]
pub struct Gnmi(Guarded, tokio::sync::watch::Receiver<bool>);

impl Gnmi {
    /// The service; its Subscribe streams end when `stopping` turns true.
    pub fn new(state: Shared, guard: crate::guard::Guard, stopping: tokio::sync::watch::Receiver<bool>) -> Gnmi {
        Gnmi(Guarded::new(state, guard), stopping)
    }
}

impl tonic::server::NamedService for Gnmi {
    const NAME: &'static str = SERVICE;
}

impl Service<http::Request<Body>> for Gnmi {
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
            } = this.0.arrive(&req, 1 << 20);
            let state = this.0.state.clone();
            Ok(if method == "Subscribe" {
                let stopping = this.1.clone();
                grpc.streaming(
                    subscribe::Subscribe {
                        state,
                        refused,
                        stopping,
                    },
                    req,
                )
                .await
            } else {
                grpc.unary(Unary { state, method, refused }, req).await
            })
        })
    }
}

/// `Capabilities`, `Get` and `Set`.
struct Unary {
    state: Shared,
    method: String,
    refused: Option<Status>,
}

impl Service<tonic::Request<Bytes>> for Unary {
    type Response = tonic::Response<Bytes>;
    type Error = Status;
    type Future = BoxFuture<Self::Response, Status>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::Request<Bytes>) -> Self::Future {
        let (s, method, refused) = (self.state.clone(), self.method.clone(), self.refused.clone());
        Box::pin(async move {
            if let Some(status) = refused {
                return Err(status);
            }
            let reply = match method.as_str() {
                "Capabilities" => capabilities().encode_to_vec(),
                "Get" => get(s, decode(req.into_inner())?).await?.encode_to_vec(),
                "Set" => {
                    return Err(Status::unimplemented(
                        "gapless's gNMI is read-only (the OTG models' state). Fix: configure and control with the OTG API (SetConfig, SetControlState) over HTTPS or gRPC",
                    ))
                }
                other => return Err(Status::unimplemented(format!("{other} is not a method of {SERVICE}"))),
            };
            Ok(tonic::Response::new(reply.into()))
        })
    }
}

/// A request message, or INVALID_ARGUMENT naming what is wrong.
fn decode<M: Message + Default>(b: Bytes) -> Result<M, Status> {
    M::decode(b).map_err(|e| {
        let name = std::any::type_name::<M>().rsplit("::").next().unwrap_or("message");
        Status::invalid_argument(format!("gnmi.{name}: not a valid message: {e}"))
    })
}

fn capabilities() -> proto::CapabilityResponse {
    proto::CapabilityResponse {
        supported_models: MODULES
            .iter()
            .filter(|m| tree::ROOTS.contains(&m.0))
            .map(|(_, name, revision)| proto::ModelData {
                name: (*name).into(),
                organization: "Open Traffic Generator".into(),
                version: (*revision).into(),
            })
            .collect(),
        supported_encodings: vec![encoding::JSON, encoding::PROTO, encoding::JSON_IETF],
        g_nmi_version: proto::GNMI_VERSION.into(),
    }
}

/// How a request's values are written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Encoding {
    Proto,
    Json(Json),
}

impl Encoding {
    fn of(e: i32) -> Result<Encoding, Status> {
        match e {
            encoding::PROTO => Ok(Encoding::Proto),
            encoding::JSON => Ok(Encoding::Json(Json { ietf: false })),
            encoding::JSON_IETF => Ok(Encoding::Json(Json { ietf: true })),
            other => Err(Status::unimplemented(format!(
                "encoding {other} is not served. Fix: ask for PROTO (2), JSON_IETF (4) or JSON (0)"
            ))),
        }
    }
}

/// The prefix every notification of a request carries: its target and origin.
fn reply_prefix(prefix: &Option<proto::Path>) -> Option<proto::Path> {
    prefix.as_ref().map(|p| proto::Path {
        origin: p.origin.clone(),
        elem: Vec::new(),
        target: p.target.clone(),
    })
}

/// `prefix` + `path` as one path of the schema, or INVALID_ARGUMENT / NOT_FOUND naming it.
pub(crate) fn query(prefix: &Option<proto::Path>, path: &proto::Path) -> Result<Path, Status> {
    let mut elems = Vec::new();
    for p in prefix.iter().chain([path]) {
        if !matches!(p.origin.as_str(), "" | "openconfig" | "otg") {
            return Err(Status::invalid_argument(format!(
                "origin {:?}: this server has the OTG models only. Fix: leave the origin empty (or openconfig, as ygnmi sends)",
                p.origin
            )));
        }
        elems.extend(p.elem.iter().map(|e| Elem {
            name: e.name.clone(),
            keys: e.key.clone(),
        }));
    }
    let q = Path(elems);
    Schema::get().check(&q).map_err(Status::not_found)?;
    Ok(q)
}

/// The roots a set of queries reaches (none: every root).
fn roots<'a>(queries: impl IntoIterator<Item = &'a Path>) -> Option<BTreeSet<String>> {
    queries
        .into_iter()
        .map(|q| q.0.first().map(|e| e.name.clone()))
        .collect()
}

/// The leaves of `roots`, gathered off the async workers.
pub(crate) async fn gather(s: &Shared, roots: Option<BTreeSet<String>>) -> Result<Vec<Leaf>, Status> {
    let s = s.clone();
    tokio::task::spawn_blocking(move || tree::leaves(&s, roots.as_ref()))
        .await
        .map_err(|e| Status::internal(format!("gathering the trees failed: {e}")))
}

async fn get(s: Shared, req: proto::GetRequest) -> Result<proto::GetResponse, Status> {
    let enc = Encoding::of(req.encoding)?;
    if req.r#type == 1 {
        return Err(Status::unimplemented(
            "the OTG models' trees are state only: there is no CONFIG data. Fix: ask for ALL or STATE, and read the config with the OTG API's GetConfig",
        ));
    }
    let max = gapless_gnmi::subscribe::MAX_PATHS;
    if req.path.len() > max {
        return Err(Status::resource_exhausted(format!(
            "{} paths in one Get, over the {max} this server takes (as in a subscription list). Fix: ask for a wildcard (flows/flow[name=*]) instead of each entry",
            req.path.len()
        )));
    }
    let paths = if req.path.is_empty() {
        vec![proto::Path::default()]
    } else {
        req.path.clone()
    };
    let mut queries = paths
        .iter()
        .map(|p| query(&req.prefix, p))
        .collect::<Result<Vec<_>, _>>()?;
    // One notification per distinct path: a duplicate is walked and cloned once.
    let mut seen = BTreeSet::new();
    queries.retain(|q| seen.insert(q.clone()));
    let leaves = gather(&s, roots(&queries)).await?;
    let prefix = reply_prefix(&req.prefix);
    let notification = tokio::task::spawn_blocking(move || {
        let parts = gapless_gnmi::keyless::parts(&queries.iter().collect::<Vec<_>>(), &leaves);
        queries
            .iter()
            .map(|q| {
                let mine: Vec<Leaf> = leaves
                    .iter()
                    .chain(&parts)
                    .filter(|l| q.covers(&l.path))
                    .cloned()
                    .collect();
                notification(prefix.clone(), updates(enc, q, &mine), Vec::new())
            })
            .collect()
    })
    .await
    .map_err(|e| Status::internal(format!("answering the Get failed: {e}")))?;
    Ok(proto::GetResponse { notification })
}

/// The updates of `leaves` (each covered by `q`): one a leaf in PROTO, one a value at `q`
/// (each entry its wildcards match) in JSON.
pub(crate) fn updates(enc: Encoding, q: &Path, leaves: &[Leaf]) -> Vec<proto::Update> {
    let update = |path: &Path, val| proto::Update {
        path: Some(to_proto(path)),
        val: Some(proto::TypedValue { value: Some(val) }),
        duplicates: 0,
    };
    match enc {
        Encoding::Proto => leaves
            .iter()
            .flat_map(|l| match &l.value {
                // JSON_IETF at a keyless list's entry (or one value per entry of it).
                Scalar::Json(v) => gapless_gnmi::keyless::each(v)
                    .into_iter()
                    .map(|x| update(&l.path, proto::Value::JsonIetfVal(x.to_string().into_bytes())))
                    .collect(),
                s => vec![update(&l.path, typed(s))],
            })
            .collect(),
        Encoding::Json(j) => j
            .values(q, leaves)
            .into_iter()
            .map(|(p, v)| {
                let bytes = v.to_string().into_bytes();
                update(
                    &p,
                    if j.ietf {
                        proto::Value::JsonIetfVal(bytes)
                    } else {
                        proto::Value::JsonVal(bytes)
                    },
                )
            })
            .collect(),
    }
}

/// A leaf's value in PROTO encoding: the scalar its YANG type has (an `ieeefloat32` as its
/// 4 big-endian bytes, as ygot's unmarshal reads it; a decimal64 as a double).
fn typed(v: &Scalar) -> proto::Value {
    match v {
        Scalar::Uint(n) => proto::Value::UintVal(*n),
        Scalar::Float32(x) => proto::Value::BytesVal(x.to_be_bytes().to_vec()),
        Scalar::Double(x) => proto::Value::DoubleVal(*x),
        Scalar::Str(s) => proto::Value::StringVal(s.clone()),
        Scalar::Bool(b) => proto::Value::BoolVal(*b),
        Scalar::Json(v) => proto::Value::JsonIetfVal(v.to_string().into_bytes()),
        Scalar::Strs(v) => proto::Value::LeaflistVal(proto::ScalarArray {
            element: v
                .iter()
                .map(|s| proto::TypedValue {
                    value: Some(proto::Value::StringVal(s.clone())),
                })
                .collect(),
        }),
    }
}

pub(crate) fn to_proto(p: &Path) -> proto::Path {
    proto::Path {
        origin: String::new(),
        elem: p
            .0
            .iter()
            .map(|e| proto::PathElem {
                name: e.name.clone(),
                key: e.keys.clone(),
            })
            .collect(),
        target: String::new(),
    }
}

pub(crate) fn notification(
    prefix: Option<proto::Path>,
    update: Vec<proto::Update>,
    delete: Vec<proto::Path>,
) -> proto::Notification {
    proto::Notification {
        timestamp: now_ns(),
        prefix,
        update,
        delete,
        atomic: false,
    }
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(elems: &[(&str, &[(&str, &str)])]) -> proto::Path {
        proto::Path {
            elem: elems
                .iter()
                .map(|(n, keys)| proto::PathElem {
                    name: (*n).into(),
                    key: keys.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_query_joins_its_prefix_and_is_checked_against_the_models() {
        let prefix = Some(proto::Path {
            origin: "openconfig".into(),
            target: "ate".into(),
            ..path(&[("flows", &[])])
        });
        let q = query(&prefix, &path(&[("flow", &[("name", "f1")]), ("state", &[])])).unwrap();
        assert_eq!(q.to_string(), "/flows/flow[name=f1]/state");
        let bad = query(&None, &path(&[("flows", &[]), ("flw", &[])])).unwrap_err();
        assert_eq!(bad.code(), tonic::Code::NotFound);
        assert!(
            bad.message().contains("no \"flw\" at /flows (there: flow)"),
            "got {}",
            bad.message()
        );
        let origin = query(
            &None,
            &proto::Path {
                origin: "cli".into(),
                ..path(&[("flows", &[])])
            },
        )
        .unwrap_err();
        assert_eq!(origin.code(), tonic::Code::InvalidArgument, "got {origin:?}");
    }

    #[test]
    fn proto_values_are_typed_as_ygot_reads_them() {
        assert_eq!(
            typed(&Scalar::Float32(1.5)),
            proto::Value::BytesVal(vec![0x3f, 0xc0, 0, 0])
        );
        assert_eq!(typed(&Scalar::Uint(7)), proto::Value::UintVal(7));
        assert_eq!(typed(&Scalar::Double(0.25)), proto::Value::DoubleVal(0.25));
        assert_eq!(Encoding::of(3).unwrap_err().code(), tonic::Code::Unimplemented);
        let caps = capabilities();
        assert_eq!(
            caps.supported_models.len(),
            tree::ROOTS.len(),
            "expected a model for each tree served"
        );
    }
}
