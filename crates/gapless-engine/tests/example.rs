//! The run API example (examples/run_api.rs) runs as written.

#[path = "../examples/run_api.rs"]
mod run_api;

#[test]
fn the_run_api_example_runs_to_its_end() {
    let r = run_api::main();
    assert!(
        r.is_ok(),
        "expected the example to run, got {:?}",
        r.err().map(|e| e.to_string())
    );
}
