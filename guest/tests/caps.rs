//! The `workspace` and `fetch` capabilities: absent unless granted, confined to what was
//! granted, and shared with the pack modules a body imports. No network: a fake client.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nodetool_guest::broker::{
    BodyReader, FetchGrant, FetchResponse, FetchTransport, OutboundRequest, Received, RunAuthority,
    TransportFuture, WorkspaceGrant,
};
use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunOutcome, RunRequest, Sandbox};
use nodetool_protocol::catalog::{
    FileContent, GraphFile, Resolution, ResolvedKind, ResolvedModule,
};
use nodetool_protocol::run::{RunError, RunErrorCode};
use nodetool_protocol::value::Value;

struct Run<'a> {
    code: &'a str,
    modules: Vec<ResolvedModule>,
    limits: RunLimits,
    caps: Capabilities,
    workspace: Option<WorkspaceGrant>,
    fetch: Option<FetchGrant>,
}

impl<'a> Run<'a> {
    fn new(code: &'a str) -> Self {
        Run {
            code,
            modules: vec![],
            limits: RunLimits::STANDARD,
            caps: Capabilities::default(),
            workspace: None,
            fetch: None,
        }
    }
    fn workspace(mut self, grant: WorkspaceGrant) -> Self {
        self.workspace = Some(grant);
        self
    }
    fn fetch(mut self, grant: FetchGrant) -> Self {
        self.fetch = Some(grant);
        self
    }
    fn with(mut self, m: ResolvedModule) -> Self {
        self.modules.push(m);
        self
    }
    fn go(mut self) -> RunOutcome {
        if self.workspace.is_some() || self.fetch.is_some() {
            self.caps.authority = Some(Arc::new(RunAuthority::new(
                self.workspace.take(),
                self.fetch.take(),
            )));
        }
        let resolution = Resolution {
            modules: self.modules,
            statuses: vec![],
        };
        Sandbox::new().run(RunRequest {
            code: self.code,
            resolution: &resolution,
            inputs: &Value::Null,
            limits: self.limits,
            capabilities: self.caps,
            dispatchers: Dispatchers::default(),
            cancel: None,
        })
    }
}

fn ok(outcome: RunOutcome) -> Value {
    outcome.result.unwrap_or_else(|e| panic!("run failed: {e}"))
}

fn err(outcome: RunOutcome) -> RunError {
    match outcome.result {
        Ok(v) => panic!("run succeeded with {v:?}"),
        Err(e) => e,
    }
}

