//! The binary works wherever it is installed: it links no OCR library at build time, carries
//! its shipped packs inside it, reads nothing of the source tree it was built from, and never
//! writes into the current directory.
//!
//! The copied binary is this build's `nodetool`, alone in an empty directory, run with an empty
//! `HOME` from an empty working directory. The shipped yaml pack's npm library is installed on
//! first use by "npm": here a stand-in that checks it is asked for `npm ci --ignore-scripts` of
//! the shipped packs' own lockfile and copies `packs/node_modules` (which `cargo xtask ci`
//! installs from that same lockfile), so nothing touches the network.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use nodetool_tests::world::{World, must, repo_root as source_tree};
use serde_json::Value;

#[test]
fn the_cli_needs_no_tesseract_or_leptonica_to_load() {
    let binary = env!("CARGO_BIN_EXE_nodetool");
    let output = Command::new("readelf").args(["-d", binary]).output();
    let output = must(output, "run readelf -d (Debian: binutils)");
    assert!(output.status.success(), "readelf -d {binary} failed");
    let dynamic = String::from_utf8_lossy(&output.stdout);
    let needed: Vec<&str> = dynamic.lines().filter(|l| l.contains("(NEEDED)")).collect();
    assert!(!needed.is_empty(), "no NEEDED entries read: {dynamic}");
    for line in &needed {
        assert!(
            !line.contains("libtesseract") && !line.contains("liblept"),
            "the CLI links an OCR library at build time: {line}"
        );
    }
}

/// A machine with nothing but the copied binary: a world of the harness plus `bin/nodetool`,
/// with its empty `home/` and its empty working directory `work/`.
struct Machine {
    world: World,
}

impl Machine {
    fn new() -> Machine {
        let world = World::new();
        world.dir("npm");
        let copy = world.dir("bin").join("nodetool");
        must(
            std::fs::copy(env!("CARGO_BIN_EXE_nodetool"), &copy),
            "copy the binary",
        );
        Machine { world }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.world.path().join(relative)
    }

    /// Writes the stand-in npm (see the module docs) and returns its path.
    fn npm(&self) -> PathBuf {
        let packs = source_tree().join("packs");
        assert!(
            packs.join("node_modules/js-yaml/package.json").is_file(),
            "packs/node_modules is not installed: run `npm ci --ignore-scripts --prefix packs` (cargo xtask ci does)"
        );
        let script = format!(
            "#!/bin/sh\n\
             [ \"$1\" = ci ] || {{ echo \"npm error expected npm ci, got $*\" >&2; exit 64; }}\n\
             case \" $* \" in *\" --ignore-scripts \"*) ;; *) echo 'npm error scripts were not disabled' >&2; exit 65;; esac\n\
             cmp -s package-lock.json '{lock}' || {{ echo 'npm error not the shipped lockfile' >&2; exit 66; }}\n\
             cp -R '{modules}' node_modules && echo 'added the locked packages'\n",
            lock = packs.join("package-lock.json").display(),
            modules = packs.join("node_modules").display(),
        );
        let path = self.path("npm/npm");
        must(std::fs::write(&path, script), "write the stand-in npm");
        let mut permissions = must(std::fs::metadata(&path), "stat npm").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
        must(std::fs::set_permissions(&path, permissions), "chmod npm");
        path
    }

    /// Runs the copied binary from `work/` with only `vars` (and the harness's passed-through
    /// `PATH`) set.
    fn nodetool(&self, args: &[&str], stdin: &str, vars: &[(&str, &Path)]) -> Output {
        let mut command: Command = self.world.bare_command(self.path("bin/nodetool"));
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in vars {
            command.env(name, value);
        }
        let mut child = must(spawn(&mut command), "start the copied nodetool");
        if let Some(mut input) = child.stdin.take() {
            must(
                std::io::Write::write_all(&mut input, stdin.as_bytes()),
                "write stdin",
            );
        }
        let output = must(child.wait_with_output(), "wait for nodetool");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "nodetool panicked: {stderr}");
        output
    }

    /// What the working directory holds (it must stay empty).
    fn work_entries(&self) -> Vec<String> {
        must(std::fs::read_dir(self.path("work")), "list work/")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }
}

