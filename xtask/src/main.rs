//! `cargo xtask`: the repository's automation, in Rust.
//!
//! * `cargo xtask ci` is the test command: what the tests need besides Rust (checked first and
//!   named exactly when missing; the npm parts installed and built here), formatting, clippy,
//!   the whole test suite (`--locked`), the layering rules (the engine-free crates link no
//!   engine; the front ends link no OCR library at build time; ARCHITECTURE.md's crate table is
//!   exactly the workspace's dependency graph, `layering.rs`; the test suite runs with `HOME` on
//!   a read-only directory and no XDG variable, `isolation.rs`, so no test writes outside its
//!   temporary directories), the guest contract fixtures, in Rust and in the browser, and
//!   the host-module conformance suite. `.ci/run` installs the
//!   system packages, then calls it.
//! * `cargo xtask export` regenerates the committed generated files (the manifest JSON Schema,
//!   the guest contract fixtures and the browser runner's copy of the host-module registry);
//!   tests fail when a committed copy drifts from what the code generates.
//! * `cargo xtask fixtures` runs every guest contract fixture against the Rust guest: one line
//!   per failure, then `N passed, M failed`. `cargo xtask fixtures --browser` runs the same
//!   fixtures (from `tests/contract/fixtures.json`) through the browser runner in headless
//!   Chromium against the server's router on loopback, plus a tampered-body case.
//! * `cargo xtask conformance [--cases N]` runs the host modules against the reference's
//!   libraries and real clients on published and seeded random inputs (`conformance.rs`,
//!   `docs/host-modules.md`); `ci` runs it last.
//! * `cargo xtask bench <area>` runs an optimized benchmark (discovery, guest, wasm, host, html,
//!   hostile, documents, data, compile, worker, server; an unknown area lists them) and prints
//!   its figures, side by side with the reference's library where there is one. Benchmarks are
//!   never part of the test suite: the machines are shared and noisy.

mod browser;
mod conformance;
mod isolation;
mod layering;
mod server_bench;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: cargo xtask <command>\n\n\
         commands:\n  \
         ci                  formatting, every test, the layering check and the fixtures (what .ci/run runs)\n  \
         export              regenerate the manifest schema, tests/contract/fixtures.json and docs/nodetool.1\n  \
         fixtures            run every guest contract fixture against the Rust guest\n  \
         fixtures --browser  the same fixtures through the browser runner in headless Chromium\n  \
         bench discovery     discover 200 generated packs; resolution cost at 20 vs 2,000 packs\n  \
         bench guest         one invocation's cost, a js-yaml import, peak memory per run\n  \
         bench wasm          one scalar call: instantiate + call + drop, from Rust and from guest code\n  \
         bench server        wrk against a release nodetool-server: runs, a pack import, a module GET, 503s\n  \
         bench host          csv, xml, zip, diff from guest code on the reference's inputs\n  \
         bench html          html.select and html.toMarkdown from guest code on the reference's page\n  \
         conformance         host modules against the reference libraries and real clients (--cases N: random cases per module, 300)\n  \
         bench hostile       the host-module inputs that were quadratic, called directly, one wall time each\n  \
         bench documents     pdf.extractText and mammoth.extractRawText on 50-page files, beside pdf-parse and mammoth\n  \
         bench data          tokens.count and sqlite.query beside js-tiktoken and better-sqlite3; fabric.renderSVG beside the reference's renderer
  \
         bench worker        a trivial run through a sandbox worker: pooled, confined vs unconfined, in process
  \
         bench compile       cold compile of js-yaml, date-fns, marked (vs esbuild with NODETOOL_PEER_BENCH=<dir>); warm cache hit"
    );
    ExitCode::from(2)
}

