//! The scheduler on a fake clock: the merge, each `on_late` policy with an injected stall,
//! and throughput mode's coalescing, with exact counts and times.

use super::*;
use crate::{CompileCtx, ProfileSpec};

const MS: u64 = 1_000_000;

fn profile(toml: &str) -> Profile {
    struct NoFiles;
    impl crate::spec::files::FileLoader for NoFiles {
        fn load(&self, p: &str) -> Result<String, String> {
            Err(p.to_string())
        }
    }
    let ctx = CompileCtx {
        link_speed_bps: None,
        files: &NoFiles,
    };
    ProfileSpec::from_toml(toml, "test").unwrap().compile(&ctx).unwrap()
}

/// One chunk as the fake engine sent it.
#[derive(Debug, PartialEq)]
struct Sent1 {
    stream: usize,
    ats: Vec<u64>,
    t_send: u64,
}

/// Drives `s` as the engine does, on a fake clock that a busy-wait moves to each departure's
/// time; `stall(k)` adds that much before the k-th departure is sent.
fn drive(s: &mut Scheduler, stall: impl Fn(usize) -> u64) -> Vec<Sent1> {
    let mut out = vec![vec![0u8; 2048]; 64];
    let mut bufs = ChunkBufs::with_capacity(64);
    let mut now = 0u64;
    let mut log = Vec::new();
    let mut k = 0;
    while let Some(due) = s.next_due(|| now) {
        let r: Result<_, ()> = s.serve(due, &mut out, &mut bufs, 64, |c| {
            now += stall(k);
            let t_send = now.max(c.at);
            now = t_send;
            log.push(Sent1 {
                stream: due.stream,
                ats: c.ats.to_vec(),
                t_send,
            });
            let left = c.lens.len();
            Ok(Sent {
                t_send,
                when: t_send,
                left,
                timed: true,
                warmup: 0,
            })
        });
        assert!(r.is_ok());
        k += 1;
    }
    log
}

fn one_stream(on_late: &str, extra: &str) -> Profile {
    profile(&format!(
        "on_late = \"{on_late}\"\n[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 10\n{extra}"
    ))
}

/// A stall before departure 3 (due at 3 ms) that moves the clock from 2 ms (departure 2's
/// send) to 6.5 ms: departure 3 leaves 3.5 ms late.
fn stall_at_3(k: usize) -> u64 {
    if k == 3 {
        4 * MS + MS / 2
    } else {
        0
    }
}

/// Asserts the lateness histogram holds `want` (each within its 3-digit bucket), sorted.
fn assert_lateness(st: &StreamStats, want: &[u64]) {
    let h = st.lateness.view();
    let got: Vec<u64> = h
        .iter_recorded()
        .flat_map(|v| std::iter::repeat_n(v.value_iterated_to(), v.count_at_value() as usize))
        .collect();
    assert_eq!(got.len(), want.len(), "expected {want:?}, got {got:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(h.equivalent(*g, *w), "expected {want:?}, got {got:?}");
    }
}

#[test]
fn three_streams_are_merged_in_time_order_ties_by_stream() {
    let p = profile(
        "phases = \"aligned\"\n[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 4\n\
         [[stream]]\n[stream.timing]\nrate_pps = 500\ncount = 4\n\
         [[stream]]\n[stream.timing]\nrate_pps = 250\ncount = 4\nstart_offset_ns = 500000\n",
    );
    let mut s = Scheduler::new(&p, false, 1);
    let order: Vec<(usize, u64)> = drive(&mut s, |_| 0).iter().map(|c| (c.stream, c.ats[0])).collect();
    let want = vec![
        (0, 0),
        (1, 0),
        (2, MS / 2),
        (0, MS),
        (0, 2 * MS),
        (1, 2 * MS),
        (0, 3 * MS),
        (1, 4 * MS),
        (2, 4 * MS + MS / 2),
        (1, 6 * MS),
        (2, 8 * MS + MS / 2),
        (2, 12 * MS + MS / 2),
    ];
    assert_eq!(order, want, "expected departures by time, ties by stream index");
    assert!(s.is_done());
    let sent: Vec<u64> = s.stats().iter().map(|st| st.sent).collect();
    assert_eq!(sent, vec![4, 4, 4]);
}

