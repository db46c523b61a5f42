//! `gapless serve` as a process: a busy interface is a 409 and a stopped run keeps what it
//! measured (on a testbed); a server killed with SIGKILL leaves its run "interrupted" with
//! its last checkpoint, found after a restart; Ctrl-C ends the server promptly and stores
//! the run it stops; off loopback it refuses to start without a token.

mod common;
use common::*;

use std::path::Path;
use std::time::{Duration, Instant};

use gapless_serve::testing::{events_until_end, http, json};

const NULL_LONG: &str = "[[stream]]\nname = \"a\"\n[stream.timing]\nrate_pps = 1000\nduration_s = 60\n";

#[test]
fn a_busy_interface_is_a_409_and_a_stopped_run_keeps_what_it_measured() {
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let (_srv, addr) = serve_process(&dir.path().join("g.db"));
    let tb = serde_json::json!({ "toml": NULL_LONG.replace("1000", "2000"), "testbed": bed.0.tx_ns().trim_end_matches("-tx") });
    let id = start_run(addr, tb.clone());
    let (st, b) = http(addr, "POST", "/api/runs", tb.to_string().as_bytes(), None);
    assert_eq!(
        st, 409,
        "expected 409 for a second run on the busy testbed; got {st}: {b}"
    );
    let v = json(&b);
    let busy = format!("{}/{} is busy", bed.tx_ns(), bed.tx_if());
    assert_eq!(v["run"], id, "{b}");
    assert!(v["error"].as_str().unwrap().contains(&busy), "expected {busy:?} in {b}");
    // A calibration on the same testbed is refused too.
    let cal = serde_json::json!({ "testbed": tb["testbed"], "duration": 1 });
    let (st, b) = http(addr, "POST", "/api/calibrations", cal.to_string().as_bytes(), None);
    assert_eq!(
        st, 409,
        "expected 409 for a calibration on the busy testbed; got {st}: {b}"
    );
    assert!(b.contains(&format!("busy with run {id}")), "{b}");
    // A run on null is not held up by the busy interface; but on two cores it would take
    // the core the server keeps for itself, so it is refused for that, and says so.
    let null = serde_json::json!({ "toml": NULL_LONG.replace("60", "1"), "options": { "null": true } });
    if gapless_engine::rx::allowed_cores().len() > 2 {
        start_run(addr, null);
    } else {
        let (st, b) = http(addr, "POST", "/api/runs", null.to_string().as_bytes(), None);
        assert!(
            st == 409 && json(&b)["kind"] == "NoCoreLeft" && b.contains("keeps one core"),
            "expected 409 NoCoreLeft for a second run on a 2-core machine; got {st}: {b}"
        );
    }
    std::thread::sleep(Duration::from_millis(800));
    let (st, b) = http(addr, "POST", &format!("/api/runs/{id}/stop"), b"", None);
    assert_eq!(st, 200, "{b}");
    let (_, end) = events_until_end(addr, id);
    assert_eq!(end["status"], "stopped", "{end}");
    let run = json(&http(addr, "GET", &format!("/api/runs/{id}"), b"", None).1);
    let r = &run["result"];
    let sent = r["sent_frames"].as_u64().unwrap();
    let sum = |k: &str| -> i64 {
        r["rx"]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s[k].as_i64().unwrap())
            .sum()
    };
    assert!(sent > 500, "about 0.8 s at 2 kpps was sent before the stop; got {sent}");
    assert_eq!(r["interrupted"], true);
    // Every frame sent before the stop is accounted for: received, or counted lost (a veth
    // drops when this VM's host stalls the receiving CPU).
    let (got, lost) = (sum("rx_frames"), sum("lost_vs_tx"));
    assert_eq!(
        (got + lost, got > 0),
        (sent as i64, true),
        "received {got} + lost {lost} against sent {sent}"
    );
    assert_eq!(
        http(addr, "POST", &format!("/api/runs/{id}/stop"), b"", None).0,
        409,
        "no longer running"
    );
    let short =
        serde_json::json!({ "toml": NULL_LONG.replace("duration_s = 60", "count = 100"), "testbed": tb["testbed"] });
    start_run(addr, short);
}

/// A server process with a paced 1 kpps run on null going for `after`: the process (not
/// killed when dropped) and the run's id.
fn serve_a_running_run(db: &Path, after: Duration) -> (std::process::Child, i64) {
    let (mut srv, addr) = serve_process(db);
    let id = start_run(
        addr,
        serde_json::json!({ "toml": NULL_LONG, "options": { "null": true, "pace": true } }),
    );
    std::thread::sleep(after);
    (srv.take(), id)
}