fn s(text: &str) -> Value {
    Value::String(text.into())
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => panic!("not a string: {other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

/// A temporary directory with the workspace root one level below it, so anything a run wrote
/// next to the root (outside it) is visible.
struct Sandboxed {
    outer: tempfile::TempDir,
}

impl Sandboxed {
    fn new() -> Sandboxed {
        let outer = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        std::fs::create_dir(outer.path().join("root")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(outer.path().join("outside")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(outer.path().join("outside/secret.txt"), "top secret")
            .unwrap_or_else(|e| panic!("{e}"));
        Sandboxed { outer }
    }
    fn root(&self) -> PathBuf {
        self.outer.path().join("root")
    }
    fn grant(&self) -> WorkspaceGrant {
        WorkspaceGrant::standard(self.root())
    }
    /// Every path under the outer directory that is not under the root, sorted.
    fn outside_listing(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(self.outer.path(), self.outer.path(), &mut out);
        out.retain(|p| p != "root" && !p.starts_with("root/"));
        out.sort();
        out
    }
}

fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{e}"));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("{e}"));
        let path = entry.path();
        let rel = path
            .strip_prefix(base)
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string_lossy()
            .into_owned();
        out.push(rel);
        let meta = std::fs::symlink_metadata(&path).unwrap_or_else(|e| panic!("{e}"));
        if meta.is_dir() {
            walk(base, &path, out);
        }
    }
}

const BASELINE_OUTSIDE: [&str; 2] = ["outside", "outside/secret.txt"];

/// Runs every method on `path` and returns the rejection messages (a method that succeeds
/// yields "ok").
fn attempt_all(sandbox: &Sandboxed, path: &str) -> Vec<String> {
    let code = format!(
        r#"const p = {path:?};
const calls = [
  () => workspace.readText(p),
  () => workspace.readBytes(p),
  () => workspace.writeText(p, "pwned"),
  () => workspace.writeBytes(p, new Uint8Array([1, 2])),
  () => workspace.list(p),
  () => workspace.exists(p),
];
const out = [];
for (const call of calls) {{
  try {{ await call(); out.push("ok"); }}
  catch (e) {{ out.push((e instanceof Error ? "" : "not an Error: ") + e.message); }}
}}
return out;"#
    );
    strings(&ok(Run::new(&code).workspace(sandbox.grant()).go()))
}

#[test]
fn every_workspace_method_round_trips() {
    let sandbox = Sandboxed::new();
    let v = ok(Run::new(
        r#"
await workspace.writeText("notes.txt", "héllo");
await workspace.writeText("deep/er/still/a.txt", "nested");
await workspace.writeBytes("bin/u8.bin", new Uint8Array([0, 1, 255]));
await workspace.writeBytes("bin/u16.bin", new Uint16Array([1, 258]));
await workspace.writeBytes("bin/ab.bin", new Uint8Array([9, 8, 7]).buffer);
await workspace.writeBytes("bin/view.bin", new Uint8Array([1, 2, 3, 4]).subarray(1, 3));
await workspace.writeText("notes.txt", "hello again");
const bytes = await workspace.readBytes("bin/u8.bin");
return {
  text: await workspace.readText("notes.txt"),
  nested: await workspace.readText("./deep//er/still/a.txt"),
  isU8: bytes instanceof Uint8Array,
  bytes: Array.from(bytes),
  u16: Array.from(await workspace.readBytes("bin/u16.bin")),
  ab: Array.from(await workspace.readBytes("bin/ab.bin")),
  view: Array.from(await workspace.readBytes("bin/view.bin")),
  root: await workspace.list(),
  rootDot: await workspace.list("."),
  bin: (await workspace.list("bin")).map(e => e.name),
  exists: [await workspace.exists("notes.txt"), await workspace.exists("deep/er"), await workspace.exists("nope.txt"), await workspace.exists("nope/deeper.txt")],
  frozen: Object.isFrozen(workspace),
  typeofMethods: Object.keys(workspace).sort(),
};
"#,
    )
    .workspace(sandbox.grant())
    .go());
    assert_eq!(v.get("text"), Some(&s("hello again")));
    assert_eq!(v.get("nested"), Some(&s("nested")));
    assert_eq!(v.get("isU8"), Some(&Value::Bool(true)));
    let numbers = |xs: &[f64]| Value::Array(xs.iter().map(|x| Value::Number(*x)).collect());
    assert_eq!(v.get("bytes"), Some(&numbers(&[0.0, 1.0, 255.0])));
    assert_eq!(v.get("u16"), Some(&numbers(&[1.0, 0.0, 2.0, 1.0])));
    assert_eq!(v.get("ab"), Some(&numbers(&[9.0, 8.0, 7.0])));
    assert_eq!(v.get("view"), Some(&numbers(&[2.0, 3.0])));
    let entry = |name: &str, kind: &str, size: f64| {
        Value::Object(vec![
            ("name".into(), s(name)),
            ("type".into(), s(kind)),
            ("size".into(), Value::Number(size)),
        ])
    };
    let root = Value::Array(vec![
        entry("bin", "directory", 0.0),
        entry("deep", "directory", 0.0),
        entry("notes.txt", "file", 11.0),
    ]);
    assert_eq!(v.get("root"), Some(&root));
    assert_eq!(v.get("rootDot"), Some(&root));
    assert_eq!(
        v.get("bin").map(strings),
        Some(vec![
            "ab.bin".to_string(),
            "u16.bin".into(),
            "u8.bin".into(),
            "view.bin".into()
        ])
    );
    assert_eq!(
        v.get("exists"),
        Some(&Value::Array(vec![
            Value::Bool(true),
            Value::Bool(true),
            Value::Bool(false),
            Value::Bool(false)
        ]))
    );
    assert_eq!(v.get("frozen"), Some(&Value::Bool(true)));
    assert_eq!(
        v.get("typeofMethods").map(strings),
        Some(
            [
                "exists",
                "list",
                "readBytes",
                "readText",
                "writeBytes",
                "writeText"
            ]
            .map(String::from)
            .to_vec()
        )
    );
    // What the guest wrote is on disk, where it said.
    let root = sandbox.root();
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt"))
            .ok()
            .as_deref(),
        Some("hello again")
    );
    assert_eq!(
        std::fs::read(root.join("bin/u16.bin")).ok(),
        Some(vec![1, 0, 2, 1])
    );
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".nodetool")),
        "{names:?}"
    );
    assert_eq!(sandbox.outside_listing(), BASELINE_OUTSIDE);
}

#[test]
fn list_is_sorted_by_name_and_capped() {
    let sandbox = Sandboxed::new();
    let root = sandbox.root();
    for name in ["b.txt", "a.txt", "C.txt", "a0", "é.txt"] {
        std::fs::write(root.join(name), name).unwrap_or_else(|e| panic!("{e}"));
    }
    let v = ok(Run::new("return (await workspace.list()).map(e => e.name)")
        .workspace(sandbox.grant())
        .go());
    assert_eq!(strings(&v), ["C.txt", "a.txt", "a0", "b.txt", "é.txt"]);

    let mut grant = sandbox.grant();
    grant.max_list_entries = 5;
    let v = ok(Run::new("return (await workspace.list()).length")
        .workspace(grant.clone())
        .go());
    assert_eq!(v, Value::Number(5.0));
    grant.max_list_entries = 4;
    let v = ok(Run::new(
        "try { await workspace.list(); return 'listed' } catch (e) { return e.message }",
    )
    .workspace(grant)
    .go());
    assert_eq!(
        v,
        s("workspace.list: \".\" has more than 4 entries, the most one listing may return")
    );
}

#[test]
fn paths_that_escape_the_root_are_refused_and_touch_nothing_outside() {
    let sandbox = Sandboxed::new();
    for (path, reason) in [
        ("../x", "has a \"..\" segment"),
        ("../outside/secret.txt", "has a \"..\" segment"),
        ("a/../../x", "has a \"..\" segment"),
        ("a/..", "has a \"..\" segment"),
        ("/etc/passwd", "is absolute"),
        ("/tmp/x", "is absolute"),
        ("C:/x", "is absolute"),
        ("%2e%2e/x", "percent-encoded"),
        ("%2E%2E%2Fx", "percent-encoded"),
        ("a%2fb", "percent-encoded"),
        ("..%5cx", "percent-encoded"),
        ("..\\outside\\secret.txt", "backslash"),
        ("a\u{0}b", "control character"),
        ("a\nb", "control character"),
    ] {
        let messages = attempt_all(&sandbox, path);
        for (message, method) in messages.iter().zip([
            "readText",
            "readBytes",
            "writeText",
            "writeBytes",
            "list",
            "exists",
        ]) {
            let prefix = format!("workspace.{method}: {path:?} ");
            assert!(
                message.starts_with(&prefix) && message.contains(reason),
                "{path:?} {method}: {message}"
            );
        }
    }
    assert_eq!(sandbox.outside_listing(), BASELINE_OUTSIDE);
    assert_eq!(
        std::fs::read_dir(sandbox.root())
            .unwrap_or_else(|e| panic!("{e}"))
            .count(),
        0,
        "nothing was created inside the root either"
    );
    // Non-strings are refused by type.
    let v = ok(Run::new("const out = []; for (const p of [undefined, null, 1, {}]) { try { await workspace.readText(p) } catch (e) { out.push(e.message) } } try { await workspace.list(null) } catch (e) { out.push(e.message) } return out")
        .workspace(sandbox.grant())
        .go());
    assert_eq!(
        strings(&v),
        [
            "workspace.readText: the path must be a string, not undefined",
            "workspace.readText: the path must be a string, not null",
            "workspace.readText: the path must be a string, not int",
            "workspace.readText: the path must be a string, not object",
            "workspace.list: the path must be a string, not null",
        ]
    );
}