fn export() -> Result<(), String> {
    let path = workspace_root().join(nodetool_protocol::MANIFEST_SCHEMA_PATH);
    let text = schema_text();
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {}", nodetool_protocol::MANIFEST_SCHEMA_PATH);
    let relative = nodetool_tests::contract::FIXTURES_JSON_PATH;
    let path = workspace_root().join(relative);
    let text = nodetool_tests::contract::fixtures_json()
        .map_err(|e| format!("cannot serialize the contract fixtures: {e}"))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {relative}");
    let relative = nodetool_tests::contract::relative::RELATIVE_JSON_PATH;
    let path = workspace_root().join(relative);
    let text = nodetool_tests::contract::relative::relative_json()
        .map_err(|e| format!("cannot serialize the relative-import cases: {e}"))?;
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {relative}");
    let relative = nodetool_tests::contract::specifiers::SPECIFIERS_JSON_PATH;
    let path = workspace_root().join(relative);
    let text = nodetool_tests::contract::specifiers::specifiers_json()
        .map_err(|e| format!("cannot serialize the specifier cases: {e}"))?;
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {relative}");
    let relative = nodetool_tests::contract::HOST_MODULES_JSON_PATH;
    let path = workspace_root().join(relative);
    let text = nodetool_tests::contract::host_modules_json()
        .map_err(|e| format!("cannot serialize the host-module registry: {e}"))?;
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {relative}");
    let relative = nodetool_cli::MAN_PAGE_PATH;
    let path = workspace_root().join(relative);
    std::fs::write(&path, nodetool_cli::man_page())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {relative}");
    Ok(())
}

/// Runs every guest contract fixture in this process: one line per failure (its name and
/// why), then exactly `N passed, M failed`. Returns whether none failed.
fn fixtures() -> bool {
    let fixtures = nodetool_tests::contract::fixtures();
    let outcomes = nodetool_tests::contract::run_all(&fixtures);
    let mut failed = 0;
    for (fixture, outcome) in &outcomes {
        if let Err(why) = outcome {
            failed += 1;
            println!("FAILED {}: {why}", fixture.name);
        }
    }
    println!("{} passed, {failed} failed", outcomes.len() - failed);
    failed == 0
}

/// The schema file's exact text: pretty JSON plus a final newline.
fn schema_text() -> String {
    let schema = nodetool_protocol::manifest_json_schema();
    format!(
        "{}\n",
        serde_json::to_string_pretty(&schema).unwrap_or_default()
    )
}

fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(workspace_root());
    command
}

