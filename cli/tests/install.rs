//! `nodetool packs install | trust | uninstall | allow` end to end with the machine's npm,
//! offline: the packages are tarballs each test builds with `npm pack` from fixture packages it
//! writes, and the registry points at a closed loopback port, so nothing can be fetched.
//!
//! Authority is bound to identity: a local tarball may not take a first-party name without
//! `--allow-reserved-name`, and consent (`packs allow`) is given to a pack's identity, so a pack
//! whose identity changes is untrusted until allowed again, saying why in `packs list`.
//!
//! The fixture packages' `preinstall`, `install` and `postinstall` scripts (and a dependency's
//! own `install` script) each write a marker file; where markers appear says which scripts
//! ran.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use nodetool_tests::world::{self as harness, must, shipped_packs};
use serde_json::{Value, json};

/// A fresh world of the harness (the installed root is under its data directory), its working
/// directory the workshop for fixture packages and tarballs, and a marker directory the
/// lifecycle scripts write into. The shipped root is an empty directory, or the checkout's
/// shipped packs.
struct World(harness::World);

/// A registry nothing listens on: any fetch fails at once.
const CLOSED_REGISTRY: &str = "http://127.0.0.1:9/";

impl World {
    fn new() -> World {
        let world = World(harness::World::new());
        world.0.dir("markers");
        world
    }

    /// A world whose shipped packs are the checkout's `packs/`.
    fn with_shipped_packs() -> World {
        let world = World(harness::World::with_shipped(shipped_packs()));
        world.0.dir("markers");
        world
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.0.path().join(sub)
    }

    fn packs_dir(&self) -> PathBuf {
        self.0.data().join("nodetool/packs")
    }

    /// Writes a fixture package whose lifecycle scripts each drop `<marker>.<script>` into
    /// the marker directory, and packs it; returns the tarball.
    fn package(&self, manifest: Value, files: &[(&str, &str)]) -> PathBuf {
        let name = manifest["name"]
            .as_str()
            .unwrap_or("x")
            .replace(['@', '/'], "_");
        let version = manifest["version"].as_str().unwrap_or("0.0.0");
        let dir = self.path(&format!("work/src-{name}-{version}"));
        must(fs::create_dir_all(&dir), "create a package dir");
        must(
            fs::write(dir.join("package.json"), manifest.to_string()),
            "write package.json",
        );
        for (file, text) in files {
            let path = dir.join(file);
            if let Some(parent) = path.parent() {
                must(fs::create_dir_all(parent), "create a dir");
            }
            must(fs::write(path, text), "write a package file");
        }
        let out = self
            .0
            .command("npm")
            .args(["pack", "--ignore-scripts", "--silent", "--pack-destination"])
            .arg(self.path("work"))
            .current_dir(&dir)
            .env("npm_config_update_notifier", "false")
            .output();
        let out = must(out, "run npm pack (Node.js and npm are needed)");
        assert!(out.status.success(), "npm pack failed: {out:?}");
        let file = String::from_utf8_lossy(&out.stdout).trim().to_string();
        self.path("work").join(file)
    }

    /// Scripts that write markers named after `label`.
    fn scripts(&self, label: &str, which: &[&str]) -> Value {
        let markers = self.path("markers");
        let mut scripts = serde_json::Map::new();
        for script in which {
            scripts.insert(
                (*script).into(),
                json!(format!("touch '{}/{label}.{script}'", markers.display())),
            );
        }
        Value::Object(scripts)
    }

