//! A run that ends with sleeps still pending leaves no timer thread behind: each `sleep` stops
//! its thread when the run drops it. (Its own test binary, so no other test's sleeps count.)

use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_protocol::catalog::Resolution;
use nodetool_protocol::value::Value;

/// Threads of this process named `nodetool-sleep` (Linux: `/proc/self/task/*/comm`).
fn timer_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(Result::ok)
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "nodetool-sleep")
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
#[cfg(target_os = "linux")]
fn pending_sleeps_stop_their_timers_when_the_run_ends() {
    let resolution = Resolution {
        modules: vec![],
        statuses: vec![],
    };
    let outcome = Sandbox::new().run(RunRequest {
        // A hundred long sleeps started and polled (while the body awaits a short one), never
        // awaited themselves; the body then returns.
        code: "for (let i = 0; i < 100; i++) sleep(20000);\nawait sleep(5);\nreturn 1;",
        resolution: &resolution,
        inputs: &Value::Null,
        limits: RunLimits::STANDARD,
        capabilities: Capabilities::default(),
        dispatchers: Dispatchers {
            host: None,
            wasm: None,
        },
        cancel: None,
    });
    assert_eq!(outcome.result.ok(), Some(Value::Number(1.0)));
    // Each stopped thread exits as soon as it is scheduled; wait for that (bounded), then
    // require none left. Without the stop they would all sleep for 20 s.
    for _ in 0..500 {
        if timer_threads() == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(timer_threads(), 0);
}