#[cfg(unix)]
#[test]
fn symbolic_links_are_refused_never_followed() {
    use std::os::unix::fs::symlink;
    let sandbox = Sandboxed::new();
    let root = sandbox.root();
    let outside = sandbox.outer.path().join("outside");
    symlink(outside.join("secret.txt"), root.join("link.txt")).unwrap_or_else(|e| panic!("{e}"));
    symlink(&outside, root.join("dirlink")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(root.join("sub")).unwrap_or_else(|e| panic!("{e}"));
    symlink(&outside, root.join("sub/inner")).unwrap_or_else(|e| panic!("{e}"));
    // A link to a place inside the root is refused just the same.
    std::fs::write(root.join("real.txt"), "real").unwrap_or_else(|e| panic!("{e}"));
    symlink(root.join("real.txt"), root.join("alias.txt")).unwrap_or_else(|e| panic!("{e}"));

    for (path, reason) in [
        (
            "link.txt",
            "is a symbolic link, which the workspace never follows",
        ),
        (
            "alias.txt",
            "is a symbolic link, which the workspace never follows",
        ),
        (
            "dirlink",
            "is a symbolic link, which the workspace never follows",
        ),
        (
            "dirlink/secret.txt",
            "passes through the symbolic link \"dirlink\", which the workspace never follows",
        ),
        (
            "dirlink/new.txt",
            "passes through the symbolic link \"dirlink\", which the workspace never follows",
        ),
        (
            "sub/inner/secret.txt",
            "passes through the symbolic link \"sub/inner\", which the workspace never follows",
        ),
        (
            "sub/inner/made/new.txt",
            "passes through the symbolic link \"sub/inner\", which the workspace never follows",
        ),
    ] {
        for (message, method) in attempt_all(&sandbox, path).iter().zip([
            "readText",
            "readBytes",
            "writeText",
            "writeBytes",
            "list",
            "exists",
        ]) {
            assert_eq!(
                *message,
                format!("workspace.{method}: {path:?} {reason}"),
                "{path} {method}"
            );
        }
    }
    // Nothing outside changed, the links are still links, and listing leaves them out.
    assert_eq!(sandbox.outside_listing(), BASELINE_OUTSIDE);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt"))
            .ok()
            .as_deref(),
        Some("top secret")
    );
    for link in ["link.txt", "dirlink", "alias.txt", "sub/inner"] {
        let meta = std::fs::symlink_metadata(root.join(link)).unwrap_or_else(|e| panic!("{e}"));
        assert!(meta.file_type().is_symlink(), "{link}");
    }
    let v = ok(Run::new("return [(await workspace.list()).map(e => e.name), (await workspace.list('sub')).map(e => e.name)]")
        .workspace(sandbox.grant())
        .go());
    let Value::Array(lists) = v else {
        panic!("{v:?}")
    };
    assert_eq!(strings(&lists[0]), ["real.txt", "sub"]);
    assert_eq!(strings(&lists[1]), Vec::<String>::new());
}

#[test]
fn size_caps_hold_for_reads_and_writes() {
    let sandbox = Sandboxed::new();
    let mut grant = sandbox.grant();
    grant.max_file_bytes = 10;
    std::fs::write(sandbox.root().join("big.txt"), "01234567890").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(sandbox.root().join("fits.txt"), "0123456789").unwrap_or_else(|e| panic!("{e}"));
    let v = ok(Run::new(
        r#"const out = [];
for (const call of [
  () => workspace.writeText("a.txt", "0123456789"),
  () => workspace.writeText("b.txt", "01234567890"),
  () => workspace.writeBytes("c.bin", new Uint8Array(11)),
  () => workspace.readText("big.txt"),
  () => workspace.readBytes("big.txt"),
  () => workspace.readText("fits.txt"),
]) { try { out.push(String(await call())) } catch (e) { out.push(e.message) } }
return out;"#,
    )
    .workspace(grant)
    .go());
    assert_eq!(
        strings(&v),
        [
            "undefined",
            "workspace.writeText: \"b.txt\" cannot be written: 11 bytes is over the 10 byte limit of a workspace file",
            "workspace.writeBytes: \"c.bin\" cannot be written: 11 bytes is over the 10 byte limit of a workspace file",
            "workspace.readText: \"big.txt\" is 11 bytes, over the 10 byte limit of a workspace file",
            "workspace.readBytes: \"big.txt\" is 11 bytes, over the 10 byte limit of a workspace file",
            "0123456789",
        ]
    );
    assert!(!sandbox.root().join("b.txt").exists());
    assert!(!sandbox.root().join("c.bin").exists());
    assert_eq!(
        WorkspaceGrant::standard("x").max_file_bytes,
        10 * 1024 * 1024
    );
    assert_eq!(WorkspaceGrant::standard("x").max_list_entries, 10_000);
}

