//! `nodetool serve` is the `nodetool-server` front end behind the CLI's own search path: it
//! listens, answers, and stops cleanly on SIGTERM; a bad pack root is a usage error (exit 2).

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodetool_tests::world::{World, must, shipped_packs};

/// `nodetool` in `world` (the repo's shipped packs), logging warnings only.
fn nodetool(world: &World) -> Command {
    let mut command = world.command(env!("CARGO_BIN_EXE_nodetool"));
    command.env("RUST_LOG", "warn");
    command
}

#[test]
fn serve_listens_answers_and_stops_on_sigterm() {
    let world = World::with_shipped(shipped_packs());
    let mut child = must(
        nodetool(&world)
            .args(["serve", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn(),
        "start nodetool serve",
    );
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut line = String::new();
    must(
        BufReader::new(stdout).read_line(&mut line),
        "read the address",
    );
    let base = line
        .trim()
        .strip_prefix("nodetool-server listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    let mut response = must(
        ureq::post(&format!("{base}/api/run"))
            .header("content-type", "application/json")
            .send(r#"{"code": "import { haversine } from \"@nodetool-ai/sandbox-geo\";\nreturn Math.round(haversine({lat: 0, lon: 0}, {lat: 0, lon: 1}));"}"#),
        "POST /api/run",
    );
    let body = must(response.body_mut().read_to_string(), "read the answer");
    let out: serde_json::Value = must(serde_json::from_str(&body), "run JSON");
    assert_eq!(out["ok"], serde_json::json!(true), "{out}");
    assert_eq!(out["result"], serde_json::json!(111));

    let killed = must(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status(),
        "run kill",
    );
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = must(child.try_wait(), "poll nodetool serve") {
            break status;
        }
        assert!(Instant::now() < deadline, "nodetool serve did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}

#[test]
fn serve_with_a_missing_pack_root_is_a_usage_error() {
    let world = World::with_shipped(shipped_packs());
    let output = must(
        nodetool(&world)
            .args(["serve", "--port", "0", "--packs"])
            .arg(world.path().join("missing"))
            .output(),
        "run nodetool serve",
    );
    assert_eq!(output.status.code(), Some(2));
    let mut stderr = String::new();
    let _ = output.stderr.as_slice().read_to_string(&mut stderr);
    assert!(
        stderr.starts_with("nodetool: the pack root ")
            && stderr.contains("does not exist or is not a directory"),
        "{stderr}"
    );
}