#[test]
fn catch_up_sends_every_late_departure_at_once_after_a_stall() {
    let mut s = Scheduler::new(&one_stream("catch-up", ""), true, 1);
    let log = drive(&mut s, stall_at_3);
    let st = &s.stats()[0];
    assert_eq!((st.sent, st.skipped, st.shifted_ns), (10, 0, 0));
    // Departures 3..6 (due at 3..6 ms) leave at 6.5 ms, the rest on time.
    let sends: Vec<u64> = log.iter().map(|c| c.t_send).collect();
    let want: Vec<u64> = (0..10)
        .map(|i| if (3..=6).contains(&i) { 6 * MS + MS / 2 } else { i * MS })
        .collect();
    assert_eq!(sends, want);
    assert_eq!(st.late_events, 2, "departures 4 and 5 were seen more than a gap late");
    assert_eq!(st.late_over_gap, 3, "3.5, 2.5 and 1.5 ms late are over the 1 ms gap");
    assert_lateness(
        st,
        &[0, 0, 0, 0, 0, 0, MS / 2, MS + MS / 2, 2 * MS + MS / 2, 3 * MS + MS / 2],
    );
}

#[test]
fn skip_drops_the_departures_more_than_a_gap_past_and_resumes_on_schedule() {
    let mut s = Scheduler::new(&one_stream("skip", ""), true, 1);
    let log = drive(&mut s, stall_at_3);
    let st = &s.stats()[0];
    // The count is of frames sent: the two skipped departures are made up at the end.
    assert_eq!(
        (st.sent, st.skipped, st.late_events),
        (10, 2, 1),
        "departures 4 and 5 skipped"
    );
    let ats: Vec<u64> = log.iter().map(|c| c.ats[0]).collect();
    let want: Vec<u64> = [0, 1, 2, 3, 6, 7, 8, 9, 10, 11].iter().map(|i| i * MS).collect();
    assert_eq!(ats, want);
    assert_eq!(log[4].t_send, 6 * MS + MS / 2, "departure 6 leaves half a gap late");
    assert_eq!(st.late_over_gap, 1, "only the stalled departure was over a gap late");
}

#[test]
fn shift_moves_the_rest_of_the_schedule_by_the_lag() {
    let mut s = Scheduler::new(&one_stream("shift", ""), true, 1);
    let log = drive(&mut s, stall_at_3);
    let st = &s.stats()[0];
    assert_eq!((st.sent, st.skipped, st.late_events), (10, 0, 1));
    assert_eq!(st.shifted_ns, 2 * MS + MS / 2, "departure 4 was 2.5 ms late when seen");
    let ats: Vec<u64> = log.iter().map(|c| c.ats[0]).collect();
    let want: Vec<u64> = (0..10)
        .map(|i| if i >= 4 { i * MS + 2 * MS + MS / 2 } else { i * MS })
        .collect();
    assert_eq!(ats, want, "every departure from 4 on moves 2.5 ms later");
    assert!(
        log.iter().skip(4).all(|c| c.t_send == c.ats[0]),
        "and then leaves on time"
    );
    assert_eq!(st.late_over_gap, 1);
}

#[test]
fn throughput_mode_coalesces_departures_and_counts_how_early_each_left() {
    let mut s = Scheduler::new(&one_stream("catch-up", ""), true, 4);
    let log = drive(&mut s, |_| 0);
    let chunks: Vec<(Vec<u64>, u64)> = log.iter().map(|c| (c.ats.clone(), c.t_send)).collect();
    assert_eq!(
        chunks,
        vec![
            (vec![0, MS, 2 * MS, 3 * MS], 0),
            (vec![4 * MS, 5 * MS, 6 * MS, 7 * MS], 4 * MS),
            (vec![8 * MS, 9 * MS], 8 * MS),
        ]
    );
    let st = &s.stats()[0];
    assert_eq!(st.sent, 10);
    assert_eq!(st.early.len(), 7, "every frame but the first of each send left early");
    assert_eq!(st.early_over_half_gap, 7);
    let e = st.early.view();
    assert!(
        e.equivalent(e.max(), 3 * MS) && e.equivalent(e.min(), MS),
        "expected 1..3 ms early"
    );
    assert_eq!(st.lateness.len(), 3, "the first frame of each send, on time");
}