/// Bytes of every regular file under `dir` and the number of entries (files and directories).
fn disk_use(dir: &Path) -> (u64, usize) {
    let mut paths = Vec::new();
    walk(dir, dir, &mut paths);
    let bytes = paths
        .iter()
        .filter_map(|p| std::fs::symlink_metadata(dir.join(p)).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    (bytes, paths.len())
}

/// A body that writes in a loop used to fill the disk 10 MiB at a time until the deadline; it
/// now stops at the run's write quota, with an error naming it.
#[test]
fn a_write_loop_stops_at_the_runs_write_quota() {
    let grant = WorkspaceGrant::standard("x");
    assert_eq!(grant.max_run_write_bytes, 256 * 1024 * 1024);
    assert_eq!(grant.max_run_entries, 10_000);

    let sandbox = Sandboxed::new();
    let e = err(Run::new(
        "const big = 'x'.repeat(8 * 1024 * 1024);\nfor (let i = 0;; i++) await workspace.writeText('f' + i, big);",
    )
    .workspace(sandbox.grant())
    .go());
    assert_eq!(e.code, RunErrorCode::RuntimeError);
    assert_eq!(
        e.message,
        "Error: workspace.writeText: this run's workspace write quota (256 MiB) is used up: 268435456 bytes are written and this write is 8388608 more; \"f32\" was not written"
    );
    let (bytes, entries) = disk_use(&sandbox.root());
    assert_eq!((bytes, entries), (256 * 1024 * 1024, 32));

    // Overwriting one file counts every time: the quota is on what a run writes.
    let sandbox = Sandboxed::new();
    let mut grant = sandbox.grant();
    grant.max_run_write_bytes = 1000;
    let v = ok(Run::new(
        "let i = 0;\ntry { for (;; i++) await workspace.writeBytes('same.bin', new Uint8Array(300)); }\ncatch (e) { return [String(i), e.message]; }",
    )
    .workspace(grant)
    .go());
    assert_eq!(
        strings(&v),
        [
            "3",
            "workspace.writeBytes: this run's workspace write quota (1000 bytes) is used up: 900 bytes are written and this write is 300 more; \"same.bin\" was not written",
        ]
    );
    assert_eq!(disk_use(&sandbox.root()), (300, 1));
}

/// Every file and directory a run creates counts; overwriting creates nothing.
#[test]
fn a_write_loop_stops_at_the_runs_entry_quota() {
    let sandbox = Sandboxed::new();
    let mut grant = sandbox.grant();
    grant.max_run_entries = 5;
    let v = ok(Run::new(
        r#"const out = [];
for (const path of ["d/0", "d/1", "d/2", "d/3", "d/4", "a/b/c"]) {
  try { await workspace.writeText(path, "x"); out.push("ok"); } catch (e) { out.push(e.message); }
}
await workspace.writeText("d/0", "overwritten");
out.push(await workspace.readText("d/0"));
return out;"#,
    )
    .workspace(grant)
    .go());
    assert_eq!(
        strings(&v),
        [
            "ok",
            "ok",
            "ok",
            "ok",
            "workspace.writeText: this run's workspace entry quota (5 new files and directories) is used up: 5 are created and this write needs 1 more; \"d/4\" was not written",
            "workspace.writeText: this run's workspace entry quota (5 new files and directories) is used up: 5 are created and this write needs 3 more; \"a/b/c\" was not written",
            "overwritten",
        ]
    );
    assert_eq!(disk_use(&sandbox.root()).1, 5);
}

#[test]
fn workspace_errors_name_the_guest_path_and_never_the_root() {
    let sandbox = Sandboxed::new();
    let root = sandbox.root();
    std::fs::write(root.join("latin1.txt"), [0x63, 0x61, 0x66, 0xe9])
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::create_dir(root.join("dir")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(root.join("file.txt"), "x").unwrap_or_else(|e| panic!("{e}"));
    let v = ok(Run::new(
        r#"const out = [];
for (const call of [
  () => workspace.readText("latin1.txt"),
  () => workspace.readText("missing.txt"),
  () => workspace.readText("dir"),
  () => workspace.readBytes(""),
  () => workspace.writeText("dir", "x"),
  () => workspace.writeText(".", "x"),
  () => workspace.writeText("file.txt/child.txt", "x"),
  () => workspace.writeText("x.txt", 42),
  () => workspace.writeBytes("x.bin", "not bytes"),
  () => workspace.writeBytes("x.bin", [1, 2]),
  () => workspace.list("file.txt"),
  () => workspace.list("missing"),
  () => workspace.exists("file.txt/child"),
  () => workspace.readText("/" + "x".repeat(5000)),
]) { try { await call(); out.push("ok") } catch (e) { out.push(e.message) } }
return out;"#,
    )
    .workspace(sandbox.grant())
    .go());
    let messages = strings(&v);
    let root_text = root.to_string_lossy().into_owned();
    let outer_text = sandbox.outer.path().to_string_lossy().into_owned();
    for m in &messages {
        assert!(!m.contains(&root_text) && !m.contains(&outer_text), "{m}");
    }
    assert_eq!(
        &messages[..13],
        [
            "workspace.readText: \"latin1.txt\" is not valid UTF-8 text; read it with readBytes",
            "workspace.readText: \"missing.txt\" does not exist",
            "workspace.readText: \"dir\" is a directory, not a file",
            "workspace.readBytes: \".\" is a directory, not a file",
            "workspace.writeText: \"dir\" is a directory, not a file",
            "workspace.writeText: \".\" is the workspace directory itself, not a file",
            "workspace.writeText: \"file.txt/child.txt\" cannot be written: \"file.txt\" is not a directory",
            "workspace.writeText: \"x.txt\" cannot be written: the text must be a string, not int",
            "workspace.writeBytes: \"x.bin\" cannot be written: the bytes must be a Uint8Array, another typed array or an ArrayBuffer, not string",
            "workspace.writeBytes: \"x.bin\" cannot be written: the bytes must be a Uint8Array, another typed array or an ArrayBuffer, not array",
            "workspace.list: \"file.txt\" is not a directory",
            "workspace.list: \"missing\" does not exist",
            "workspace.exists: \"file.txt/child\" cannot be reached: \"file.txt\" is not a directory",
        ]
    );
    assert!(
        messages[13].starts_with("workspace.readText: \"/xxx") && messages[13].len() < 400,
        "{}",
        messages[13]
    );
    // A root that has gone away is reported without its path.
    let mut grant = sandbox.grant();
    grant.root = sandbox.outer.path().join("gone");
    let v = ok(Run::new(
        "try { await workspace.readText('a.txt') } catch (e) { return e.message }",
    )
    .workspace(grant)
    .go());
    assert_eq!(
        v,
        s(
            "workspace.readText: \"a.txt\" cannot be reached: the run's workspace directory is unavailable"
        )
    );
    // Uncaught, a workspace error ends the run as a runtime error with the same message.
    let e = err(Run::new("await workspace.readText('missing.txt')")
        .workspace(sandbox.grant())
        .go());
    assert_eq!(e.code, RunErrorCode::RuntimeError);
    assert_eq!(
        e.message,
        "Error: workspace.readText: \"missing.txt\" does not exist"
    );
    assert!(!e.message.contains(&root_text));
}

#[test]
fn capabilities_are_absent_unless_granted() {
    let v = ok(Run::new(
        "return [typeof workspace, typeof fetch, typeof getSecret, 'workspace' in globalThis, 'fetch' in globalThis]",
    )
    .go());
    assert_eq!(
        v,
        Value::Array(vec![
            s("undefined"),
            s("undefined"),
            s("undefined"),
            Value::Bool(false),
            Value::Bool(false)
        ])
    );
    let sandbox = Sandboxed::new();
    let v = ok(Run::new("return [typeof workspace, typeof fetch]")
        .workspace(sandbox.grant())
        .go());
    assert_eq!(v, Value::Array(vec![s("object"), s("undefined")]));
    let v = ok(Run::new("return [typeof workspace, typeof fetch]")
        .fetch(grant(&["api.example.com"], 1024, FakeClient::new()))
        .go());
    assert_eq!(v, Value::Array(vec![s("undefined"), s("function")]));
}

// ---------------------------------------------------------------------------------------------
// fetch
// ---------------------------------------------------------------------------------------------

/// Answers from a fixed table by URL, recording every request; fails for unknown URLs.
#[derive(Default)]
struct FakeClient {
    requests: Mutex<Vec<(OutboundRequest, usize)>>,
    /// Returned as the response's URL when set (a redirect elsewhere).
    final_url: Option<String>,
}

impl FakeClient {
    fn new() -> Arc<FakeClient> {
        Arc::new(FakeClient::default())
    }
    fn requests(&self) -> Vec<(OutboundRequest, usize)> {
        self.requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }
}

impl FetchTransport for FakeClient {
    fn perform(&self, request: OutboundRequest, reader: BodyReader) -> TransportFuture {
        let max_response_bytes = reader.max_bytes;
        let mut charge = reader.charge;
        if let Ok(mut r) = self.requests.lock() {
            r.push((request.clone(), max_response_bytes));
        }
        let path = request
            .url
            .split_once("://")
            .and_then(|(_, rest)| rest.split_once('/'))
            .map(|(_, p)| format!("/{p}"))
            .unwrap_or_default();
        let ok = |body: Vec<u8>, content_type: &str| FetchResponse {
            status: 200,
            status_text: "OK".into(),
            url: self
                .final_url
                .clone()
                .unwrap_or_else(|| request.url.clone()),
            headers: vec![
                ("Content-Type".into(), content_type.into()),
                ("X-Multi".into(), "a".into()),
                ("x-multi".into(), "b".into()),
                ("__proto__".into(), "just a header".into()),
            ],
            body,
        };
        let answer = match path.as_str() {
            "/text" => Ok(ok(b"hello, world".to_vec(), "text/plain")),
            "/json" => Ok(ok(
                br#"{"n": 1, "list": [true, null, "x"]}"#.to_vec(),
                "application/json",
            )),
            "/bytes" => Ok(ok(vec![0, 1, 2, 254, 255], "application/octet-stream")),
            "/bad-json" => Ok(ok(b"{not json".to_vec(), "application/json")),
            "/big" => Ok(ok(vec![b'x'; 2048], "text/plain")),
            "/mib" => Ok(ok(vec![b'x'; 1 << 20], "text/plain")),
            "/missing" => Ok(FetchResponse {
                status: 404,
                status_text: "Not Found".into(),
                url: String::new(),
                headers: vec![],
                body: b"nope".to_vec(),
            }),
            "/echo" => Ok(ok(
                format!(
                    "{} {} {:?} {}",
                    request.method,
                    request.url,
                    request.headers,
                    String::from_utf8_lossy(request.body.as_deref().unwrap_or_default())
                )
                .into_bytes(),
                "text/plain",
            )),
            other => Err(format!("connection refused for {other}")),
        };
        let answer = answer.and_then(|response| {
            charge.grow(response.body.len())?;
            Ok(Received { response, charge })
        });
        Box::pin(std::future::ready(answer))
    }
}

/// Never answers.
struct SilentClient;

impl FetchTransport for SilentClient {
    fn perform(&self, _request: OutboundRequest, _reader: BodyReader) -> TransportFuture {
        Box::pin(std::future::pending())
    }
}

/// Answers on another thread after a delay (the loop must wait without spinning the guest).
struct SlowClient;

impl FetchTransport for SlowClient {
    fn perform(&self, request: OutboundRequest, reader: BodyReader) -> TransportFuture {
        let (tx, rx) = std::sync::mpsc::channel::<FetchResponse>();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let _ = tx.send(FetchResponse {
                status: 200,
                status_text: "OK".into(),
                url: request.url,
                headers: vec![],
                body: b"late".to_vec(),
            });
        });
        let charge = reader.charge;
        Box::pin(async move {
            Receiving(rx)
                .await
                .map(|response| Received { response, charge })
        })
    }
}

