//! Compile-on-first-use: a shipped guest library pack a body imports is compiled when nothing
//! compiled it yet, so `nodetool run` and `POST /api/run` give the same answer for the same
//! body (the first one waits for the compile; every later one hits the cache).
//!
//! Only shipped packs are compiled this way: their npm libraries come from the project's own
//! lockfile. When those libraries are missing from the shipped root's `node_modules` (a fresh
//! machine: the packs were just written out of the binary), they are installed first
//! ([`install_missing_libraries`]): `npm ci --ignore-scripts` from the shipped root's committed
//! `package-lock.json`, so every library arrives at the name, version and integrity the lockfile
//! pins and no install script runs. npm works in a staging directory and its `node_modules` is
//! renamed into place, so a failed or concurrent install never leaves half a tree. When the
//! install fails nothing is compiled for those entries (a refusal cached now would outlive the
//! fix). An installed pack's npm entries are compiled when it is installed, or by
//! `nodetool packs compile`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodetool_compiler::{Cache, Compiler, NpmEntry, Report, Stage, npm_entries};
use nodetool_discovery::SearchRoot;
use nodetool_protocol::catalog::StatusCode;
use nodetool_runtime::SandboxModuleCatalog;

/// What a first-use compile tells its caller as it goes.
pub enum FirstUseEvent<'a> {
    /// `entry` starts compiling.
    Compiling(&'a NpmEntry),
    /// `entry` reached `stage`.
    Stage(&'a NpmEntry, Stage),
    /// `entry` finished with `report`, after `elapsed`.
    Done(&'a NpmEntry, &'a Report, Duration),
    /// The compiler could not be set up (its message).
    Failed(String),
}

/// The shipped npm entries among a body's `imports` that `catalog` reports as
/// `pending-compile`.
pub fn pending_entries(
    imports: &[nodetool_guest::BodyImport],
    catalog: &dyn SandboxModuleCatalog,
    roots: &[SearchRoot],
) -> Vec<NpmEntry> {
    let imported: BTreeSet<&str> = imports.iter().map(|i| i.specifier.as_str()).collect();
    let pending: BTreeSet<&str> = catalog
        .diagnostics()
        .iter()
        .filter(|s| s.code == StatusCode::PendingCompile)
        .filter_map(|s| s.specifier.as_deref())
        .filter(|s| imported.contains(s))
        .collect();
    if pending.is_empty() {
        return Vec::new();
    }
    npm_entries(roots)
        .into_iter()
        .filter(|e| e.shipped && pending.contains(e.specifier.as_str()))
        .collect()
}

/// Compiles `entries` into `cache`, telling `events` about each, after installing any npm
/// library they need with `npm` on `PATH` ([`compile_entries_with`], whose install progress
/// this drops; an install failure reaches `events` as [`FirstUseEvent::Failed`]). Returns
/// whether any outcome was stored (an admission or a refusal, which the catalog then names
/// instead of `pending-compile`), so the caller discovers again.
pub fn compile_entries(
    entries: &[NpmEntry],
    cache: &Cache,
    events: &mut dyn FnMut(FirstUseEvent<'_>),
) -> bool {
    compile_entries_with(entries, cache, Path::new("npm"), events, &mut |_| {})
}

/// [`compile_entries`] with the npm executable named and the install's progress reported.
pub fn compile_entries_with(
    entries: &[NpmEntry],
    cache: &Cache,
    npm: &Path,
    events: &mut dyn FnMut(FirstUseEvent<'_>),
    installs: &mut dyn FnMut(InstallEvent<'_>),
) -> bool {
    if entries.is_empty() {
        return false;
    }
    let entries: Vec<&NpmEntry> = match install_missing_libraries(entries, npm, installs) {
        Ok(()) => entries.iter().collect(),
        Err(e) => {
            events(FirstUseEvent::Failed(e));
            entries
                .iter()
                .filter(|e| missing_library(e).is_none())
                .collect()
        }
    };
    if entries.is_empty() {
        return false;
    }
    let compiler = match Compiler::new(cache.clone()) {
        Ok(c) => c,
        Err(e) => {
            events(FirstUseEvent::Failed(e));
            return false;
        }
    };
    let mut stored = false;
    for entry in entries {
        events(FirstUseEvent::Compiling(entry));
        let started = Instant::now();
        let report = compiler.compile(&entry.request(), &mut |stage| {
            events(FirstUseEvent::Stage(entry, stage));
        });
        events(FirstUseEvent::Done(entry, &report, started.elapsed()));
        stored |= report.store_error.is_none();
    }
    stored
}

/// What installing the shipped packs' npm libraries tells its caller as it goes.
pub enum InstallEvent<'a> {
    /// npm starts installing into `root` because `missing` are not there.
    Installing {
        root: &'a Path,
        missing: &'a [String],
    },
    /// A line npm printed.
    Npm(&'a str),
    /// The libraries landed in `root`, after `elapsed`.
    Installed { root: &'a Path, elapsed: Duration },
}

/// The shipped root an entry's pack lives in (its pack directory, up one level per segment of
/// the pack's name), when that is a shipped entry.
fn shipped_root_of(entry: &NpmEntry) -> Option<PathBuf> {
    if !entry.shipped {
        return None;
    }
    let levels = entry.pack_name.split('/').count();
    entry
        .pack_dir
        .ancestors()
        .nth(levels)
        .map(Path::to_path_buf)
}

/// Whether `entry` is a shipped pack's whose npm library is not installed in its shipped root
/// (so compiling it now would only be refused as unresolved).
pub fn library_missing(entry: &NpmEntry) -> bool {
    missing_library(entry).is_some()
}

/// The shipped root of `entry` when its npm library is not installed there.
fn missing_library(entry: &NpmEntry) -> Option<PathBuf> {
    let root = shipped_root_of(entry)?;
    let installed = root
        .join("node_modules")
        .join(&entry.npm)
        .join("package.json")
        .is_file();
    (!installed).then_some(root)
}

/// Installs the npm libraries the shipped `entries` need and their shipped root lacks, with
/// `npm ci --ignore-scripts` from that root's `package-lock.json` (see the module docs). Entries
/// of installed packs, and libraries already there, are left alone. The error names what failed
/// and what to do (npm missing: install Node.js and npm).
pub fn install_missing_libraries(
    entries: &[NpmEntry],
    npm: &Path,
    events: &mut dyn FnMut(InstallEvent<'_>),
) -> Result<(), String> {
    let mut by_root: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for entry in entries {
        if let Some(root) = missing_library(entry) {
            by_root.entry(root).or_default().insert(entry.npm.clone());
        }
    }
    for (root, missing) in by_root {
        let missing: Vec<String> = missing.into_iter().collect();
        install_into(&root, &missing, npm, events)?;
    }
    Ok(())
}

/// `npm ci --ignore-scripts` of `root`'s lockfile in a staging directory inside `root` (a dot
/// directory, which discovery skips), then its `node_modules` renamed into place.
fn install_into(
    root: &Path,
    missing: &[String],
    npm: &Path,
    events: &mut dyn FnMut(InstallEvent<'_>),
) -> Result<(), String> {
    let names = missing.join(", ");
    let manifest = std::fs::read(root.join("package.json")).ok();
    let lockfile = std::fs::read(root.join("package-lock.json")).ok();
    let (Some(manifest), Some(lockfile)) = (manifest, lockfile) else {
        return Err(format!(
            "the shipped packs in {} need {names} from npm, but that directory has no package.json and package-lock.json to install them from; install them into {}/node_modules yourself",
            root.display(),
            root.display()
        ));
    };
    let listed: BTreeSet<String> = serde_json::from_slice::<serde_json::Value>(&manifest)
        .ok()
        .and_then(|v| {
            v.get("dependencies")?
                .as_object()
                .map(|d| d.keys().cloned().collect())
        })
        .unwrap_or_default();
    if let Some(unlisted) = missing.iter().find(|m| !listed.contains(*m)) {
        return Err(format!(
            "{}/package.json does not list {unlisted}, which a shipped pack bundles; add it there (and to the lockfile) or install it into {}/node_modules yourself",
            root.display(),
            root.display()
        ));
    }
    events(InstallEvent::Installing { root, missing });
    let started = Instant::now();
    let node_modules = root.join("node_modules");
    let staging = crate::shipped::unique_sibling(&root.join("npm"), "staging")?;
    let result = (|| {
        for (name, bytes) in [
            ("package.json", &manifest),
            ("package-lock.json", &lockfile),
        ] {
            std::fs::write(staging.join(name), bytes)
                .map_err(|e| format!("cannot write {}: {e}", staging.join(name).display()))?;
        }
        run_npm_ci(npm, &staging, events)?;
        land(&staging.join("node_modules"), &node_modules, missing)
    })();
    let _ = std::fs::remove_dir_all(&staging);
    result?;
    events(InstallEvent::Installed {
        root,
        elapsed: started.elapsed(),
    });
    Ok(())
}

/// Runs `npm ci --ignore-scripts` in `dir`, its output lines to `events`.
fn run_npm_ci(
    npm: &Path,
    dir: &Path,
    events: &mut dyn FnMut(InstallEvent<'_>),
) -> Result<(), String> {
    let mut child = Command::new(npm)
        .args([
            "ci",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--update-notifier=false",
        ])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!(
                    "{} was not found on PATH, and the shipped packs' npm libraries are installed with it: install Node.js and npm (Debian: apt-get install npm), or name another npm with NODETOOL_NPM",
                    npm.display()
                )
            } else {
                format!("cannot start {} ci: {e}", npm.display())
            }
        })?;
    // stderr is drained on its own thread so neither pipe can fill and stall npm.
    let stderr = child.stderr.take();
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut s) = stderr {
            let _ = s.read_to_string(&mut text);
        }
        text
    });
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if !line.trim().is_empty() {
                events(InstallEvent::Npm(&line));
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("{} ci: {e}", npm.display()))?;
    let errors = errors.join().unwrap_or_default();
    for line in errors.lines().filter(|l| !l.trim().is_empty()) {
        events(InstallEvent::Npm(line));
    }
    if status.success() {
        return Ok(());
    }
    Err(format!(
        "npm ci --ignore-scripts failed ({status}) installing the shipped packs' npm libraries: {}",
        crate::install::npm_summary(&errors)
    ))
}

/// Moves the freshly installed `new` to `target`. When `target` exists: kept if it now has
/// every library in `missing` (another process installed them meanwhile), else replaced.
fn land(new: &Path, target: &Path, missing: &[String]) -> Result<(), String> {
    let moved = |from: &Path, to: &Path| {
        std::fs::rename(from, to)
            .map_err(|e| format!("cannot move {} to {}: {e}", from.display(), to.display()))
    };
    if !new.is_dir() {
        return Err(format!(
            "npm ci reported success but wrote no {}",
            new.display()
        ));
    }
    if !target.exists() {
        return moved(new, target).or_else(|e| if target.is_dir() { Ok(()) } else { Err(e) });
    }
    let complete = missing
        .iter()
        .all(|m| target.join(m).join("package.json").is_file());
    if complete {
        return Ok(());
    }
    // An older or partial tree: set it aside, put the new one in, remove the old one.
    let old = crate::shipped::unique_sibling(target, "old")?;
    moved(target, &old)?;
    let landed = moved(new, target);
    if landed.is_err() {
        let _ = std::fs::rename(&old, target);
    } else {
        let _ = std::fs::remove_dir_all(&old);
    }
    landed
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodetool_discovery::{RootKind, SearchRoot};

    /// A shipped root written out of the binary (no `node_modules`), its yaml entry, and a
    /// directory for stand-in npm executables.
    struct Fixture {
        tmp: tempfile::TempDir,
        root: PathBuf,
    }

    impl Fixture {
        fn new() -> Fixture {
            let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
            let root = crate::shipped::root_in(tmp.path());
            crate::shipped::materialize(&root).unwrap_or_else(|e| panic!("{e}"));
            Fixture { tmp, root }
        }

        fn yaml(&self) -> Vec<NpmEntry> {
            let roots = [SearchRoot {
                path: self.root.clone(),
                kind: RootKind::Shipped,
                label: "shipped packs".into(),
            }];
            let entries: Vec<NpmEntry> = npm_entries(&roots)
                .into_iter()
                .filter(|e| e.npm == "js-yaml")
                .collect();
            assert_eq!(entries.len(), 1, "{entries:?}");
            entries
        }

        /// A stand-in npm running `body` (a shell script) in the directory it is started in.
        fn npm(&self, body: &str) -> PathBuf {
            let path = self.tmp.path().join(format!("npm-{}", body.len()));
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))
                .unwrap_or_else(|e| panic!("write npm: {e}"));
            let mut permissions = std::fs::metadata(&path)
                .unwrap_or_else(|e| panic!("stat npm: {e}"))
                .permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
            std::fs::set_permissions(&path, permissions)
                .unwrap_or_else(|e| panic!("chmod npm: {e}"));
            path
        }

        /// The dot directories left in the root (staging must not outlive an install).
        fn leftovers(&self) -> Vec<String> {
            std::fs::read_dir(&self.root)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n.starts_with('.'))
                        .collect()
                })
                .unwrap_or_default()
        }
    }

    /// Installs what `npm ci --ignore-scripts` of the shipped lockfile would: checks the
    /// arguments and that the lockfile is the shipped one, then writes js-yaml.
    const GOOD_NPM: &str = r#"[ "$1" = ci ] || exit 64
