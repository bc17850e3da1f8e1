//! `nodetool completions SHELL`: a shell completion script.

use crate::{Outcome, command, print_json};

pub(super) fn completions(shell: clap_complete::Shell, json: bool) -> Outcome {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command(), "nodetool", &mut script);
    let script = String::from_utf8_lossy(&script).into_owned();
    if json {
        print_json(
            &serde_json::json!({ "ok": true, "shell": shell.to_string(), "script": script }),
        );
    } else {
        out!("{script}");
    }
    Ok(())
}