/// A future over a channel that re-arms its waker by polling (enough for a test).
struct Receiving(std::sync::mpsc::Receiver<FetchResponse>);

impl std::future::Future for Receiving {
    type Output = Result<FetchResponse, String>;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.0.try_recv() {
            Ok(r) => std::task::Poll::Ready(Ok(r)),
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            }
            Err(e) => std::task::Poll::Ready(Err(e.to_string())),
        }
    }
}

fn grant(hosts: &[&str], max: usize, transport: Arc<dyn FetchTransport>) -> FetchGrant {
    FetchGrant {
        allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
        max_response_bytes: max,
        transport,
    }
}

#[test]
fn fetch_reaches_an_allowed_host_and_reads_text_json_and_bytes() {
    let client = FakeClient::new();
    let v = ok(Run::new(
        r#"
const t = await fetch("https://API.Example.com/text#frag");
const j = await fetch("https://api.example.com/json");
const b = await fetch("http://api.example.com:8080/bytes");
const m = await fetch("https://api.example.com/missing");
const bytes = await b.bytes();
const buffer = await b.arrayBuffer();
return {
  status: t.status, statusText: t.statusText, ok: t.ok, url: t.url,
  headers: t.headers, protoHeader: Object.getPrototypeOf(t.headers) === Object.prototype,
  text: await t.text(), textAgain: await t.text(),
  json: await j.json(),
  isU8: bytes instanceof Uint8Array, bytes: Array.from(bytes),
  isAB: buffer instanceof ArrayBuffer, abLength: buffer.byteLength,
  missing: [m.status, m.ok, m.statusText, m.url, await m.text()],
  promises: [t.text() instanceof Promise, t.json() instanceof Promise],
};
"#,
    )
    .fetch(grant(&["api.example.com"], 1024, client.clone()))
    .go());
    assert_eq!(v.get("status"), Some(&Value::Number(200.0)));
    assert_eq!(v.get("statusText"), Some(&s("OK")));
    assert_eq!(v.get("ok"), Some(&Value::Bool(true)));
    assert_eq!(v.get("url"), Some(&s("https://api.example.com/text")));
    assert_eq!(
        v.get("headers"),
        Some(&Value::Object(vec![
            ("__proto__".into(), s("just a header")),
            ("content-type".into(), s("text/plain")),
            ("x-multi".into(), s("a, b")),
        ]))
    );
    assert_eq!(v.get("protoHeader"), Some(&Value::Bool(true)));
    assert_eq!(v.get("text"), Some(&s("hello, world")));
    assert_eq!(v.get("textAgain"), Some(&s("hello, world")));
    assert_eq!(
        v.get("json"),
        Some(&Value::Object(vec![
            ("n".into(), Value::Number(1.0)),
            (
                "list".into(),
                Value::Array(vec![Value::Bool(true), Value::Null, s("x")])
            ),
        ]))
    );
    assert_eq!(v.get("isU8"), Some(&Value::Bool(true)));
    assert_eq!(
        v.get("bytes"),
        Some(&Value::Array(
            [0.0, 1.0, 2.0, 254.0, 255.0]
                .iter()
                .map(|n| Value::Number(*n))
                .collect()
        ))
    );
    assert_eq!(v.get("isAB"), Some(&Value::Bool(true)));
    assert_eq!(v.get("abLength"), Some(&Value::Number(5.0)));
    assert_eq!(
        v.get("missing"),
        Some(&Value::Array(vec![
            Value::Number(404.0),
            Value::Bool(false),
            s("Not Found"),
            s("https://api.example.com/missing"),
            s("nope"),
        ]))
    );
    let requests = client.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[0].0.url, "https://api.example.com/text");
    assert_eq!(requests[0].0.method, "GET");
    assert_eq!(requests[0].0.body, None);
    assert_eq!(requests[0].1, 1024);
    assert_eq!(requests[2].0.url, "http://api.example.com:8080/bytes");
}

