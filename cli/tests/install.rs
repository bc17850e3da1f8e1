//! `nodetool packs install | trust | uninstall` end to end with the machine's npm, offline: the
//! packages are tarballs each test builds with `npm pack` from fixture packages it writes, and
//! the registry points at a closed loopback port, so nothing can be fetched.
//!
//! The fixture packages' `preinstall`, `install` and `postinstall` scripts (and a dependency's
//! own `install` script) each write a marker file; where markers appear says which scripts
//! ran.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use tempfile::TempDir;

fn must<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// A fresh home (the installed root is under it), a workshop for fixture packages and
/// tarballs, and a marker directory the lifecycle scripts write into.
struct World {
    tmp: TempDir,
}

/// A registry nothing listens on: any fetch fails at once.
const CLOSED_REGISTRY: &str = "http://127.0.0.1:9/";

impl World {
    fn new() -> World {
        let tmp = must(tempfile::tempdir(), "create a temp dir");
        for dir in ["home", "work/no-shipped", "markers"] {
            must(fs::create_dir_all(tmp.path().join(dir)), "create a dir");
        }
        World { tmp }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.tmp.path().join(sub)
    }

    fn packs_dir(&self) -> PathBuf {
        self.path("home/.local/share/nodetool/packs")
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
        let out = std::process::Command::new("npm")
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
        let output = must(assert_cmd::Command::cargo_bin("nodetool"), "find nodetool")
            .env_clear()
            .env("HOME", self.path("home"))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("npm_config_registry", registry)
            .env("npm_config_fetch_retries", "0")
            .env("NODETOOL_SHIPPED_PACKS_DIR", self.path("work/no-shipped"))
            .current_dir(self.path("work"))
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
        let base = self.path("home/.local/share/nodetool");
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

#[test]
fn install_runs_no_script_and_trust_runs_them_all_against_the_files_on_disk() {
    let world = World::new();
    let tarball = world.register_pack();
    let (answer, code) = world.json(&["packs", "install", "--json", &tarball.to_string_lossy()]);
    assert_eq!(code, 0, "{answer}");
    assert_eq!(answer["packName"], "@fx/host-pack");
    assert_eq!(answer["mode"], "register");
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
            .contains("@fx/host-pack@1.0.0  register  inactive  scripts skipped"),
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

    let output = must(assert_cmd::Command::cargo_bin("nodetool"), "find nodetool")
        .env_clear()
        .env("HOME", world.path("home"))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("NODETOOL_SHIPPED_PACKS_DIR", world.path("work/no-shipped"))
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
        stdout.contains("@fx/moving changed mode: 1.1.0 (register) was sandbox-only"),
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
