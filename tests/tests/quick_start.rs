//! The README's quick start and `.ci/run` say the same thing: CI installs exactly the system
//! packages the README lists and runs the README's test command verbatim, so a person who
//! follows the README does what CI does.

use std::path::Path;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The commands of every `sh` block of the quick start (before `## Layout`), one per line.
fn quick_start_commands(readme: &str) -> Vec<String> {
    let start = readme
        .find("## Quick start")
        .unwrap_or_else(|| panic!("the README has no quick start"));
    let end = readme[start..]
        .find("\n## ")
        .map_or(readme.len(), |i| start + i);
    let mut commands = Vec::new();
    let mut in_block = false;
    for line in readme[start..end].lines() {
        match line.trim() {
            "```sh" => in_block = true,
            "```" => in_block = false,
            command if in_block && !command.is_empty() => commands.push(command.to_string()),
            _ => {}
        }
    }
    commands
}

#[test]
fn ci_runs_the_readme_quick_start_verbatim() {
    let readme = read("README.md");
    let ci = read(".ci/run");
    let commands = quick_start_commands(&readme);
    assert_eq!(
        commands.len(),
        4,
        "requirements, run, test, install: {commands:?}"
    );
    let [requirements, run, test, install] = [0, 1, 2, 3].map(|i| commands[i].as_str());
    assert!(
        requirements.starts_with("sudo apt-get install -y "),
        "{requirements}"
    );
    assert_eq!(
        run,
        "cargo run --release -p nodetool-cli -- run examples/distance.js"
    );
    assert_eq!(install, "cargo install --path cli --locked");

    // The test command is .ci/run's last command, as written.
    let last = ci
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or_default();
    assert_eq!(
        last, test,
        ".ci/run must end by running the README's test command"
    );

    // The packages .ci/run installs are the README's.
    let listed: Vec<&str> = requirements
        .trim_start_matches("sudo apt-get install -y ")
        .split_whitespace()
        .collect();
    let installed: Vec<&str> = ci
        .lines()
        .find_map(|l| l.trim().strip_prefix("packages=("))
        .and_then(|l| l.strip_suffix(')'))
        .unwrap_or_else(|| panic!(".ci/run has no packages=(...) line"))
        .split_whitespace()
        .collect();
    assert_eq!(installed, listed);
}
