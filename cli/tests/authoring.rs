//! `docs/authoring-packs.md`, followed verbatim: every file it shows is written, its WAT is
//! compiled, and every `nodetool` command of its `sh` blocks runs in order and must print what
//! the guide shows under it (stdout, then stderr). The guide's one step that needs the network
//! (`npm install` of js-yaml) is replaced by copying the checkout's js-yaml, installed by
//! `cargo xtask ci` from `packs/package-lock.json`.

use std::fs;

use nodetool_tests::world::{World, copy_dir, must, repo_root};

/// `File \`PATH\`:`, a blank line, then a fenced block: the path and the block's text.
fn files(doc: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let lines: Vec<&str> = doc.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let path = lines[i]
            .strip_prefix("File `")
            .and_then(|rest| rest.strip_suffix("`:"));
        if let Some(path) = path
            && lines.get(i + 1) == Some(&"")
            && lines.get(i + 2).is_some_and(|l| l.starts_with("```"))
        {
            let mut body = String::new();
            let mut j = i + 3;
            while j < lines.len() && !lines[j].starts_with("```") {
                body.push_str(lines[j]);
                body.push('\n');
                j += 1;
            }
            out.push((path.to_string(), body));
            i = j;
        }
        i += 1;
    }
    out
}

/// Every `$ nodetool ...` line of the `sh` blocks with the output lines under it.
fn commands(doc: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    let mut in_sh = false;
    for line in doc.lines() {
        if line == "```sh" {
            in_sh = true;
            continue;
        }
        if in_sh && line.starts_with("```") {
            in_sh = false;
            continue;
        }
        if !in_sh {
            continue;
        }
        match line.strip_prefix("$ nodetool ") {
            Some(command) => out.push((
                command.split_whitespace().map(str::to_string).collect(),
                Vec::new(),
            )),
            None => {
                if let Some(last) = out.last_mut() {
                    last.1.push(line.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn the_authoring_guide_builds_its_three_packs() {
    let root = repo_root();
    let doc = must(
        fs::read_to_string(root.join("docs/authoring-packs.md")),
        "read the guide",
    );
    let world = World::new();
    let work = world.work();
    let shown = files(&doc);
    assert!(shown.len() >= 10, "the guide shows {} files", shown.len());
    for (path, text) in &shown {
        let target = work.join(path);
        must(
            fs::create_dir_all(target.parent().unwrap_or(&work)),
            "create a directory",
        );
        must(fs::write(&target, text), "write a file of the guide");
        if path.ends_with(".wat") {
            let binary = must(wat::parse_str(text), "compile the guide's WAT");
            must(
                fs::write(target.with_extension("wasm"), binary),
                "write the WASM binary",
            );
        }
    }
    copy_dir(
        &root.join("packs/node_modules/js-yaml"),
        &work.join("my-packs/@acme/yaml/node_modules/js-yaml"),
    );
    let steps = commands(&doc);
    assert!(steps.len() >= 8, "the guide runs {} commands", steps.len());
    for (args, expected) in steps {
        let mut cmd = world.command(env!("CARGO_BIN_EXE_nodetool"));
        let output = must(cmd.args(&args).output(), "run nodetool");
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let printed: Vec<&str> = printed.lines().collect();
        let want_failure = expected.iter().any(|l| l.starts_with("error["));
        assert_eq!(
            output.status.code(),
            Some(if want_failure { 1 } else { 0 }),
            "nodetool {}:\n{}",
            args.join(" "),
            printed.join("\n")
        );
        assert_eq!(
            printed.len(),
            expected.len(),
            "nodetool {}:\n{}",
            args.join(" "),
            printed.join("\n")
        );
        for (got, want) in printed.iter().zip(&expected) {
            match want.strip_suffix('…') {
                Some(prefix) => assert!(
                    got.starts_with(prefix),
                    "nodetool {}: {got:?} does not start with {prefix:?}",
                    args.join(" ")
                ),
                None => assert_eq!(got, want, "nodetool {}", args.join(" ")),
            }
        }
    }
}

/// `packs new --kind npm` passes `packs doctor` once its library is installed (here the
/// checkout's js-yaml, as above) and compiled, and its SKILL.md example runs.
#[test]
fn an_npm_scaffold_passes_doctor_once_installed_and_compiled() {
    let root = repo_root();
    let world = World::new();
    let packs = world.path().join("packs");
    let run = |args: &[&str], stdin: &str| {
        let mut cmd = assert_cmd::Command::from_std(world.command(env!("CARGO_BIN_EXE_nodetool")));
        must(
            cmd.current_dir(world.path())
                .args(args)
                .write_stdin(stdin)
                .output(),
            "run nodetool",
        )
    };
    let packs_arg = packs.display().to_string();
    let new = run(
        &[
            "packs",
            "new",
            "@acme/yml",
            "--kind",
            "npm",
            "--dir",
            &packs_arg,
        ],
        "",
    );
    assert!(new.status.success(), "{new:?}");
    copy_dir(
        &root.join("packs/node_modules/js-yaml"),
        &packs.join("@acme/yml/node_modules/js-yaml"),
    );
    let compile = run(&["--packs", &packs_arg, "packs", "compile"], "");
    assert!(compile.status.success(), "{compile:?}");
    let doctor = run(
        &[
            "--packs",
            &packs_arg,
            "packs",
            "doctor",
            "@acme/yml",
            "--deny-warnings",
        ],
        "",
    );
    assert!(doctor.status.success(), "{doctor:?}");
    let body = "import { load } from \"@acme/yml\";\nreturn load(\"a: 1\");";
    let out = run(&["--packs", &packs_arg, "run", "-", "--json"], body);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\"result\":{\"a\":1}"),
        "{out:?}"
    );
}