#[test]
fn fetch_sends_method_headers_and_body() {
    let client = FakeClient::new();
    let v = ok(Run::new(
        r#"
const a = await fetch("https://api.example.com/echo", { method: "post", headers: { "X-Token": "t", Accept: "application/json", "X-N": 3 }, body: "hi" });
const b = await fetch("https://api.example.com/echo", { method: "PUT", body: new Uint16Array([0x6968]) });
return [await a.text(), await b.text()];
"#,
    )
    .fetch(grant(&["api.example.com"], 1024, client.clone()))
    .go());
    assert_eq!(
        strings(&v),
        [
            r#"POST https://api.example.com/echo [("x-token", "t"), ("accept", "application/json"), ("x-n", "3")] hi"#,
            r#"PUT https://api.example.com/echo [] hi"#,
        ]
    );
    assert_eq!(client.requests()[1].0.body, Some(b"hi".to_vec()));
}

#[test]
fn fetch_refuses_what_the_grant_does_not_allow() {
    let client = FakeClient::new();
    let v = ok(Run::new(
        r#"const out = [];
for (const call of [
  () => fetch("https://evil.example.com/text"),
  () => fetch("https://api.example.com.evil.com/text"),
  () => fetch("https://API.EXAMPLE.COM.evil.com/text"),
  () => fetch("https://user@evil.example.com/text"),
  () => fetch("https://127.0.0.1/text"),
  () => fetch("file:///etc/passwd"),
  () => fetch("data:text/plain,hi"),
  () => fetch("not a url"),
  () => fetch(42),
  () => fetch(),
  () => fetch("https://api.example.com/text", { method: "CONNECT" }),
  () => fetch("https://api.example.com/text", { method: "GET\r\nX: y" }),
  () => fetch("https://api.example.com/text", { headers: { Host: "internal" } }),
  () => fetch("https://api.example.com/text", { headers: { "x-a": "1\r\nHost: internal" } }),
  () => fetch("https://api.example.com/text", { headers: { "bad name": "1" } }),
  () => fetch("https://api.example.com/text", { body: "x" }),
  () => fetch("https://api.example.com/text", { method: "POST", body: { a: 1 } }),
  () => fetch("https://api.example.com/text", { get method() { throw new TypeError("from a getter") } }),
]) { try { await call(); out.push("ok") } catch (e) { out.push(`${e.name}: ${e.message}`) } }
return out;"#,
    )
    .fetch(grant(&["api.example.com", "[::1]"], 1024, client.clone()))
    .go());
    assert_eq!(
        strings(&v),
        [
            "Error: fetch: \"evil.example.com\" is not an allowed host for this run",
            "Error: fetch: \"api.example.com.evil.com\" is not an allowed host for this run",
            "Error: fetch: \"api.example.com.evil.com\" is not an allowed host for this run",
            "Error: fetch: \"evil.example.com\" is not an allowed host for this run",
            "Error: fetch: \"127.0.0.1\" is not an allowed host for this run",
            "Error: fetch: \"file:///etc/passwd\" uses the \"file:\" scheme; only http and https are allowed",
            "Error: fetch: \"data:text/plain,hi\" uses the \"data:\" scheme; only http and https are allowed",
            "Error: fetch: \"not a url\" is not a valid URL (relative URL without a base)",
            "Error: fetch: the URL must be a string, not int",
            "Error: fetch: the URL must be a string, not undefined",
            "Error: fetch: the CONNECT method is not allowed",
            "Error: fetch: \"GET\\r\\nX: y\" is not a valid HTTP method",
            "Error: fetch: the \"host\" header is set by the host and cannot be given",
            "Error: fetch: the \"x-a\" header has a line break or NUL in its value",
            "Error: fetch: \"bad name\" is not a valid header name",
            "Error: fetch: a GET request cannot have a body",
            "Error: fetch: the body must be a string, a typed array or an ArrayBuffer, not object",
            "TypeError: from a getter",
        ]
    );
    assert!(client.requests().is_empty(), "{:?}", client.requests());
    // IP hosts are matched in their normalized form.
    let v = ok(Run::new(
        "try { return (await fetch('http://[0:0::1]:9/text')).status } catch (e) { return e.message }",
    )
    .fetch(grant(&["[::1]"], 1024, FakeClient::new()))
    .go());
    assert_eq!(v, Value::Number(200.0));
}

