//! The packet path's cores (engine::cores): while a run goes on, every other thread of the
//! process (one started before the run, the caller's own) is off its send loop's core, and
//! gets its cores back when the run ends; a run that would take every core is refused under
//! the server's policy and warned about under the CLI's. One test function: the policy and
//! the held cores are process-wide.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gapless_core::ProfileSpec;
use gapless_engine::cores::{self, Policy};
use gapless_engine::{EngineError, Pacing, ProfileSource, Run, RunSpec, TxTarget};

const ENDLESS: &str = "[[stream]]\nname = \"a\"\n[stream.timing]\nrate_pps = 20000\n";

fn spec(cores: Vec<usize>) -> RunSpec {
    let source = ProfileSource {
        spec: ProfileSpec::from_toml(ENDLESS, "test").expect("a valid profile"),
        dir: ".".into(),
        label: "test".into(),
    };
    RunSpec {
        pacing: Pacing::On,
        cores,
        ..RunSpec::new(source, TxTarget::Null)
    }
}

fn mask(tid: i32) -> Vec<usize> {
    cores::current_mask(tid).expect("sched_getaffinity")
}

#[test]
fn other_threads_keep_off_the_send_loops_core_while_a_run_holds_it() {
    let all = cores::cpuset().to_vec();
    assert!(all.len() >= 2, "this test needs 2 cores; the process has {all:?}");
    cores::init(Policy::Share);
    // A thread that exists before the run, as a server's workers do.
    let (tid, stop) = (Arc::new(AtomicI32::new(0)), Arc::new(AtomicBool::new(false)));
    let (t, s) = (tid.clone(), stop.clone());
    let bystander = std::thread::spawn(move || {
        t.store(unsafe { libc::gettid() }, Ordering::SeqCst);
        while !s.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let tid = tid.load(Ordering::SeqCst);
    let core = *all.last().unwrap();
    let run = Run::start(RunSpec {
        core: Some(core),
        ..spec(Vec::new())
    })
    .expect("a paced null run starts");
    std::thread::sleep(Duration::from_millis(200));
    let rest: Vec<usize> = all.iter().copied().filter(|&c| c != core).collect();
    assert_eq!(
        cores::held(),
        vec![core],
        "expected the run to hold its send loop's core"
    );
    assert_eq!(mask(tid), rest, "expected the bystander thread off core {core}");
    assert_eq!(mask(0), rest, "expected the caller's thread off core {core}");
    run.stop();
    let r = run.wait().expect("the run reports");
    assert_eq!(
        r.result.environment.tx_core,
        Some(core),
        "expected the send loop pinned to {core}"
    );
    assert!(
        cores::held().is_empty(),
        "expected nothing held after the run; got {:?}",
        cores::held()
    );
    assert_eq!(mask(tid), all, "expected the bystander's cores back after the run");
    assert_eq!(mask(0), all, "expected the caller's cores back after the run");

    // Every core for send loops: the server refuses, the CLI warns.
    cores::init(Policy::KeepOne);
    match Run::start(spec(all.clone())) {
        Err(EngineError::NoCoreLeft { asked, cpuset, .. }) => assert_eq!((asked, cpuset), (all.clone(), all.clone())),
        Err(e) => panic!("expected NoCoreLeft, got {e}"),
        Ok(h) => {
            h.stop();
            panic!("expected the server's policy to refuse a run on every core; it started");
        }
    }
    assert!(cores::held().is_empty(), "a refused run holds nothing");
    cores::init(Policy::Share);
    let h = Run::start(spec(all.clone())).expect("the CLI's policy lets it run");
    std::thread::sleep(Duration::from_millis(100));
    h.stop();
    let r = h.wait().expect("reports");
    assert!(
        r.result.warnings.iter().any(|w| w.contains("holds every core")),
        "expected a warning that every core was held; got {:?}",
        r.result.warnings
    );
    stop.store(true, Ordering::Relaxed);
    bystander.join().unwrap();
}
