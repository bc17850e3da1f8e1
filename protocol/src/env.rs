//! Every environment variable the workspace reads, in one place: who reads it and what it
//! does. README.md's table is generated from [`VARIABLES`], and a test
//! (`tests/tests/environment.rs`) fails when a source file reads a variable this list does not
//! document, or the list documents one nothing reads.
//!
//! Below the front ends nothing reads the environment: `cli` and `server` read these values
//! and pass them down (the exceptions are marked: the worker's own switches, tests and
//! benchmarks).

/// Who a variable is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// The operator or user of `nodetool` and `nodetool-server`.
    Operator,
    /// The test suite and CI.
    Tests,
    /// `cargo xtask bench` and the benchmarks.
    Benchmarks,
    /// Set by the build (`build.rs`) and read at compile time.
    Build,
}

impl Audience {
    fn label(self) -> &'static str {
        match self {
            Audience::Operator => "operator",
            Audience::Tests => "tests",
            Audience::Benchmarks => "benchmarks",
            Audience::Build => "build",
        }
    }
}

/// One variable.
#[derive(Debug, Clone, Copy)]
pub struct Variable {
    /// Its name.
    pub name: &'static str,
    /// Who sets it.
    pub audience: Audience,
    /// Who reads it.
    pub read_by: &'static str,
    /// What it does.
    pub meaning: &'static str,
}

const fn v(
    name: &'static str,
    audience: Audience,
    read_by: &'static str,
    meaning: &'static str,
) -> Variable {
    Variable {
        name,
        audience,
        read_by,
        meaning,
    }
}