    fn markers(&self) -> Vec<String> {
        let mut names: Vec<String> = must(fs::read_dir(self.path("markers")), "read markers")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A dependency with its own install script, then a register pack with all three
    /// lifecycle scripts that depends on it: the register pack's tarball.
    fn register_pack(&self) -> PathBuf {
        let dep = self.package(
            json!({"name": "dep-with-script", "version": "1.0.0",
                   "scripts": self.scripts("dep", &["install"])}),
            &[("index.js", "module.exports = 1;\n")],
        );
        self.package(
            json!({
                "name": "@fx/host-pack", "version": "1.0.0",
                "nodetool": { "register": "./index.js" },
                "dependencies": { "dep-with-script": format!("file:{}", dep.display()) },
                "scripts": self.scripts("pack", &["preinstall", "install", "postinstall"]),
            }),
            &[("index.js", "module.exports = { register() {} };\n")],
        )
    }

    fn nodetool(&self, args: &[&str]) -> Output {
        self.nodetool_with_registry(args, CLOSED_REGISTRY)
    }

    fn nodetool_with_registry(&self, args: &[&str], registry: &str) -> Output {
        let output = self
            .0
            .command(env!("CARGO_BIN_EXE_nodetool"))
            .env("npm_config_registry", registry)
            .env("npm_config_fetch_retries", "0")
            .args(args)
            .output();
        let output = must(output, "run nodetool");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "nodetool panicked: {stderr}");
        output
    }

