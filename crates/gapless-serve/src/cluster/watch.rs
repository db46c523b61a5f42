//! The thread that watches a run across hosts: polls every agent (which renews its lease),
//! checkpoints the merged counts, and ends the run when every sender is done, when it is
//! stopped, or when an agent is lost (silent for [`super::LOST_AFTER`], or its lease ran
//! out). The other agents are then stopped, and what every agent said last is merged and
//! stored.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{merge, stop_members, ClusterRun, LOST_AFTER, POLL_EVERY};
use crate::db::Jobs as Table;
use crate::jobs::lock;
use crate::Shared;

/// After the last sender is done, the meters keep metering this long (frames in flight).
const LINGER: Duration = Duration::from_millis(500);
const CHECKPOINT: Duration = Duration::from_secs(1);

pub fn spawn(s: Shared, r: Arc<ClusterRun>) {
    let _ = std::thread::Builder::new()
        .name(format!("cluster-{}", r.id))
        .spawn(move || watch(&s, &r));
}

fn watch(s: &Shared, r: &ClusterRun) {
    let mut answered = vec![Instant::now(); r.members.len()];
    let mut saved = Instant::now();
    let mut done_at: Option<Instant> = None;
    let ending = loop {
        std::thread::sleep(POLL_EVERY);
        if r.stop.load(Ordering::Acquire) {
            break "stopped";
        }
        poll_round(r, &mut answered);
        r.polls.fetch_add(1, Ordering::Relaxed);
        if r.members.iter().any(|m| m.lost_why().is_some()) {
            break "agent_lost";
        }
        if r.members.iter().all(|m| m.said()["tx_done"] == true)
            && done_at.get_or_insert_with(Instant::now).elapsed() >= LINGER
        {
            break "finished";
        }
        if saved.elapsed() >= CHECKPOINT {
            saved = Instant::now();
            let so_far = merge::result(r, "running");
            let _ = lock(&s.db).checkpoint(Table::Runs, r.id, &so_far);
        }
    };
    stop_members(r.members.iter().filter(|m| m.lost_why().is_none()));
    let lost = r.members.iter().any(|m| m.lost_why().is_some());
    let ending = if lost { "agent_lost" } else { ending };
    let result = merge::result(r, ending);
    let error = lost.then(|| merge::lost_text(r));
    let _ = lock(&s.db).end(Table::Runs, r.id, ending, Some(&result), error.as_deref());
    *lock(&r.ending) = Some(ending.to_string());
    r.ended.store(true, Ordering::Release);
}

/// Polls every agent at once; one silent for longer than [`LOST_AFTER`], or whose lease
/// ran out, is lost.
fn poll_round(r: &ClusterRun, answered: &mut [Instant]) {
    let got: Vec<Result<Value, String>> = std::thread::scope(|sc| {
        let hs: Vec<_> = r
            .members
            .iter()
            .map(|m| sc.spawn(move || m.agent.post("poll", &json!({ "run": m.share.run }))))
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
            .collect()
    });
    for ((m, got), at) in r.members.iter().zip(got).zip(answered.iter_mut()) {
        let lost = match got {
            Ok(v) if v["expired"] == true => Some("its lease ran out: it stopped by itself".to_string()),
            Ok(v) => {
                *m.said() = v;
                *at = Instant::now();
                None
            }
            Err(why) if at.elapsed() > LOST_AFTER => Some(format!("silent for {} ms: {why}", at.elapsed().as_millis())),
            Err(_) => None,
        };
        if let Some(why) = lost {
            m.set_lost(why);
        }
    }
}