/// Every variable, operators' first.
pub const VARIABLES: &[Variable] = &[
    v(
        "HOME",
        Audience::Operator,
        "cli, server",
        "The default for the XDG directories below; without it and them, commands that need a directory exit 2.",
    ),
    v(
        "XDG_DATA_HOME",
        Audience::Operator,
        "cli, server",
        "Installed packs (`nodetool/packs`) and the shipped packs written out on first use (`nodetool/shipped`); default `~/.local/share`.",
    ),
    v(
        "XDG_CONFIG_HOME",
        Audience::Operator,
        "cli, server",
        "The pack allowlist (`nodetool/packs.json`); default `~/.config`.",
    ),
    v(
        "XDG_CACHE_HOME",
        Audience::Operator,
        "cli, server",
        "The compile cache and compiled WASM artifacts (`nodetool/`); default `~/.cache`.",
    ),
    v(
        "NODETOOL_PACKS_PATH",
        Audience::Operator,
        "cli, server",
        "Colon-separated pack roots searched after `--packs` and before the installed root.",
    ),
    v(
        "NODETOOL_SHIPPED_PACKS_DIR",
        Audience::Operator,
        "cli, server",
        "The shipped packs' directory instead of the binary's own (a checkout's `packs/`, an image's copy).",
    ),
    v(
        "NODETOOL_WEB_DIR",
        Audience::Operator,
        "cli, server",
        "The browser runner's build to serve, as `--web-dir`.",
    ),
    v(
        "NODETOOL_TOKEN_FILE",
        Audience::Operator,
        "server",
        "The bearer token's file, as `--token-file` (required to bind a non-loopback address).",
    ),
    v(
        "NODETOOL_ALLOW_UNCONFINED",
        Audience::Operator,
        "cli, server (the worker pool)",
        "`1` runs bodies in workers that could not confine themselves (no seccomp or Landlock), as `--allow-unconfined`.",
    ),
    v(
        "NODETOOL_NPM",
        Audience::Operator,
        "cli",
        "The npm executable `packs install` and `packs compile` run, instead of `npm` on `PATH`.",
    ),
    v(
        "NODETOOL_VERBOSE",
        Audience::Operator,
        "cli",
        "Set: `packs install` and `packs compile` print npm's own output.",
    ),
    v(
        "NO_COLOR",
        Audience::Operator,
        "cli",
        "Set and not empty: no colour in the CLI's output.",
    ),
    v(
        "TESSDATA_PREFIX",
        Audience::Operator,
        "host-modules (ocr)",
        "Where Tesseract's language data is, instead of the distribution's directories.",
    ),
    v(
        "CI",
        Audience::Tests,
        "tests",
        "Set: a test whose external tool (node, python, LibreOffice, Chromium) is missing fails instead of passing with a note.",
    ),
    v(
        "NODETOOL_CHROMIUM",
        Audience::Tests,
        "tests, xtask",
        "The Chromium executable the Packages page tests and `cargo xtask fixtures --browser` drive.",
    ),
    v(
        "NODETOOL_TEST_UNCONFINABLE",
        Audience::Tests,
        "the sandbox worker (debug builds only)",
        "`1`: the worker reports that it cannot confine itself, so the tests can check the refusal.",
    ),
    v(
        "NODETOOL_PANIC_CHILD",
        Audience::Tests,
        "host-modules' tests",
        "Set in the child process of the panic-hook test.",
    ),
    v(
        "NODETOOL_REGENERATE",
        Audience::Tests,
        "guest's tests",
        "Set: the standard-globals test rewrites its expected file instead of failing.",
    ),
    v(
        "NODETOOL_UPDATE_DOCS",
        Audience::Tests,
        "the generated-docs tests",
        "Set: a generated table in the docs (error codes, this list) is rewritten instead of failing as stale.",
    ),
    v(
        "BENCH_SECONDS",
        Audience::Benchmarks,
        "the guest, wasm and worker benchmarks",
        "Seconds each measurement runs.",
    ),
    v(
        "BENCH_ONLY",
        Audience::Benchmarks,
        "the host-module benchmarks",
        "Comma-separated module ids: measure only those.",
    ),
    v(
        "BENCH_RUNS",
        Audience::Benchmarks,
        "the host, html and documents benchmarks",
        "Timed calls per measurement (after the warm-ups).",
    ),
    v(
        "BENCH_ITERATIONS",
        Audience::Benchmarks,
        "the discovery benchmark",
        "Discoveries per measurement.",
    ),
    v(
        "BENCH_BEFORE",
        Audience::Benchmarks,
        "the hostile-input benchmark",
        "Set: also time the inputs as the modules handled them before their caps (for a note's before and after).",
    ),
    v(
        "NODETOOL_BENCH_FABRIC_DIR",
        Audience::Benchmarks,
        "the fabric benchmark",
        "Where npm `fabric` and its native `canvas` are installed, to time the reference's library beside ours.",
    ),
    v(
        "NODETOOL_BENCH_SECONDS",
        Audience::Benchmarks,
        "xtask (server bench)",
        "Seconds each server measurement runs.",
    ),
    v(
        "NODETOOL_BENCH_ROUNDS",
        Audience::Benchmarks,
        "xtask (server bench)",
        "Rounds of the server bench.",
    ),
    v(
        "NODETOOL_BENCH_BASELINE",
        Audience::Benchmarks,
        "xtask (server bench)",
        "A second server binary measured side by side.",
    ),
    v(
        "NODETOOL_BENCH_JS_YAML",
        Audience::Benchmarks,
        "the guest and worker benchmarks (set by xtask)",
        "The bundled js-yaml the benchmarks run.",
    ),
    v(
        "NODETOOL_BENCH_WORKER",
        Audience::Benchmarks,
        "the worker benchmark (set by xtask)",
        "The `nodetool` binary the worker benchmark starts workers from.",
    ),
    v(
        "NODETOOL_BENCH_INPUTS",
        Audience::Benchmarks,
        "the host and html benchmarks",
        "The peer bench's generated inputs (`<peer-bench>/results/inputs`).",
    ),
    v(
        "NODETOOL_PEER_BENCH",
        Audience::Benchmarks,
        "the compile benchmark",
        "The peer-bench directory, to run esbuild's bundle beside ours.",
    ),
    v(
        "NODETOOL_LOCKED_RQUICKJS_SYS",
        Audience::Build,
        "cli (`nodetool info`)",
        "The locked rquickjs-sys version, set by cli's build script from Cargo.lock.",
    ),
    v(
        "NODETOOL_LOCKED_WASMTIME",
        Audience::Build,
        "cli (`nodetool info`)",
        "The locked wasmtime version, set by cli's build script from Cargo.lock.",
    ),
    v(
        "NODETOOL_LOCKED_ROLLDOWN",
        Audience::Build,
        "cli (`nodetool info`)",
        "The locked rolldown version, set by cli's build script from Cargo.lock.",
    ),
];

/// The variable named `name`, if the workspace reads it.
pub fn variable(name: &str) -> Option<&'static Variable> {
    VARIABLES.iter().find(|v| v.name == name)
}

/// README.md's table, generated from [`VARIABLES`].
pub fn docs_table() -> String {
    let mut table =
        String::from("| variable | for | read by | what it does |\n|---|---|---|---|\n");
    for v in VARIABLES {
        table.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            v.name,
            v.audience.label(),
            v.read_by,
            v.meaning
        ));
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_row_is_a_sentence() {
        let mut seen = std::collections::HashSet::new();
        for v in VARIABLES {
            assert!(seen.insert(v.name), "{} twice", v.name);
            assert!(v.meaning.ends_with('.'), "{}", v.name);
            assert!(
                v.name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            );
        }
        assert!(variable("NODETOOL_PACKS_PATH").is_some());
        assert!(variable("PATH").is_none());
    }
}