case " $* " in *" --ignore-scripts "*) ;; *) echo 'npm error scripts' >&2; exit 65;; esac
grep -q '"js-yaml"' package-lock.json || exit 66
mkdir -p node_modules/js-yaml && echo '{"name":"js-yaml"}' > node_modules/js-yaml/package.json
echo 'added 1 package'"#;

    #[test]
    fn missing_libraries_are_installed_from_the_lockfile_and_land_whole() {
        let fixture = Fixture::new();
        let entries = fixture.yaml();
        assert!(library_missing(&entries[0]));
        let npm = fixture.npm(GOOD_NPM);
        let mut said = Vec::new();
        let result = install_missing_libraries(&entries, &npm, &mut |event| match event {
            InstallEvent::Installing { root, missing } => {
                said.push(format!(
                    "installing {} into {}",
                    missing.join(","),
                    root.display()
                ));
            }
            InstallEvent::Npm(line) => said.push(format!("npm: {line}")),
            InstallEvent::Installed { .. } => said.push("installed".into()),
        });
        assert_eq!(result, Ok(()));
        assert_eq!(
            said,
            [
                format!("installing js-yaml into {}", fixture.root.display()),
                "npm: added 1 package".into(),
                "installed".into(),
            ]
        );
        assert!(!library_missing(&entries[0]));
        assert_eq!(fixture.leftovers(), Vec::<String>::new());
        // Present now: nothing runs again (this npm would fail).
        let failing = fixture.npm("exit 1");
        assert_eq!(
            install_missing_libraries(&entries, &failing, &mut |_| {}),
            Ok(())
        );
    }

    #[test]
    fn without_npm_the_error_names_it_and_nothing_is_compiled() {
        let fixture = Fixture::new();
        let entries = fixture.yaml();
        let missing = fixture.tmp.path().join("no-such-npm");
        let error = install_missing_libraries(&entries, &missing, &mut |_| {})
            .err()
            .unwrap_or_default();
        assert_eq!(
            error,
            format!(
                "{} was not found on PATH, and the shipped packs' npm libraries are installed with it: install Node.js and npm (Debian: apt-get install npm), or name another npm with NODETOOL_NPM",
                missing.display()
            )
        );
        assert!(!fixture.root.join("node_modules").exists());
        assert_eq!(fixture.leftovers(), Vec::<String>::new());
        // The first-use compile reports it and stores nothing (a refusal cached now would
        // outlive the fix).
        let cache = Cache::new(fixture.tmp.path().join("cache"));
        let mut failures = Vec::new();
        let stored = compile_entries_with(
            &entries,
            &cache,
            &missing,
            &mut |event| {
                if let FirstUseEvent::Failed(e) = event {
                    failures.push(e);
                }
            },
            &mut |_| {},
        );
        assert!(!stored);
        assert_eq!(failures, [error]);
    }

    #[test]
    fn a_failed_npm_leaves_nothing_behind_and_says_why() {
        let fixture = Fixture::new();
        let entries = fixture.yaml();
        let npm = fixture.npm(
            "mkdir -p node_modules/half\necho 'npm error code E404' >&2\necho 'npm error 404 Not Found - GET https://registry.npmjs.org/js-yaml' >&2\nexit 1",
        );
        let error = install_missing_libraries(&entries, &npm, &mut |_| {})
            .err()
            .unwrap_or_default();
        assert!(
            error.starts_with("npm ci --ignore-scripts failed (exit status: 1) installing the shipped packs' npm libraries: the registry has no such package or version; "),
            "{error}"
        );
        assert!(!fixture.root.join("node_modules").exists());
        assert_eq!(fixture.leftovers(), Vec::<String>::new());
    }
}