fn run(what: &str, command: &mut Command) -> Result<(), String> {
    println!("xtask: {what}");
    let status = command
        .status()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// Crates that must never link an engine, and the engines they must not link.
const ENGINE_FREE: &[&str] = &[
    "nodetool-protocol",
    "nodetool-runtime",
    "nodetool-jssource",
    "nodetool-discovery",
    "nodetool-broker",
];
const ENGINES: &[&str] = &["rquickjs", "wasmtime", "rolldown"];

/// The front ends load Tesseract at run time; these crates would link it (and need its
/// development files, clang and pkg-config) at build time.
const FRONT_ENDS: &[&str] = &["nodetool-cli", "nodetool-server"];
const BUILD_TIME_OCR: &[&str] = &["leptonica-sys", "tesseract-sys", "tesseract-plumbing"];

/// The names of the packages `cargo tree -p <package> -e <edges>` lists.
fn tree(package: &str, edges: &str) -> Result<Vec<String>, String> {
    let output = cargo()
        .args([
            "tree", "--locked", "-e", edges, "--prefix", "none", "-p", package,
        ])
        .output()
        .map_err(|e| format!("cannot run cargo tree: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo tree -p {package} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

fn check_layering() -> Result<(), String> {
    for package in FRONT_ENDS {
        let linked: Vec<String> = tree(package, "normal,build")?
            .into_iter()
            .filter(|name| BUILD_TIME_OCR.contains(&name.as_str()))
            .collect();
        if !linked.is_empty() {
            return Err(format!(
                "{package} must load Tesseract at run time, but depends on {}",
                linked.join(", ")
            ));
        }
    }
    for package in ENGINE_FREE {
        let output = cargo()
            .args([
                "tree", "--locked", "-e", "normal", "--prefix", "none", "-p", package,
            ])
            .output()
            .map_err(|e| format!("cannot run cargo tree: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "cargo tree -p {package} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let tree = String::from_utf8_lossy(&output.stdout);
        let linked: Vec<&str> = tree
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|name| ENGINES.iter().any(|e| name.starts_with(e)))
            .collect();
        if !linked.is_empty() {
            return Err(format!(
                "{package} must not link an engine, but depends on {}",
                linked.join(", ")
            ));
        }
    }
    println!(
        "xtask: layering ok ({} link no engine; {} link no OCR library at build time)",
        ENGINE_FREE.join(", "),
        FRONT_ENDS.join(", ")
    );
    Ok(())
}

/// The Debian packages the tests need besides Rust: the README's list, which `.ci/run` installs.
const SYSTEM_PACKAGES: &[&str] = &[
    "nodejs",
    "npm",
    "tesseract-ocr",
    "fonts-dejavu-core",
    "chromium",
    "patch",
    "unzip",
    "zip",
    "python3-openpyxl",
    "poppler-utils",
    "python3-docx",
    "python3-pypdf",
    "python3-ebooklib",
    "python3-pip",
    "libreoffice-writer-nogui",
    "libreoffice-impress-nogui",
];

/// Checks what the tests need from the system, naming every missing piece at once, then
/// installs the npm libraries the shipped packs bundle and builds (and tests) the browser
/// runner, each from its committed lockfile with install scripts disabled.
fn prerequisites() -> Result<(), String> {
    let mut missing = Vec::new();
    let npm = Command::new("npm").arg("--version").output();
    if !npm.is_ok_and(|o| o.status.success()) {
        missing.push(
            "npm (Debian: nodejs npm): the shipped packs' npm libraries and the browser runner are installed with it".to_string(),
        );
    }
    if let Some(Err(why)) = nodetool_host_modules::library_status("ocr") {
        missing.push(format!("Tesseract for the OCR tests: {why}"));
    }
    let font = nodetool_tests::render::DEJAVU_SANS;
    if !Path::new(font).is_file() {
        missing.push(format!(
            "{font} (Debian: fonts-dejavu-core), the font the OCR tests draw their text in"
        ));
    }
    missing.extend(conformance::missing_tools());
    if nodetool_tests::chromium::find_chromium().is_none() {
        missing.push(
            "chromium (Debian: chromium), which the Packages page tests and `cargo xtask fixtures --browser` drive headless".to_string(),
        );
    }
    if !missing.is_empty() {
        return Err(format!(
            "the tests need what this machine lacks:\n  - {}\non Debian or Ubuntu: sudo apt-get install -y {} (`.ci/run` does this, then runs `cargo xtask ci`)",
            missing.join("\n  - "),
            SYSTEM_PACKAGES.join(" ")
        ));
    }
    guest_pack_dependencies()?;
    browser::build_web(&workspace_root())?;
    let web = workspace_root().join("web");
    run(
        "npm test --prefix web",
        Command::new("npm").args(["test", "--prefix"]).arg(&web),
    )
}

fn ci() -> Result<(), String> {
    prerequisites()?;
    run(
        "cargo fmt --check",
        cargo().args(["fmt", "--all", "--", "--check"]),
    )?;
    check_layering()?;
    let edges = layering::check(&workspace_root(), || {
        let output = cargo()
            .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
            .output()
            .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
        serde_json::from_slice(&output.stdout).map_err(|e| format!("cargo metadata: {e}"))
    })?;
    let unsafe_files = layering::check_unsafe(&workspace_root())?;
    println!(
        "xtask: ARCHITECTURE.md's crate table is the workspace's ({edges} edges), and it names all {unsafe_files} files with unsafe"
    );
    run(
        "cargo clippy",
        cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    // With HOME on a read-only directory and no XDG variable: no test writes outside its
    // temporary directories (isolation.rs).
    isolation::run_with_read_only_home(
        cargo().args(["test", "--workspace", "--locked"]),
        |command| run("cargo test (HOME read-only)", command),
    )?;
    println!("xtask: contract fixtures");
    if !fixtures() {
        return Err("contract fixtures failed".into());
    }
    println!("xtask: contract fixtures in the browser");
    if !browser::fixtures(&workspace_root())? {
        return Err("contract fixtures failed in the browser".into());
    }
    println!("xtask: host-module conformance");
    conformance::run(&workspace_root(), conformance::DEFAULT_CASES)
}

fn bench(area: &str) -> Result<(), String> {
    if area == "server" {
        return server_bench::run(&workspace_root(), cargo);
    }
    if area == "data" {
        // tokens and sqlite beside js-tiktoken and better-sqlite3 (benches/data.rs), then fabric
        // beside the reference's renderer (benches/fabric.rs), one run after the other.
        for bench in ["data", "fabric"] {
            let file = format!("host-modules/benches/{bench}.rs");
            if !workspace_root().join(&file).is_file() {
                println!("xtask: bench data: {file} does not exist yet; skipped");
                continue;
            }
            run(
                &format!("cargo bench -p nodetool-host-modules --bench {bench}"),
                cargo().args([
                    "bench",
                    "--locked",
                    "-p",
                    "nodetool-host-modules",
                    "--bench",
                    bench,
                ]),
            )?;
        }
        return Ok(());
    }
    let (package, bench) = match area {
        "discovery" => ("nodetool-discovery", "discovery"),
        "guest" => ("nodetool-guest", "guest"),
        "wasm" => ("nodetool-wasm-host", "wasm"),
        "host" => ("nodetool-host-modules", "host"),
        "html" => ("nodetool-host-modules", "html"),
        "hostile" => ("nodetool-host-modules", "hostile"),
        "documents" => ("nodetool-host-modules", "documents"),
        "compile" => ("nodetool-compiler", "compile"),
        "worker" => ("nodetool-frontend", "worker"),
        other => {
            return Err(format!(
                "unknown bench area {other:?} (known: discovery, guest, wasm, host, html, hostile, documents, data, compile, worker, server)"
            ));
        }
    };
    let mut command = cargo();
    command.args(["bench", "--locked", "-p", package, "--bench", bench]);
    if area == "guest" || area == "worker" {
        command.env("NODETOOL_BENCH_JS_YAML", js_yaml_bundle()?);
    }
    if area == "worker" {
        // The worker program is the release `nodetool`, built as the bench is.
        run(
            "cargo build --release -p nodetool-cli",
            cargo().args(["build", "--release", "--locked", "-p", "nodetool-cli"]),
        )?;
        command.env(
            "NODETOOL_BENCH_WORKER",
            workspace_root().join("target/release/nodetool"),
        );
    }
    if area == "compile" {
        guest_pack_dependencies()?;
    }
    run(&format!("cargo bench -p {package}"), &mut command)
}

/// The shipped guest packs' npm dependencies (`npm ci --ignore-scripts --prefix packs`, from the
/// committed lockfile), installed on first use.
fn guest_pack_dependencies() -> Result<(), String> {
    npm_ci(&workspace_root().join("packs"), "packs")?;
    // The reference libraries the host modules' interop tests compare with (js-tiktoken,
    // exifr, subtitle, expr-eval, ics), which `cargo test` needs before the conformance suite.
    npm_ci(&workspace_root().join("conformance"), "conformance")
}

/// `npm ci --ignore-scripts` in `dir` (named `label` in messages), from its committed
/// lockfile, unless its `node_modules` is already installed.
pub(crate) fn npm_ci(dir: &Path, label: &str) -> Result<(), String> {
    if dir.join("node_modules/.package-lock.json").is_file() {
        return Ok(());
    }
    let status = Command::new("npm")
        .args([
            "ci",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--prefix",
        ])
        .arg(dir)
        .status()
        .map_err(|e| format!("cannot run npm for {label} (Debian: nodejs npm): {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "npm ci --ignore-scripts --prefix {label} failed ({status})"
        ))
    }
}

/// The js-yaml ESM build the guest bench imports, installed from the npm registry into
/// `target/bench-npm` on first use (the version the reference stack's figures used).
fn js_yaml_bundle() -> Result<PathBuf, String> {
    let dir = workspace_root().join("target/bench-npm");
    let bundle = dir.join("node_modules/js-yaml/dist/js-yaml.mjs");
    if !bundle.is_file() {
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let status = Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--no-save",
                "--prefix",
            ])
            .arg(&dir)
            .arg("js-yaml@5.5.0")
            .status()
            .map_err(|e| format!("cannot run npm (needed for the js-yaml bench input): {e}"))?;
        if !status.success() || !bundle.is_file() {
            return Err(format!(
                "npm could not install js-yaml into {}",
                dir.display()
            ));
        }
    }
    Ok(bundle)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["ci"] => ci(),
        ["export"] => export(),
        // Not through `result`: the tally must stay the last line printed.
        ["fixtures"] => {
            return if fixtures() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
        ["fixtures", "--browser"] => {
            return match browser::fixtures(&workspace_root()) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("xtask: {e}");
                    ExitCode::FAILURE
                }
            };
        }
        ["bench", area] => bench(area),
        ["conformance"] => conformance::run(&workspace_root(), conformance::DEFAULT_CASES),
        ["conformance", "--cases", n] => match n.parse() {
            Ok(n) => conformance::run(&workspace_root(), n),
            Err(_) => return usage(),
        },
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}