/// Starts `command`, again while the binary is busy: a copy another test thread is writing
/// right then (this one's, or the stand-in npm) can be inherited by this fork until it execs,
/// and exec refuses a file open for writing (`ETXTBSY`).
fn spawn(command: &mut Command) -> std::io::Result<std::process::Child> {
    let mut tries = 0;
    loop {
        match command.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn json_of(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    must(
        serde_json::from_str(stdout.trim()),
        &format!(
            "parse {stdout} (stderr: {})",
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

/// Every string in `value`.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

const GEO_AND_YAML: &str = "import { haversine } from '@nodetool-ai/sandbox-geo';\n\
     import { load, dump } from '@nodetool-ai/sandbox-yaml';\n\
     const trip = load('from: {lat: 48.8566, lon: 2.3522}\\nto: {lat: 51.5074, lon: -0.1278}\\n');\n\
     return dump({ km: Math.round(haversine(trip.from, trip.to)) });";

#[test]
fn a_copied_binary_runs_the_shipped_packs_from_an_empty_home() {
    let machine = Machine::new();
    let npm = machine.npm();
    let home = machine.path("home");
    let vars = [("HOME", home.as_path()), ("NODETOOL_NPM", npm.as_path())];

    let before = json_of(&machine.nodetool(&["info", "--json"], "", &vars));
    assert_eq!(before["shippedRoot"]["present"], false, "{before}");

    let output = machine.nodetool(&["run", "--json"], GEO_AND_YAML, &vars);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let answer = json_of(&output);
    assert_eq!(answer["ok"], true, "{answer} {stderr}");
    assert_eq!(answer["result"], "km: 344\n", "{answer}");
    // The first use said what it did, on stderr.
    assert!(
        stderr.contains("installing the npm libraries the shipped packs bundle (js-yaml missing)")
            && stderr.contains("npm ci --ignore-scripts"),
        "{stderr}"
    );
    assert!(
        stderr.contains("compiling @nodetool-ai/sandbox-yaml (js-yaml) on first use"),
        "{stderr}"
    );

    // Everything it reads and writes is under the empty home or beside the binary.
    let info = json_of(&machine.nodetool(&["info", "--json"], "", &vars));
    let shipped = info["shippedRoot"]["path"].as_str().unwrap_or_default();
    assert!(
        Path::new(shipped).starts_with(home.join(".local/share/nodetool/shipped")),
        "{info}"
    );
    assert_eq!(info["shippedRoot"]["present"], true, "{info}");
    assert_eq!(
        info["shippedRoot"]["origin"], "embedded in this binary",
        "{info}"
    );
    assert!(
        Path::new(shipped)
            .join("node_modules/js-yaml/package.json")
            .is_file()
    );
    assert_eq!(info["ocr"]["available"], true, "{info}");
    let tree = source_tree().display().to_string();
    let mut named = Vec::new();
    strings(&info, &mut named);
    for s in &named {
        assert!(!s.contains(&tree), "info names the source tree: {s}");
    }
    let runner = info["browserRunner"]["dir"].as_str().unwrap_or_default();
    assert!(
        Path::new(runner).starts_with(machine.world.path()),
        "{runner}"
    );

    // A second run finds everything in place: no install, no compile.
    let again = machine.nodetool(&["run", "--json"], GEO_AND_YAML, &vars);
    assert_eq!(json_of(&again)["result"], "km: 344\n");
    assert_eq!(String::from_utf8_lossy(&again.stderr), "");
    assert_eq!(machine.work_entries(), Vec::<String>::new());
}

#[test]
fn without_home_or_xdg_variables_commands_fail_naming_them() {
    let machine = Machine::new();
    let body = "import { haversine } from '@nodetool-ai/sandbox-geo'; return 1;";
    for args in [
        &["run"][..],
        &["packs", "list"],
        &["packs", "allow", "@nodetool-ai/sandbox-geo"],
        &["packs", "install", "@acme/geo"],
        &["packs", "compile"],
        &["validate", "missing.json"],
    ] {
        let output = machine.nodetool(args, body, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("nodetool: there is no ")
                && stderr.contains("neither HOME nor XDG_")
                && stderr.contains(
                    "set HOME (or all of XDG_CONFIG_HOME, XDG_DATA_HOME and XDG_CACHE_HOME)"
                ),
            "{args:?}: {stderr}"
        );
    }
    // info still answers, and says the same.
    let info = machine.nodetool(&["info", "--json"], "", &[]);
    assert_eq!(info.status.code(), Some(0));
    let info = json_of(&info);
    let error = info["dirs"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("neither HOME nor XDG_CONFIG_HOME is set"),
        "{info}"
    );
    assert_eq!(info["shippedRoot"]["path"], Value::Null, "{info}");
    // Nothing was written where it ran.
    assert_eq!(machine.work_entries(), Vec::<String>::new());
}

#[test]
fn version_and_info_name_the_engines_and_every_root_in_order() {
    let machine = Machine::new();
    let home = machine.path("home");
    let version = machine.nodetool(&["--version"], "", &[]);
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    assert!(
        version.starts_with(&format!(
            "nodetool {} (QuickJS quickjs-ng ",
            env!("CARGO_PKG_VERSION")
        )) && version.contains(", rolldown 1.2.5, wasmtime 48.")
            && version.contains(", compiler contract "),
        "{version}"
    );
    let extra = machine.path("extra");
    must(std::fs::create_dir(&extra), "create a pack root");
    let extra_arg = extra.display().to_string();
    let output = machine.nodetool(
        &["--packs", &extra_arg, "info"],
        "",
        &[("HOME", home.as_path())],
    );
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8_lossy(&output.stdout);
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("info does not say {needle:?}:\n{text}"))
    };
    assert!(
        at("pack search path, in order:") < at("  --packs[1] "),
        "{text}"
    );
    assert!(at("  --packs[1] ") < at("  installed packs "), "{text}");
    assert!(at("  installed packs ") < at("  shipped packs "), "{text}");
    assert!(text.contains(&format!("{extra_arg} [--packs]")), "{text}");
    for line in [
        "config                   ",
        "data                     ",
        "cache                    ",
        "browser runner ",
        "OCR                        available: Tesseract ",
    ] {
        at(line);
    }
    // info writes nothing, not even the shipped packs.
    assert_eq!(
        must(std::fs::read_dir(&home), "list home").count(),
        0,
        "info wrote into the home"
    );
}
