//! `Subscribe`: one task per stream carries what its `Session` (sans IO) says to send. The
//! first request must be a subscription list; the first full set of updates ends with a
//! `sync_response`; ONCE then ends, POLL answers each `Poll` with a full set and its
//! `sync_response`, and STREAM looks at the trees when its session says and sends what is
//! due, changed or gone.
//!
//! Bounds: each stream holds one of the server's event-stream places (`--max-event-streams`,
//! shared with the dashboard's), a list holds at most 1,000 paths, and a client that reads
//! nothing for [`SEND_WAIT`] loses its stream (its task ends; the runs are not touched).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::Stream;
use gapless_gnmi::path::Path;
use gapless_gnmi::subscribe::{ListMode, Session, Sub, SubMode};
use prost::bytes::Bytes;
use prost::Message;
use tokio::sync::mpsc;
use tonic::codegen::{BoxFuture, Service};
use tonic::{Status, Streaming};

use super::proto::{self, list_mode, sub_mode};
use super::{decode, gather, notification, query, reply_prefix, to_proto, updates, Encoding, UPDATES_PER_NOTIFICATION};
use crate::Shared;

/// How long a stream waits for its client to take a message before it ends.
pub const SEND_WAIT: Duration = Duration::from_secs(60);

pub struct Subscribe {
    pub state: Shared,
    pub refused: Option<Status>,
    /// True once the server stops: every stream then ends.
    pub stopping: tokio::sync::watch::Receiver<bool>,
}

type Sink = mpsc::Sender<Result<Bytes, Status>>;

impl Service<tonic::Request<Streaming<Bytes>>> for Subscribe {
    type Response = tonic::Response<Replies>;
    type Error = Status;
    type Future = BoxFuture<Self::Response, Status>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::Request<Streaming<Bytes>>) -> Self::Future {
        let (s, refused, mut stopping) = (self.state.clone(), self.refused.clone(), self.stopping.clone());
        Box::pin(async move {
            if let Some(status) = refused {
                return Err(status);
            }
            let place = s.limits.event_stream().map_err(|e| {
                let why = e.1["error"].as_str().unwrap_or("no stream place is free").to_string();
                Status::resource_exhausted(format!("{why} (gNMI Subscribe streams count among them)"))
            })?;
            let mut requests = req.into_inner();
            let first = requests
                .message()
                .await?
                .ok_or_else(|| Status::invalid_argument("the stream ended before its subscription list"))?;
            let list =
                match decode::<proto::SubscribeRequest>(first)?.request {
                    Some(proto::Request::Subscribe(l)) => l,
                    Some(proto::Request::Poll(_)) => return Err(Status::invalid_argument(
                        "a poll before any subscription. Fix: send a SubscriptionList with mode POLL first, then poll",
                    )),
                    None => {
                        return Err(Status::invalid_argument(
                            "an empty SubscribeRequest. Fix: send a SubscriptionList",
                        ))
                    }
                };
            let plan = Plan::of(&list)?;
            let (tx, rx) = mpsc::channel(16);
            tokio::spawn(async move {
                let _place = place;
                let ended = tokio::select! {
                    r = plan.run(&s, requests, &tx) => r,
                    _ = stopping.wait_for(|v| *v) => Err(Status::unavailable("the server is stopping")),
                };
                if let Err(e) = ended {
                    // Not waited for: a client that reads nothing must not hold the stop.
                    let _ = tx.try_send(Err(e));
                }
            });
            Ok(tonic::Response::new(Replies(rx)))
        })
    }
}

/// The replies of one stream, as tonic sends them.
pub struct Replies(mpsc::Receiver<Result<Bytes, Status>>);

impl Stream for Replies {
    type Item = Result<Bytes, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}

/// A subscription list, checked.
struct Plan {
    mode: ListMode,
    enc: Encoding,
    updates_only: bool,
    prefix: Option<proto::Path>,
    session: Session,
    queries: Vec<Path>,
}

impl Plan {
    fn of(list: &proto::SubscriptionList) -> Result<Plan, Status> {
        let mode = match list.mode {
            list_mode::STREAM => ListMode::Stream,
            list_mode::ONCE => ListMode::Once,
            list_mode::POLL => ListMode::Poll,
            other => {
                return Err(Status::invalid_argument(format!(
                    "list mode {other}: give STREAM, ONCE or POLL"
                )))
            }
        };
        let mut subs = Vec::new();
        for sub in &list.subscription {
            let q = query(&list.prefix, sub.path.as_ref().unwrap_or(&proto::Path::default()))?;
            let m = match sub.mode {
                sub_mode::TARGET_DEFINED => SubMode::TargetDefined,
                sub_mode::ON_CHANGE => SubMode::OnChange,
                sub_mode::SAMPLE => SubMode::Sample {
                    interval_ns: sub.sample_interval,
                },
                other => {
                    return Err(Status::invalid_argument(format!(
                        "subscription mode {other}: give TARGET_DEFINED, ON_CHANGE or SAMPLE"
                    )))
                }
            };
            subs.push(
                Sub::new(q, m, sub.suppress_redundant, sub.heartbeat_interval).map_err(Status::invalid_argument)?,
            );
        }
        let queries = subs.iter().map(|s| s.path.clone()).collect();
        Ok(Plan {
            mode,
            enc: Encoding::of(list.encoding)?,
            updates_only: list.updates_only,
            prefix: reply_prefix(&list.prefix),
            session: Session::new(subs).map_err(Status::resource_exhausted)?,
            queries,
        })
    }