    fn json(&self, args: &[&str]) -> (Value, i32) {
        let output = self.nodetool(args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let value = must(
            serde_json::from_str(stdout.trim()),
            &format!(
                "parse {stdout} (stderr: {})",
                String::from_utf8_lossy(&output.stderr)
            ),
        );
        (value, output.status.code().unwrap_or(-1))
    }

    fn allowlist_path(&self) -> PathBuf {
        self.0.config().join("nodetool/packs.json")
    }

    /// Writes a sandbox pack named `name` whose root module exports `marker` into `dir`.
    fn write_sandbox_pack(&self, dir: &Path, name: &str, version: &str, marker: &str) {
        must(fs::create_dir_all(dir.join("sandbox")), "create a pack dir");
        let (manifest, files) = sandbox_pack(name, version, marker);
        must(
            fs::write(dir.join("package.json"), manifest.to_string()),
            "write package.json",
        );
        for (file, text) in files {
            must(fs::write(dir.join(file), text), "write a pack file");
        }
    }

    /// A tarball of such a pack.
    fn sandbox_tarball(&self, name: &str, version: &str, marker: &str) -> PathBuf {
        let (manifest, files) = sandbox_pack(name, version, marker);
        let files: Vec<(&str, &str)> = files.iter().map(|(f, t)| (*f, t.as_str())).collect();
        self.package(manifest, &files)
    }

    /// Runs nodetool and asserts it succeeded; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.nodetool(args);
        assert!(
            output.status.success(),
            "{args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            stderr(&output)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `packs list --json`'s diagnostics for `pack` (with `extra` arguments first).
    fn diagnostics(&self, extra: &[&str], pack: &str) -> Vec<(String, String)> {
        let mut args = extra.to_vec();
        args.extend(["packs", "list", "--json"]);
        let (list, code) = self.json(&args);
        assert_eq!(code, 0, "{list}");
        list["diagnostics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["packName"] == pack)
            .map(|d| {
                (
                    d["code"].as_str().unwrap_or_default().to_string(),
                    d["message"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// What a CodeAct session allows by default (the consented packs' specifiers).
    fn prompt(&self, extra: &[&str]) -> String {
        let mut args = extra.to_vec();
        args.extend(["codeact", "prompt"]);
        self.ok(&args)
    }

    fn installed(&self, name: &str) -> bool {
        self.packs_dir().join("node_modules").join(name).is_dir()
    }

    fn ledger(&self) -> Value {
        let text = must(
            fs::read_to_string(self.packs_dir().join("nodetool-packs.json")),
            "read the ledger",
        );
        must(serde_json::from_str(&text), "parse the ledger")
    }

    /// Every file under the installed project with its bytes, for before/after comparison.
    fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, Vec<u8>)>) {
            let Ok(entries) = fs::read_dir(dir) else {
                return;
            };
            for entry in entries.filter_map(Result::ok) {
                let path = entry.path();
                let rel = path
                    .strip_prefix(base)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                if path.is_symlink() {
                    out.push((
                        rel,
                        fs::read_link(&path)
                            .map(|l| l.display().to_string().into_bytes())
                            .unwrap_or_default(),
                    ));
                } else if path.is_dir() {
                    walk(&path, base, out);
                } else {
                    out.push((rel, fs::read(&path).unwrap_or_default()));
                }
            }
        }
        let mut out = Vec::new();
        let base = self.0.data().join("nodetool");
        walk(&base, &base, &mut out);
        out.sort();
        out
    }
}

/// A registry on loopback that knows no package: every request is a 404, as the npm registry
/// answers for a name nobody published. Returns its URL; the thread ends with the test process.
fn empty_registry() -> String {
    use std::io::{Read, Write};
    let listener = must(std::net::TcpListener::bind("127.0.0.1:0"), "bind a port");
    let port = must(listener.local_addr(), "read the port").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let body = "{\"error\":\"Not found\"}";
            let _ = write!(
                stream,
                "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}/")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const GEO: &str = "@nodetool-ai/sandbox-geo";

/// A sandbox pack's manifest and files: its root module exports `marker`.
fn sandbox_pack(name: &str, version: &str, marker: &str) -> (Value, Vec<(&'static str, String)>) {
    let manifest = json!({
        "name": name, "version": version, "type": "module",
        "nodetool": {"apiVersion": 1, "sandboxModules": [
            {"name": ".", "kind": "js", "file": "sandbox/index.js"}
        ]},
    });
    let index = format!("export const marker = {marker:?};\n");
    (manifest, vec![("sandbox/index.js", index)])
}

#[test]
fn install_runs_no_script_and_trust_runs_them_all_against_the_files_on_disk() {
    let world = World::new();
    let tarball = world.register_pack();
    let (answer, code) = world.json(&["packs", "install", "--json", &tarball.to_string_lossy()]);
    assert_eq!(code, 0, "{answer}");
    assert_eq!(answer["packName"], "@fx/host-pack");
    assert_eq!(answer["mode"], "register");
    assert_eq!(answer["reservedName"], false);
    assert_eq!(answer["active"], false);
    assert_eq!(answer["scripts"], "skipped");
    let closure: Vec<&str> = answer["closure"]
        .as_array()
        .map(|c| c.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(closure, ["@fx/host-pack", "dep-with-script"]);
    assert!(
        answer["closure"]
            .as_array()
            .is_some_and(|c| c.iter().all(|p| p["integrity"]
                .as_str()
                .is_some_and(|i| i.starts_with("sha512-")))),
        "{answer}"
    );
    assert_eq!(
        world.markers(),
        Vec::<String>::new(),
        "a script ran at install"
    );

    let (list, code) = world.json(&["packs", "list", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        list["installed"],
        json!([{"packName": "@fx/host-pack", "version": "1.0.0", "mode": "register", "active": false, "scripts": "skipped"}])
    );
    let text = world.nodetool(&["packs", "list"]);
    assert!(
        String::from_utf8_lossy(&text.stdout)
            .contains("@fx/host-pack@1.0.0  install mode register  inactive  scripts skipped"),
        "{text:?}"
    );

    let output = world.nodetool(&["packs", "trust", "@fx/host-pack"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        world.markers(),
        [
            "dep.install",
            "pack.install",
            "pack.postinstall",
            "pack.preinstall"
        ]
    );
    let row = &world.ledger()["packs"]["@fx/host-pack"];
    assert_eq!(row["scripts"], "ran");
    assert_eq!(row["active"], true);
}

#[test]
fn an_edited_integrity_makes_trust_refuse_and_run_nothing() {
    let world = World::new();
    let tarball = world.register_pack();
    let output = world.nodetool(&["packs", "install", &tarball.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // Someone swaps the dependency's recorded integrity between install and trust.
    let lock_path = world.packs_dir().join("package-lock.json");
    let mut lock: Value = must(
        serde_json::from_str(&must(fs::read_to_string(&lock_path), "read the lockfile")),
        "parse the lockfile",
    );
    lock["packages"]["node_modules/dep-with-script"]["integrity"] = json!("sha512-AAAA");
    must(fs::write(&lock_path, lock.to_string()), "edit the lockfile");
    let before = world.ledger();

    let (answer, code) = world.json(&["packs", "trust", "--json", "@fx/host-pack"]);
    assert_eq!(code, 1, "{answer}");
    assert_eq!(answer["error"]["code"], "trust-integrity-mismatch");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("dep-with-script (node_modules/dep-with-script): integrity is sha512-AAAA in the lockfile"),
        "{message}"
    );
    assert_eq!(world.markers(), Vec::<String>::new(), "a script ran");
    assert_eq!(world.ledger(), before);
}

#[test]
fn a_pack_is_classified_from_the_artifact_on_disk_as_it_moves_between_versions() {
    let world = World::new();
    // 1.0.0 is sandbox-only: an authored module and an npm library it compiles, both
    // importable right after install.
    let lib = world.package(
        json!({"name": "tiny-lib", "version": "1.0.0", "type": "module", "main": "index.js"}),
        &[(
            "index.js",
            "export function shout(s) { return s.toUpperCase() + '!'; }\nexport default shout;\n",
        )],
    );
    let v1 = world.package(
        json!({
            "name": "@fx/moving", "version": "1.0.0",
            "dependencies": { "tiny-lib": format!("file:{}", lib.display()) },
            "nodetool": { "apiVersion": 1, "sandboxModules": [
                { "name": ".", "kind": "js", "file": "sandbox/main.js" },
                { "name": "lib", "kind": "js", "npm": "tiny-lib" }
            ]},
            "scripts": world.scripts("v1", &["postinstall"]),
        }),
        &[("sandbox/main.js", "export const twice = (n) => n * 2;\n")],
    );
    let (answer, code) = world.json(&["packs", "install", "--json", &v1.to_string_lossy()]);
    assert_eq!(code, 0, "{answer}");
    assert_eq!(answer["mode"], "sandbox-only");
    assert_eq!(answer["active"], true);
    assert_eq!(answer["modules"][0]["specifier"], "@fx/moving/lib");
    assert_eq!(answer["modules"][0]["outcome"], "compiled", "{answer}");

    let output = assert_cmd::Command::from_std(world.0.command(env!("CARGO_BIN_EXE_nodetool")))
        .args(["run", "--json"])
        .write_stdin("import { twice } from '@fx/moving';\nimport shout from '@fx/moving/lib';\nreturn shout('x' + twice(21));")
        .output();
    let output = must(output, "run nodetool");
    let v: Value = must(serde_json::from_slice(&output.stdout), "parse the run");
    assert_eq!(v["result"], "X42!", "{v} {}", stderr(&output));

    let (refusal, code) = world.json(&["packs", "trust", "--json", "@fx/moving"]);
    assert_eq!(code, 1);
    assert_eq!(refusal["error"]["code"], "trust-refused-sandbox-only");

    // 1.1.0 turns into a register pack: classified from what landed, recorded inactive.
    let v2 = world.package(
        json!({
            "name": "@fx/moving", "version": "1.1.0",
            "nodetool": { "register": "./index.js" },
            "scripts": world.scripts("v2", &["postinstall"]),
        }),
        &[("index.js", "module.exports = {};\n")],
    );
    let output = world.nodetool(&["packs", "install", &v2.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("@fx/moving changed install mode: 1.1.0 (register) was sandbox-only"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: @fx/moving is inactive"),
        "{stdout}"
    );
    let row = &world.ledger()["packs"]["@fx/moving"];
    assert_eq!(
        (row["mode"].as_str(), row["active"].as_bool()),
        (Some("register"), Some(false))
    );
    assert_eq!(world.markers(), Vec::<String>::new());

    // Editing the installed manifest back to sandbox-only moves the mode: trust refuses.
    let manifest = world
        .packs_dir()
        .join("node_modules/@fx/moving/package.json");
    must(
        fs::write(
            &manifest,
            json!({"name": "@fx/moving", "version": "1.1.0", "nodetool": {"sandboxModules": []}})
                .to_string(),
        ),
        "edit the installed manifest",
    );
    let (refusal, code) = world.json(&["packs", "trust", "--json", "@fx/moving"]);
    assert_eq!(code, 1);
    assert_eq!(refusal["error"]["code"], "trust-mode-moved", "{refusal}");
    assert_eq!(world.markers(), Vec::<String>::new());
}

#[test]
fn a_directory_installs_as_a_snapshot_and_an_unknown_pack_is_never_trusted() {
    let world = World::new();
    let dir = world.path("work/plain");
    must(fs::create_dir_all(&dir), "create the package dir");
    must(
        fs::write(
            dir.join("package.json"),
            json!({"name": "plain-lib", "version": "2.0.0",
                   "scripts": world.scripts("plain", &["prepack", "prepare", "install"])})
            .to_string(),
        ),
        "write package.json",
    );
    let (answer, code) = world.json(&["packs", "install", "--json", &dir.to_string_lossy()]);
    assert_eq!(code, 0, "{answer}");
    assert_eq!(answer["mode"], "unknown");
    assert_eq!(answer["active"], false);
    assert_eq!(
        world.markers(),
        Vec::<String>::new(),
        "packing ran a script"
    );
    let installed = world.packs_dir().join("node_modules/plain-lib");
    assert!(
        installed.is_dir() && !installed.is_symlink(),
        "not a snapshot"
    );

    let (refusal, code) = world.json(&["packs", "trust", "--json", "plain-lib"]);
    assert_eq!(code, 1);
    assert_eq!(refusal["error"]["code"], "trust-refused-unknown");
    assert_eq!(world.markers(), Vec::<String>::new());

    let (answer, code) = world.json(&["packs", "uninstall", "--json", "plain-lib"]);
    assert_eq!(code, 0, "{answer}");
    assert!(!installed.exists());
    assert_eq!(world.ledger()["packs"], json!({}));
    let (answer, code) = world.json(&["packs", "uninstall", "--json", "plain-lib"]);
    assert_eq!(code, 1);
    assert_eq!(answer["error"]["code"], "install-not-installed");
}

#[test]
fn every_failure_leaves_the_ledger_and_the_installed_root_as_they_were() {
    let world = World::new();
    let tarball = world.register_pack();
    let output = world.nodetool(&["packs", "install", &tarball.to_string_lossy()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let before = world.snapshot();
    assert!(!before.is_empty());

    // The registry is unreachable.
    let (answer, code) = world.json(&["packs", "install", "--json", "nodetool-no-such-pack"]);
    assert_eq!(code, 1, "{answer}");
    assert_eq!(answer["error"]["code"], "install-npm-failed");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("npm install failed")),
        "{answer}"
    );
    assert_eq!(world.snapshot(), before);

    // A name the registry does not know.
    let output = world.nodetool_with_registry(
        &["packs", "install", "--json", "nodetool-no-such-pack@1.0.0"],
        &empty_registry(),
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let answer: Value = must(serde_json::from_slice(&output.stdout), "parse the answer");
    assert_eq!(answer["error"]["code"], "install-npm-failed");
    assert!(
        answer["error"]["message"].as_str().is_some_and(|m| m
            .contains("the registry has no such package or version")
            && m.contains("nodetool-no-such-pack")),
        "{answer}"
    );
    assert_eq!(world.snapshot(), before);

    // A file that is not a tarball.
    let bogus = world.path("work/bogus.tgz");
    must(fs::write(&bogus, "not a tarball"), "write a bogus tarball");
    let (answer, code) = world.json(&["packs", "install", "--json", &bogus.to_string_lossy()]);
    assert_eq!(code, 1, "{answer}");
    assert_eq!(answer["error"]["code"], "install-npm-failed");
    assert_eq!(world.snapshot(), before);

    // Not a spec at all: a usage error, nothing touched.
    for bad in [
        "./missing.tgz",
        "Not A Name",
        "git+https://example.com/x.git",
    ] {
        let output = world.nodetool(&["packs", "install", bad]);
        assert_eq!(output.status.code(), Some(2), "{bad}");
        assert!(
            stderr(&output).starts_with("nodetool: "),
            "{}",
            stderr(&output)
        );
    }
    let output = world.nodetool(&["packs", "trust", "nobody"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("nobody was not installed by nodetool packs install"));
    assert_eq!(world.snapshot(), before);

    // A corrupt ledger is an error, never an empty ledger, and is left for a person to fix.
    let ledger = world.packs_dir().join("nodetool-packs.json");
    must(
        fs::write(&ledger, "{\"version\": 1, \"packs\": "),
        "corrupt the ledger",
    );
    let corrupt = world.snapshot();
    let (answer, code) = world.json(&["packs", "install", "--json", &tarball.to_string_lossy()]);
    assert_eq!(code, 1);
    assert_eq!(answer["error"]["code"], "install-ledger-corrupt");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the install ledger is corrupt")),
        "{answer}"
    );
    assert_eq!(world.snapshot(), corrupt);
    let output = world.nodetool(&["packs", "trust", "@fx/host-pack"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(world.markers(), Vec::<String>::new());
    // `packs list` still lists the catalog and says what is wrong with the ledger.
    let output = world.nodetool(&["packs", "list"]);
    assert_eq!(output.status.code(), Some(0));
    assert!(
        stderr(&output).contains("install ledger is corrupt"),
        "{}",
        stderr(&output)
    );
}

/// The identity codes among `diagnostics` (the test packs have no SKILL.md, for one).
fn codes(diagnostics: &[(String, String)]) -> Vec<&str> {
    identity_diagnostics(diagnostics)
        .into_iter()
        .map(|(c, _)| c.as_str())
        .collect()
}

fn identity_diagnostics(diagnostics: &[(String, String)]) -> Vec<&(String, String)> {
    diagnostics
        .iter()
        .filter(|(c, _)| c.starts_with("consent-") || c == "shipped-pack-shadowed")
        .collect()
}

#[test]
fn an_impostor_of_a_shipped_pack_is_refused_without_the_flag_and_never_inherits_consent() {
    let world = World::with_shipped_packs();
    world.ok(&["packs", "allow", GEO]);
    let allowlist = must(fs::read_to_string(world.allowlist_path()), "read allowlist");
    assert!(
        allowlist.contains("\"identity\": \"shipped\""),
        "{allowlist}"
    );
    assert!(world.prompt(&[]).contains(GEO));
    assert_eq!(codes(&world.diagnostics(&[], GEO)), Vec::<&str>::new());

    let impostor = world.sandbox_tarball(GEO, "9.9.9", "impostor");
    let impostor = impostor.to_string_lossy();
    let (refusal, code) = world.json(&["packs", "install", "--json", &impostor]);
    assert_eq!(code, 1, "{refusal}");
    assert_eq!(refusal["error"]["code"], "install-reserved-name");
    let message = refusal["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("reserved for NodeTool's own packs")
            && message.contains("\nhelp: ")
            && message.contains("--allow-reserved-name"),
        "{message}"
    );
    assert!(!world.installed(GEO), "a refused install landed");
    // The human form says the same, with its help line.
    let output = world.nodetool(&["packs", "install", &impostor]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("help: if you mean to replace NodeTool's pack"),
        "{stderr}"
    );
    assert!(!world.installed(GEO));
    // A body still imports the shipped pack.
    let body = world.path("work/body.js");
    must(
        fs::write(
            &body,
            format!("import * as geo from {GEO:?};\nreturn typeof geo.marker;\n"),
        ),
        "write a body",
    );
    let (run, code) = world.json(&["run", "--json", &body.to_string_lossy()]);
    assert_eq!((code, &run["result"]), (0, &json!("undefined")), "{run}");

    // With the flag it installs, says it shadows the shipped pack, and is untrusted: the
    // consent was given to the shipped pack.
    let (answer, code) = world.json(&[
        "packs",
        "install",
        "--json",
        "--allow-reserved-name",
        &impostor,
    ]);
    assert_eq!(code, 0, "{answer}");
    assert_eq!(answer["reservedName"], true, "{answer}");
    assert!(world.installed(GEO));
    // The operator asked for it: runs import the installed copy (and `packs list` says so).
    let (run, code) = world.json(&["run", "--json", &body.to_string_lossy()]);
    assert_eq!((code, &run["result"]), (0, &json!("string")), "{run}");
    let diagnostics = world.diagnostics(&[], GEO);
    assert_eq!(
        codes(&diagnostics),
        ["shipped-pack-shadowed", "consent-identity-changed"],
        "{diagnostics:#?}"
    );
    let changed = &identity_diagnostics(&diagnostics)[1].1;
    assert!(
        changed.contains(
            "allowed for a different identity: was the pack shipped with NodeTool, now sha512-"
        ) && changed.contains("run `nodetool packs allow @nodetool-ai/sandbox-geo`"),
        "{changed}"
    );
    assert!(
        !world.prompt(&[]).contains(GEO),
        "the impostor kept consent"
    );
    // The human list says it in full too.
    let list = world.ok(&["packs", "list"]);
    assert!(
        list.contains("Trust and identity:\n")
            && list.contains("  warning[shipped-pack-shadowed]: @nodetool-ai/sandbox-geo from ")
            && list.contains(
                "  warning[consent-identity-changed]: @nodetool-ai/sandbox-geo is untrusted: allowed for a different identity: was the pack shipped with NodeTool, now sha512-"
            ),
        "{list}"
    );

    // Allowing it again binds consent to the installed artifact's integrity.
    let said = world.ok(&["packs", "allow", GEO]);
    assert!(said.contains(" as sha512-"), "{said}");
    assert!(said.contains("(was allowed for shipped)"), "{said}");
    assert_eq!(
        codes(&world.diagnostics(&[], GEO)),
        ["shipped-pack-shadowed"]
    );
    assert!(world.prompt(&[]).contains(GEO));
}

#[test]
fn consent_is_lost_when_a_packs_content_changes_and_restored_by_allow() {
    let world = World::with_shipped_packs();
    let root = world.path("work/dev");
    let dir = root.join("@acme/geo");
    world.write_sandbox_pack(&dir, "@acme/geo", "1.0.0", "one");
    let packs = ["--packs", &*root.to_string_lossy()].map(String::from);
    let packs: Vec<&str> = packs.iter().map(String::as_str).collect();

    let said = world.ok(&[&packs[..], &["packs", "allow", "@acme/geo"]].concat());
    assert!(said.contains(" as sha256:"), "{said}");
    assert_eq!(
        codes(&world.diagnostics(&packs, "@acme/geo")),
        Vec::<&str>::new()
    );
    assert!(world.prompt(&packs).contains("@acme/geo"));

    // The same name, other content: untrusted, and `packs list --json` says why.
    must(
        fs::write(
            dir.join("sandbox/index.js"),
            "export const marker = \"two\";\n",
        ),
        "edit the pack",
    );
    let diagnostics = world.diagnostics(&packs, "@acme/geo");
    assert_eq!(
        codes(&diagnostics),
        ["consent-identity-changed"],
        "{diagnostics:#?}"
    );
    let message = &identity_diagnostics(&diagnostics)[0].1;
    let was_now: Vec<&str> = message
        .split("sha256:")
        .skip(1)
        .map(|rest| rest.get(..64).unwrap_or_default())
        .collect();
    assert_eq!(was_now.len(), 2, "{message}");
    assert_ne!(was_now[0], was_now[1], "{message}");
    assert!(
        message.contains("allowed for a different identity: was sha256:")
            && message.contains(", now sha256:")
            && message.contains("run `nodetool packs allow @acme/geo`"),
        "{message}"
    );
    assert!(!world.prompt(&packs).contains("@acme/geo"));

    // Allowed again: trusted as it is now.
    world.ok(&[&packs[..], &["packs", "allow", "@acme/geo"]].concat());
    assert_eq!(
        codes(&world.diagnostics(&packs, "@acme/geo")),
        Vec::<&str>::new()
    );
    assert!(world.prompt(&packs).contains("@acme/geo"));

    // Allowing a name no pack on the search path has is refused: nothing to bind to.
    let output = world.nodetool(&["packs", "allow", "@acme/nowhere"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no pack named @acme/nowhere"),
        "{output:?}"
    );
}

#[test]
fn an_installed_pack_is_identified_by_its_integrity() {
    let world = World::with_shipped_packs();
    let first = world.sandbox_tarball("@acme/tool", "1.0.0", "first");
    world.ok(&["packs", "install", &first.to_string_lossy()]);
    let said = world.ok(&["packs", "allow", "@acme/tool"]);
    assert!(said.contains(" as sha512-"), "{said}");
    assert_eq!(
        codes(&world.diagnostics(&[], "@acme/tool")),
        Vec::<&str>::new()
    );
    // The same version again keeps consent; other content loses it.
    world.ok(&["packs", "install", &first.to_string_lossy()]);
    assert_eq!(
        codes(&world.diagnostics(&[], "@acme/tool")),
        Vec::<&str>::new()
    );
    let second = world.sandbox_tarball("@acme/tool", "1.0.1", "second");
    world.ok(&["packs", "install", &second.to_string_lossy()]);
    let diagnostics = world.diagnostics(&[], "@acme/tool");
    assert_eq!(codes(&diagnostics), ["consent-identity-changed"]);
    let message = &identity_diagnostics(&diagnostics)[0].1;
    assert!(
        message.contains("was sha512-") && message.contains(", now sha512-"),
        "{diagnostics:#?}"
    );
}

#[test]
fn the_old_allowlist_format_still_reads_and_allow_records_the_identity() {
    let world = World::with_shipped_packs();
    let root = world.path("work/dev");
    world.write_sandbox_pack(&root.join("@acme/geo"), "@acme/geo", "1.0.0", "one");
    let packs = ["--packs", &*root.to_string_lossy()].map(String::from);
    let packs: Vec<&str> = packs.iter().map(String::as_str).collect();
    let path = world.allowlist_path();
    must(
        fs::create_dir_all(path.parent().unwrap_or(&path)),
        "create the config dir",
    );
    must(
        fs::write(
            &path,
            "{\"allowed\": [\"@acme/geo\", \"@nodetool-ai/sandbox-geo\"]}",
        ),
        "write an old allowlist",
    );
    // Still trusted, and `packs list` suggests recording the identity.
    let diagnostics = world.diagnostics(&packs, "@acme/geo");
    assert_eq!(codes(&diagnostics), ["consent-identity-unrecorded"]);
    assert!(
        identity_diagnostics(&diagnostics)[0]
            .1
            .contains("run `nodetool packs allow @acme/geo`"),
        "{diagnostics:#?}"
    );
    assert!(world.prompt(&packs).contains("@acme/geo"));
    assert!(world.prompt(&packs).contains(GEO));

    world.ok(&[&packs[..], &["packs", "allow", "@acme/geo"]].concat());
    let text = must(fs::read_to_string(&path), "read allowlist");
    let file: Value = must(serde_json::from_str(&text), "parse allowlist");
    let entries = file["allowed"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 2, "{text}");
    assert!(
        entries.iter().any(|e| e["name"] == "@acme/geo"
            && e["identity"]
                .as_str()
                .is_some_and(|i| i.starts_with("sha256:"))),
        "{text}"
    );
    assert!(
        entries.contains(&json!(GEO)),
        "the other old entry is kept as it was: {text}"
    );
    assert_eq!(
        codes(&world.diagnostics(&packs, "@acme/geo")),
        Vec::<&str>::new()
    );
}