#[test]
fn fetch_refuses_oversized_and_redirected_responses_and_surfaces_client_errors() {
    let v = ok(Run::new(
        r#"const out = [];
for (const call of [
  () => fetch("https://api.example.com/big"),
  () => fetch("https://api.example.com/unknown"),
  () => fetch("https://api.example.com/bad-json").then(r => r.json()),
]) { try { await call(); out.push("ok") } catch (e) { out.push(`${e instanceof Error} ${e.name}: ${e.message}`) } }
return out;"#,
    )
    .fetch(grant(&["api.example.com"], 1024, FakeClient::new()))
    .go());
    let messages = strings(&v);
    assert_eq!(
        messages[..2],
        [
            "true Error: fetch: the response from api.example.com exceeds the 1024 byte limit",
            "true Error: fetch: the request to api.example.com failed: connection refused for /unknown",
        ]
    );
    assert!(
        messages[2].starts_with("true SyntaxError: "),
        "{}",
        messages[2]
    );
    // A response whose final URL is on another host is refused.
    let redirected = Arc::new(FakeClient {
        final_url: Some("https://evil.example.com/text".into()),
        ..FakeClient::default()
    });
    let v = ok(Run::new(
        "try { await fetch('https://api.example.com/text'); return 'ok' } catch (e) { return e.message }",
    )
    .fetch(grant(&["api.example.com"], 1024, redirected))
    .go());
    assert_eq!(
        v,
        s(
            "fetch: the response from api.example.com came from \"evil.example.com\", which is not an allowed host for this run"
        )
    );
    // Uncaught, a fetch error ends the run with its message.
    let e = err(Run::new("await fetch('https://api.example.com/unknown')")
        .fetch(grant(&["api.example.com"], 1024, FakeClient::new()))
        .go());
    assert_eq!(e.code, RunErrorCode::RuntimeError);
    assert!(e.message.contains("connection refused for /unknown"), "{e}");
}

#[test]
fn fetch_waits_on_the_event_loop_under_the_run_deadline() {
    let v = ok(Run::new(
        "const [a, b] = await Promise.all([fetch('https://slow.example/a'), fetch('https://slow.example/b')]); return [await a.text(), await b.text()]",
    )
    .fetch(grant(&["slow.example"], 1024, Arc::new(SlowClient)))
    .go());
    assert_eq!(strings(&v), ["late", "late"]);
    let mut run = Run::new("await fetch('https://api.example.com/x'); return 'done'").fetch(grant(
        &["api.example.com"],
        1024,
        Arc::new(SilentClient),
    ));
    run.limits.timeout = Duration::from_millis(150);
    let started = std::time::Instant::now();
    assert_eq!(err(run.go()).code, RunErrorCode::Timeout);
    assert!(started.elapsed() < Duration::from_secs(5));
    // The next run is unaffected.
    assert_eq!(ok(Run::new("return 1").go()), Value::Number(1.0));
}