    async fn run(mut self, s: &Shared, mut requests: Streaming<Bytes>, tx: &Sink) -> Result<(), Status> {
        let t0 = Instant::now();
        let ns = || t0.elapsed().as_nanos() as u64;
        let leaves = gather(s, self.session.roots()).await?;
        let first = self.session.full(ns(), &leaves, self.updates_only);
        self.send(tx, &first, &[]).await?;
        sync(tx).await?;
        match self.mode {
            ListMode::Once => Ok(()),
            ListMode::Poll => loop {
                let Some(msg) = requests.message().await? else {
                    return Ok(());
                };
                match decode::<proto::SubscribeRequest>(msg)?.request {
                    Some(proto::Request::Poll(_)) => {}
                    _ => {
                        return Err(Status::invalid_argument(
                            "a POLL stream takes only Poll requests after its subscription list",
                        ))
                    }
                }
                let leaves = gather(s, self.session.roots()).await?;
                let all = self.session.full(ns(), &leaves, false);
                self.send(tx, &all, &[]).await?;
                sync(tx).await?;
            },
            ListMode::Stream => self.stream(s, requests, tx, ns).await,
        }
    }

    /// STREAM: look when due, send what the session says, until the client goes.
    async fn stream(
        &mut self,
        s: &Shared,
        mut requests: Streaming<Bytes>,
        tx: &Sink,
        ns: impl Fn() -> u64,
    ) -> Result<(), Status> {
        let mut open = true;
        loop {
            let wait = Duration::from_nanos(self.session.due(ns()).saturating_sub(ns()));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = tx.closed() => return Ok(()),
                m = requests.message(), if open => match m {
                    Ok(Some(_)) => return Err(Status::invalid_argument(
                        "a STREAM subscription takes no further requests (a Poll is for mode POLL)",
                    )),
                    // The client closed its side: it still reads.
                    Ok(None) | Err(_) => open = false,
                },
            }
            let leaves = gather(s, self.session.roots()).await?;
            let sent = self.session.look(ns(), &leaves);
            if !sent.updates.is_empty() || !sent.deletes.is_empty() {
                let deletes: Vec<proto::Path> = sent.deletes.iter().map(to_proto).collect();
                self.send(tx, &sent.updates, &deletes).await?;
            }
        }
    }

    /// `leaves` (and `deletes`) as notifications of at most 1,000 updates.
    async fn send(
        &self,
        tx: &Sink,
        leaves: &[gapless_gnmi::state::Leaf],
        deletes: &[proto::Path],
    ) -> Result<(), Status> {
        let mut ups = Vec::new();
        for q in &self.queries {
            let mine: Vec<_> = leaves.iter().filter(|l| q.covers(&l.path)).cloned().collect();
            ups.extend(updates(self.enc, q, &mine));
        }
        // A leaf under two subscribed paths goes once.
        let mut seen = std::collections::HashSet::new();
        ups.retain(|u| seen.insert(u.path.clone().map(|p| p.encode_to_vec())));
        let mut chunks: Vec<Vec<proto::Update>> = ups.chunks(UPDATES_PER_NOTIFICATION).map(<[_]>::to_vec).collect();
        if chunks.is_empty() && !deletes.is_empty() {
            chunks.push(Vec::new());
        }
        let last = chunks.len().saturating_sub(1);
        for (i, c) in chunks.into_iter().enumerate() {
            let gone = if i == last { deletes.to_vec() } else { Vec::new() };
            let n = notification(self.prefix.clone(), c, gone);
            put(tx, proto::Response::Update(n)).await?;
        }
        Ok(())
    }
}

async fn sync(tx: &Sink) -> Result<(), Status> {
    put(tx, proto::Response::SyncResponse(true)).await
}

/// One reply; an error ends the stream's task (the client went, or took nothing for
/// [`SEND_WAIT`]).
async fn put(tx: &Sink, r: proto::Response) -> Result<(), Status> {
    let bytes = proto::SubscribeResponse { response: Some(r) }.encode_to_vec();
    tx.send_timeout(Ok(bytes.into()), SEND_WAIT)
        .await
        .map_err(|_| Status::cancelled("the client took no reply for 60 s, or went"))
}