#[test]
fn an_unpaced_scheduler_never_applies_on_late_or_measures_lateness() {
    let mut s = Scheduler::new(&one_stream("skip", ""), false, 1);
    drive(&mut s, stall_at_3);
    let st = &s.stats()[0];
    assert_eq!((st.sent, st.skipped, st.late_events, st.lateness.len()), (10, 0, 0, 0));
}

#[test]
fn cbr_streams_are_spread_over_their_gap_unless_aligned() {
    let streams = "[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 2\n\
         [[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 2\n\
         [[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 2\npattern = \"poisson\"\n\
         [[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 2\nstart_offset_ns = 7\n\
         [[stream]]\n[stream.timing]\nrate_pps = 500\ncount = 2\n";
    let offsets = |p: &Profile| -> Vec<u64> { p.streams.iter().map(|s| s.start_offset_ns).collect() };
    // Three CBR streams start with the run: k/3 of their own gap each. The Poisson stream and
    // the one with its own offset keep theirs.
    assert_eq!(offsets(&profile(streams)), vec![0, 333_333, 0, 7, 1_333_333]);
    let aligned = profile(&format!("phases = \"aligned\"\n{streams}"));
    assert_eq!(offsets(&aligned), vec![0, 0, 0, 7, 0]);
    let mut s = Scheduler::new(&profile(streams), false, 1);
    let log = drive(&mut s, |_| 0);
    let first = |i: usize| log.iter().find(|c| c.stream == i).map(|c| c.ats[0]);
    assert_eq!(
        (first(1), first(4)),
        (Some(333_333), Some(1_333_333)),
        "the schedules start at their offsets"
    );
}

/// Every frame (stream, scheduled time, bytes) in the order `s` sends them, with at most
/// `max_batch` frames per chunk; and the number of chunks.
fn frames_sent(s: &mut Scheduler, max_batch: usize) -> (Vec<(usize, u64, Vec<u8>)>, usize) {
    let mut out = vec![vec![0u8; 2048]; max_batch];
    let mut bufs = ChunkBufs::with_capacity(max_batch);
    let (mut frames, mut chunks) = (Vec::new(), 0);
    while let Some(due) = s.next_due(|| 0) {
        let r: Result<_, ()> = s.serve(due, &mut out, &mut bufs, max_batch, |c| {
            for (j, (&len, &at)) in c.lens.iter().zip(c.ats).enumerate() {
                frames.push((due.stream, at, c.out[j][..len].to_vec()));
            }
            chunks += 1;
            Ok(Sent {
                t_send: 0,
                when: 0,
                left: c.lens.len(),
                timed: false,
                warmup: 0,
            })
        });
        assert!(r.is_ok());
    }
    (frames, chunks)
}

#[test]
fn in_order_chunks_send_the_same_frames_in_the_same_order_as_one_per_step() {
    let toml = "[[stream]]\nsize = 64\n[[stream.field]]\nfield = \"src_port\"\nop = \"random\"\n\
         from = 1\nto = 60000\n[stream.timing]\nrate_pps = 1000\ncount = 200\n\
         [[stream]]\nsize = 100\n[stream.timing]\nrate_pps = 130\ncount = 30\npattern = \"poisson\"\n\
         [[stream]]\nsize = 80\n[stream.timing]\nrate_pps = 1000\ncount = 50\nburst = 3\n\
         [[stream]]\nsize = 70\n[stream.timing]\nrate_pps = 1000\ncount = 40\nstart_offset_ns = 7\n";
    let p = profile(toml);
    let (one, steps) = frames_sent(&mut Scheduler::new(&p, false, 1), 1);
    let mut chunked = Scheduler::new(&p, false, 1).chunk_in_order();
    let (many, chunks) = frames_sent(&mut chunked, 32);
    assert_eq!(one.len(), 200 + 30 + 50 + 40, "frames one per step");
    assert_eq!(many.len(), one.len(), "expected as many frames chunked as one per step");
    for (k, (a, b)) in one.iter().zip(&many).enumerate() {
        assert_eq!(a, b, "frame {k}: expected the same stream, time and bytes");
    }
    assert!(
        chunks < steps / 2,
        "expected far fewer chunks ({chunks}) than steps ({steps})"
    );
    let sent: Vec<u64> = chunked.stats().iter().map(|st| st.sent).collect();
    assert_eq!(sent, vec![200, 30, 50, 40]);
    let bytes: Vec<u64> = chunked.stats().iter().map(|st| st.bytes).collect();
    assert_eq!(bytes, vec![200 * 64, 30 * 100, 50 * 80, 40 * 70]);
}