#[test]
fn a_killed_server_leaves_its_run_interrupted_with_its_last_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("g.db");
    let (mut child, id) = serve_a_running_run(&db, Duration::from_millis(2500));
    child.kill().unwrap(); // SIGKILL: nothing is flushed or ended.
    child.wait().unwrap();
    let (_srv, addr) = serve_process(&db);
    let run = json(&http(addr, "GET", &format!("/api/runs/{id}"), b"", None).1);
    assert_eq!(run["status"], "interrupted", "{run}");
    let sent = run["result"]["checkpoint"]["total"]["tx"]["sent"].as_u64().unwrap_or(0);
    assert!(
        sent >= 900,
        "expected a checkpoint from after the first second (≥ 900 of 1 kpps); got {sent}: {}",
        run["result"]
    );
    let list = json(&http(addr, "GET", "/api/runs", b"", None).1);
    assert_eq!(list["runs"][0]["brief"]["checkpoint"], true, "{list}");
}

#[test]
fn ctrl_c_ends_the_server_promptly_and_stores_the_run_it_stops() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("g.db");
    let (mut child, id) = serve_a_running_run(&db, Duration::from_millis(700));
    // SAFETY: kill(2) with a child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the server did not end within 5 s of Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "expected exit 0 after Ctrl-C; got {status}");
    let (_srv, addr) = serve_process(&db);
    let run = json(&http(addr, "GET", &format!("/api/runs/{id}"), b"", None).1);
    assert_eq!(run["status"], "stopped", "{run}");
    let sent = run["result"]["sent_frames"].as_u64().unwrap();
    assert!(
        (500..=2000).contains(&sent),
        "expected about 0.7 s at 1 kpps sent; got {sent}"
    );
    assert!(
        run["files"].as_array().unwrap().iter().any(|f| f == "result.json"),
        "{run}"
    );
}

#[test]
fn off_loopback_the_server_refuses_to_start_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("g.db");
    let o = gapless(&["serve", "--listen", "0.0.0.0:18089", "--db", db.to_str().unwrap()]);
    expect_error(&o, &["refusing to listen on 0.0.0.0:18089 without a token", "Fix"]);
    let o = gapless(&[
        "serve",
        "--listen",
        "127.0.0.1:18089",
        "--otg-listen",
        "0.0.0.0:18090",
        "--db",
        db.to_str().unwrap(),
    ]);
    expect_error(&o, &["refusing to listen on 0.0.0.0:18090 without a token"]);
    assert!(!db.exists(), "nothing was created before refusing");
}

/// A small sweep on `bed`: 2 rates x 1 repetition of 0.4 s trials.
fn sweep_toml(bed: &Bed) -> String {
    format!(
        "name = \"s\"\nmethod = \"sweep\"\ntx = {{ iface = \"{}\", netns = \"{}\" }}\nrx = {{ iface = \"{}\", netns = \"{}\" }}\n\
         [trial]\nduration_s = 0.4\nwarmup_s = 0.1\nsettle_s = 0.1\nmax_retries = 0\n\
         [sweep]\nparameter = \"rate\"\nvalues = [2000, 4000]\n\
         [profile]\n[[profile.stream]]\nname = \"s\"\nsize = 64\n[profile.stream.timing]\nrate_pps = 1000\n",
        bed.tx_if(),
        bed.tx_ns(),
        bed.rx_if(),
        bed.rx_ns()
    )
}