#[test]
fn response_bodies_count_against_the_guest_heap() {
    // 1 MiB bodies kept alive by the guest exhaust its 16 MiB heap, not the host's memory.
    let mut run = Run::new(
        "const kept = []; for (let i = 0; i < 64; i++) kept.push(await fetch('https://api.example.com/mib')); return kept.length",
    )
    .fetch(grant(&["api.example.com"], 2 << 20, FakeClient::new()));
    run.limits.memory_bytes = 16 * 1024 * 1024;
    assert_eq!(err(run.go()).code, RunErrorCode::MemoryLimit);
    // Read and dropped, they are collected.
    let mut run = Run::new(
        "let n = 0; for (let i = 0; i < 64; i++) n += (await (await fetch('https://api.example.com/mib')).bytes()).length; return n",
    )
    .fetch(grant(&["api.example.com"], 2 << 20, FakeClient::new()));
    run.limits.memory_bytes = 16 * 1024 * 1024;
    assert_eq!(ok(run.go()), Value::Number(64.0 * 1048576.0));
}

fn js_module(specifier: &str, source: &str) -> ResolvedModule {
    ResolvedModule {
        specifier: specifier.into(),
        pack_name: specifier.into(),
        pack_version: Some("1.0.0".into()),
        content_digest: "a".repeat(64),
        module_id: "sandbox/m.js".into(),
        graph: vec![GraphFile {
            id: "sandbox/m.js".into(),
            internal: false,
            dependencies: vec![],
            content: FileContent::Js {
                source: source.into(),
            },
        }],
        kind: ResolvedKind::Js,
    }
}

#[test]
fn a_pack_module_sees_exactly_the_granted_workspace_and_fetch() {
    let reader = js_module(
        "@acme/reader",
        "export const files = typeof workspace === 'object' ? await workspace.readText('in.txt').catch(e => e.message) : 'no workspace';\n\
         export const page = typeof fetch === 'function' ? await fetch('https://api.example.com/text').then(r => r.text(), e => e.message) : 'no fetch';\n",
    );
    let body = "import { files, page } from '@acme/reader'; return [files, page]";
    let v = ok(Run::new(body).with(reader.clone()).go());
    assert_eq!(strings(&v), ["no workspace", "no fetch"]);

    let sandbox = Sandboxed::new();
    std::fs::write(sandbox.root().join("in.txt"), "from the workspace")
        .unwrap_or_else(|e| panic!("{e}"));
    let v = ok(Run::new(body)
        .with(reader.clone())
        .workspace(sandbox.grant())
        .go());
    assert_eq!(strings(&v), ["from the workspace", "no fetch"]);

    let v = ok(Run::new(body)
        .with(reader.clone())
        .fetch(grant(&["api.example.com"], 1024, FakeClient::new()))
        .go());
    assert_eq!(strings(&v), ["no workspace", "hello, world"]);

    // Granted, but to other hosts: the module gets the same refusal the body would.
    let v = ok(Run::new(body)
        .with(reader)
        .workspace(sandbox.grant())
        .fetch(grant(&["other.example.com"], 1024, FakeClient::new()))
        .go());
    assert_eq!(
        strings(&v),
        [
            "from the workspace",
            "fetch: \"api.example.com\" is not an allowed host for this run"
        ]
    );
}

/// Never answers a dispatcher call.
struct NeverDispatcher;

impl nodetool_guest::Dispatcher for NeverDispatcher {
    fn call(
        &self,
        _key: &str,
        _export: &str,
        _args: Vec<Value>,
        _deadline: std::time::Instant,
    ) -> nodetool_guest::DispatchFuture {
        Box::pin(std::future::pending())
    }
}

#[test]
fn calls_still_pending_when_a_run_ends_are_dropped_cleanly() {
    // A fetch left behind by a body that returns without awaiting it.
    let v = ok(Run::new(
        "fetch('https://api.example.com/x'); fetch('https://api.example.com/y'); return 'early'",
    )
    .fetch(grant(&["api.example.com"], 1024, Arc::new(SilentClient)))
    .go());
    assert_eq!(v, s("early"));
    // A host-module call pending at the deadline (this used to abort the process in
    // `JS_FreeRuntime`, taking every other run with it).
    let resolution = Resolution {
        modules: vec![ResolvedModule {
            specifier: "@nodetool-ai/sandbox-csv".into(),
            pack_name: "@nodetool-ai/sandbox-csv".into(),
            pack_version: None,
            content_digest: "a".repeat(64),
            module_id: "host:csv".into(),
            graph: vec![],
            kind: ResolvedKind::Host {
                host_id: "csv".into(),
            },
        }],
        statuses: vec![],
    };
    let mut limits = RunLimits::STANDARD;
    limits.timeout = Duration::from_millis(100);
    let outcome = Sandbox::new().run(RunRequest {
        code: "import { parse } from '@nodetool-ai/sandbox-csv'; await parse('a,b')",
        resolution: &resolution,
        inputs: &Value::Null,
        limits,
        capabilities: Capabilities::default(),
        dispatchers: Dispatchers {
            host: Some(Arc::new(NeverDispatcher)),
            wasm: None,
        },
        cancel: None,
    });
    assert_eq!(err(outcome).code, RunErrorCode::Timeout);
}