#[test]
fn a_paced_scheduler_never_chunks_in_order() {
    let p = one_stream("catch-up", "");
    let mut s = Scheduler::new(&p, true, 1).chunk_in_order();
    let (_, chunks) = frames_sent(&mut s, 32);
    assert_eq!(chunks, 10, "expected one chunk per departure when paced");
}

#[test]
fn in_order_chunks_end_a_timed_stream_and_break_at_ties_as_one_per_step_does() {
    // Stream 0 plans its blocks on the integer path: its duration ends it inside a block,
    // and stream 1's departures (one of them at the same time, 1 ms) cut its blocks.
    let toml = "[[stream]]\nsize = 66\n[stream.timing]\nrate_pps = 1000\nduration_s = 0.0305\n\
         [[stream]]\nsize = 64\n[stream.timing]\nrate_pps = 300\ncount = 12\nstart_offset_ns = 1000000\n";
    let p = profile(toml);
    let (one, _) = frames_sent(&mut Scheduler::new(&p, false, 1), 1);
    let mut chunked = Scheduler::new(&p, false, 1).chunk_in_order();
    let (many, chunks) = frames_sent(&mut chunked, 64);
    assert_eq!(one.len(), 31 + 12, "frames one per step");
    assert_eq!(many, one, "expected the same stream, time and bytes for every frame");
    assert_eq!(many[1].0, 0, "expected stream 0 first at the 1 ms tie");
    // Stream 1's 9 frames before 30 ms cut stream 0 into 10 blocks; its last 3 are one.
    assert_eq!(
        chunks,
        10 + 9 + 1,
        "expected stream 0's blocks cut by each of stream 1's frames"
    );
    let sent: Vec<u64> = chunked.stats().iter().map(|st| st.sent).collect();
    assert_eq!(sent, vec![31, 12]);
}

#[test]
fn frames_the_backend_refused_are_counted_per_stream_apart_from_those_sent() {
    let p = profile(
        "phases = \"aligned\"\n[[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 6\n\
         [[stream]]\n[stream.timing]\nrate_pps = 1000\ncount = 6\n",
    );
    let mut s = Scheduler::new(&p, false, 1);
    let mut out = vec![vec![0u8; 2048]; 4];
    let mut bufs = ChunkBufs::with_capacity(4);
    let mut k = 0;
    while let Some(due) = s.next_due(|| 0) {
        // Stream 1's every other departure is refused (a full socket buffer, a link down).
        let refuse = due.stream == 1 && k % 2 == 0;
        let r: Result<_, ()> = s.serve(due, &mut out, &mut bufs, 4, |c| {
            Ok(Sent {
                t_send: c.at,
                when: c.at,
                left: if refuse { 0 } else { c.lens.len() },
                timed: true,
                warmup: 0,
            })
        });
        assert!(r.is_ok());
        if due.stream == 1 {
            k += 1;
        }
    }
    let st = s.into_stats(None);
    let got: Vec<(u64, u64)> = st.iter().map(|x| (x.sent, x.failed)).collect();
    assert_eq!(got, [(6, 0), (3, 3)], "expected (sent, failed) per stream");
}