#[test]
fn an_experiment_streams_its_trials_holds_its_ports_and_stores_its_report() {
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let (_srv, addr) = serve_process(&dir.path().join("g.db"));
    let (st, b) = http(addr, "POST", "/api/experiments", sweep_toml(&bed).as_bytes(), None);
    assert_eq!(st, 201, "expected the experiment to start; got {st}: {b}");
    let id = json(&b)["id"].as_i64().unwrap();
    // Its ports are held: a run on the same testbed is refused while it goes on.
    let name = bed.tx_ns().trim_end_matches("-tx").to_string();
    let run = serde_json::json!({ "toml": NULL_LONG, "testbed": name });
    let (st, b) = http(addr, "POST", "/api/runs", run.to_string().as_bytes(), None);
    assert_eq!(
        st, 409,
        "expected 409 while the experiment holds the testbed; got {st}: {b}"
    );
    assert_eq!(json(&b)["experiment"], id, "{b}");
    // Its events: a trial event per trial as judged, then the end.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    use std::io::{Read, Write};
    write!(
        s,
        "GET /api/experiments/{id}/events HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert_eq!(
        text.matches("event: trial").count(),
        2,
        "expected 2 trial events; got {text}"
    );
    assert!(
        text.contains("event: end\ndata: {\"error\":null,\"status\":\"finished\"}"),
        "{text}"
    );
    let x = json(&http(addr, "GET", &format!("/api/experiments/{id}"), b"", None).1);
    assert_eq!(x["status"], "finished", "{x}");
    assert_eq!(x["result"]["trials"].as_array().unwrap().len(), 2, "{}", x["result"]);
    assert!(x["summary"].as_str().unwrap().contains("sweep"), "{}", x["summary"]);
    let files: Vec<&str> = x["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for f in ["experiment.json", "trials.csv"] {
        assert!(files.contains(&f), "expected {f} among {files:?}");
    }
    assert!(
        files.iter().any(|f| f.ends_with(".png")),
        "expected plots among {files:?}"
    );
    let (st, csv) = http(
        addr,
        "GET",
        &format!("/api/experiments/{id}/files/trials.csv"),
        b"",
        None,
    );
    assert_eq!((st, csv.lines().count()), (200, 3), "a header and 2 trials: {csv}");
    // The interfaces are free again.
    let short = serde_json::json!({ "toml": NULL_LONG.replace("duration_s = 60", "count = 10"), "testbed": name });
    start_run(addr, short);
}

#[test]
fn an_experiment_that_would_read_files_is_refused_with_the_key() {
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let (_srv, addr) = serve_process(&dir.path().join("g.db"));
    let t = sweep_toml(&bed);
    let cases = [
        (
            format!("profile = \"/etc/passwd\"\n{}", &t[..t.find("[profile]").unwrap()]),
            "names a file",
        ),
        (
            format!("calibration = \"/etc/passwd\"\n{t}"),
            "calibration names a file",
        ),
        (t.replace("values = [2000, 4000]", "values = []"), "experiment"),
        ("method = \"nope\"".to_string(), "experiment"),
    ];
    for (body, says) in cases {
        let (st, b) = http(addr, "POST", "/api/experiments", body.as_bytes(), None);
        assert_eq!(st, 422, "expected 422 for {body}; got {st}: {b}");
        assert!(b.contains(says), "expected {says:?} in {b}");
    }
}

#[test]
fn a_calibration_made_on_the_server_is_used_by_a_run_by_its_id() {
    let bed = Bed::up();
    let dir = tempfile::tempdir().unwrap();
    let (_srv, addr) = serve_process(&dir.path().join("g.db"));
    let name = bed.tx_ns().trim_end_matches("-tx").to_string();
    let body = serde_json::json!({ "testbed": name, "rate_pps": 5000, "duration": 1 });
    let (st, b) = http(addr, "POST", "/api/calibrations", body.to_string().as_bytes(), None);
    assert_eq!(st, 200, "expected the calibration to run; got {st}: {b}");
    let c = json(&b);
    let id = c["id"].as_i64().unwrap();
    assert!(c["summary"].as_str().unwrap().contains("latency offset"), "{b}");
    let offset = c["calibration"]["latency_offset_ns"].as_i64().unwrap();
    assert!(offset > 0, "a veth hop takes time: offset {offset} ns");
    let list = json(&http(addr, "GET", "/api/calibrations", b"", None).1);
    assert_eq!(list["calibrations"][0]["id"], id, "{list}");
    let run = serde_json::json!({ "toml": NULL_LONG.replace("duration_s = 60", "count = 2000"), "testbed": name,
                                  "calibration": id, "options": { "use_invalid_calibration": true } });
    let rid = start_run(addr, run);
    let (_, end) = events_until_end(addr, rid);
    assert_eq!(end["status"], "finished", "{end}");
    let r = json(&http(addr, "GET", &format!("/api/runs/{rid}"), b"", None).1);
    let cal = &r["result"]["rx"]["calibration"];
    assert_eq!(
        cal["latency_offset_ns"].as_i64(),
        Some(offset),
        "the run's meter took the calibration's offset: {cal}"
    );
    let (st, b) = http(
        addr,
        "POST",
        "/api/calibrations",
        br#"{"testbed": "gl", "rate_pps": -1}"#,
        None,
    );
    assert_eq!(st, 400, "a negative rate: {b}");
}
