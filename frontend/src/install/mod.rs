//! Installing packs without running their code, and trusting them later against the exact
//! artifact on disk.
//!
//! The installed root is an npm project (`$XDG_DATA_HOME/nodetool/packs`: `package.json`,
//! `package-lock.json`, `node_modules/`, and the install ledger `nodetool-packs.json`).
//!
//! - [`Installer::install`] runs `npm install --ignore-scripts` (always: neither the pack's nor
//!   any dependency's lifecycle scripts run), classifies the pack from the installed
//!   `package.json`, and records its mode and the lockfile identity of its whole dependency
//!   closure in the ledger. A sandbox-only pack is active at once; the others are recorded
//!   inactive.
//! - [`Installer::trust`] re-classifies from disk (refusing if the mode moved), compares the
//!   recorded closure with the lockfile package by package (refusing on any difference, naming
//!   it), and only then runs `npm rebuild <pack> <closure...>` with scripts enabled, against the
//!   files already on disk: nothing is fetched again.
//! - [`Installer::uninstall`] removes a pack and its row.
//!
//! A local tarball or directory may not take a name reserved for NodeTool's own packs
//! ([`nodetool_protocol::names::is_reserved_package_name`]: the `@nodetool-ai` scope) unless the
//! caller passes [`ReservedNames::Allow`] (`--allow-reserved-name`); otherwise a file anyone can
//! write would shadow a shipped pack. A registry install of such a name comes from the scope's
//! publisher. Either way consent given to the shipped pack does not carry over ([`consent`]).
//!
//! Every change is made in a staging copy of the root, with the new ledger written inside it,
//! and lands by two renames; a failure anywhere before that leaves the root and the ledger as
//! they were. Local directories are packed first (`npm pack --ignore-scripts`), so what is
//! installed is a snapshot with an integrity, never a link to a live directory. Messages here
//! are for the local operator and may name local paths; none reaches guest code.

pub mod codes;
pub mod consent;
pub mod ledger;
pub mod lockfile;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nodetool_protocol::hex::sha256_hex;
use serde_json::Value;

pub use codes::InstallErrorCode;
pub use ledger::{Ledger, Mode, Record, Scripts, classify};
pub use lockfile::LockedPackage;

/// A failed install, trust or uninstall: a stable code (declared in [`codes`]) and a message
/// naming the pack, the file or the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallError {
    /// The code (`--json` output renders its stable name, [`InstallErrorCode::as_str`]).
    pub code: InstallErrorCode,
    pub message: String,
}

impl InstallError {
    /// An error with `code` and `message`.
    pub fn new(code: InstallErrorCode, message: impl Into<String>) -> InstallError {
        InstallError {
            code,
            message: message.into(),
        }
    }

    /// The code.
    pub fn kind(&self) -> InstallErrorCode {
        self.code
    }
}

impl std::fmt::Display for InstallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} [{}]", self.message, self.code)
    }
}

/// Whether a local tarball or directory may take a name reserved for NodeTool's own packs.
/// There is no default: the caller says which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservedNames {
    /// Refuse it (`install-reserved-name`).
    Refuse,
    /// Install it: the operator passed `--allow-reserved-name`.
    Allow,
}

/// What the user asked to install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    /// A registry name with an optional version or range: `name`, `@scope/name@^1.2`.
    Registry { name: String, spec: String },
    /// A local `.tgz` made by `npm pack`.
    Tarball(PathBuf),
    /// A local package directory.
    Directory(PathBuf),
}

impl std::fmt::Display for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Spec::Registry { spec, .. } => f.write_str(spec),
            Spec::Tarball(path) | Spec::Directory(path) => write!(f, "{}", path.display()),
        }
    }
}

impl Spec {
    /// Reads a spec: an existing path is a tarball or a directory; anything that looks like a
    /// path but is not there is an error; otherwise a registry name with an optional version.
    pub fn parse(text: &str) -> Result<Spec, InstallError> {
        let path = Path::new(text);
        let looks_like_path = text.starts_with('.')
            || text.starts_with('/')
            || text.ends_with(".tgz")
            || text.ends_with(".tar.gz")
            || text.starts_with("file:");
        if path.is_dir() {
            return Ok(Spec::Directory(path.to_path_buf()));
        }
        if path.is_file() {
            return Ok(Spec::Tarball(path.to_path_buf()));
        }
        if looks_like_path {
            return Err(InstallError::new(
                InstallErrorCode::SpecInvalid,
                format!("{text}: no such tarball or directory"),
            ));
        }
        let (name, version) = match text.strip_prefix('@') {
            Some(rest) => match rest.split_once('@') {
                Some((n, v)) => (format!("@{n}"), Some(v)),
                None => (text.to_string(), None),
            },
            None => match text.split_once('@') {
                Some((n, v)) => (n.to_string(), Some(v)),
                None => (text.to_string(), None),
            },
        };
        let version_ok = version.is_none_or(|v| {
            !v.is_empty()
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b" .-+^~<>=*|_".contains(&b))
        });
        if nodetool_protocol::names::check_package_name(&name).is_err() || !version_ok {
            return Err(InstallError::new(
                InstallErrorCode::SpecInvalid,
                format!(
                    "{text}: not a registry package name (with an optional @version), a local tarball or a directory"
                ),
            ));
        }
        Ok(Spec::Registry {
            name,
            spec: text.to_string(),
        })
    }
}

/// What an install did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub record: Record,
    /// The record this install replaced, if the pack was installed before.
    pub previous: Option<Record>,
}

/// The installed root and the npm that works on it.
#[derive(Debug, Clone)]
pub struct Installer {
    /// `$XDG_DATA_HOME/nodetool/packs`.
    pub dir: PathBuf,
    /// The npm executable (`npm` on `PATH` unless the front end names another).
    pub npm: PathBuf,
}

const ROOT_MANIFEST: &str = "{\n  \"name\": \"nodetool-installed-packs\",\n  \"private\": true,\n  \"description\": \"Packs installed by nodetool packs install. Managed by nodetool; edit with care.\"\n}\n";

impl Installer {
    pub fn new(dir: PathBuf) -> Installer {
        Installer {
            dir,
            npm: PathBuf::from("npm"),
        }
    }

    /// The ledger's path.
    pub fn ledger_path(&self) -> PathBuf {
        self.dir.join("nodetool-packs.json")
    }

    /// The installed root discovery searches.
    pub fn node_modules(&self) -> PathBuf {
        self.dir.join("node_modules")
    }

    /// The ledger as it is now.
    pub fn ledger(&self) -> Result<Ledger, InstallError> {
        Ledger::read(&self.ledger_path())
            .map_err(|m| InstallError::new(InstallErrorCode::LedgerCorrupt, m))
    }

    /// Installs `spec` with scripts disabled and records it. `log` receives npm's output lines.
    /// A local tarball or directory whose package takes a reserved name is refused unless
    /// `reserved` is [`ReservedNames::Allow`]; the refusal is found in the staging copy, so
    /// nothing lands.
    pub fn install(
        &self,
        spec: &Spec,
        reserved: ReservedNames,
        log: &mut dyn FnMut(&str),
    ) -> Result<Installed, InstallError> {
        let ledger = self.ledger()?;
        let stage = Stage::begin(&self.dir)?;
        let result = self.install_in(&stage, ledger, spec, reserved, log);
        match result {
            Ok(installed) => {
                stage.commit()?;
                Ok(installed)
            }
            Err(e) => {
                stage.abandon();
                Err(e)
            }
        }
    }

    fn install_in(
        &self,
        stage: &Stage,
        mut ledger: Ledger,
        spec: &Spec,
        reserved: ReservedNames,
        log: &mut dyn FnMut(&str),
    ) -> Result<Installed, InstallError> {
        let root = stage.path();
        // A local directory is packed (scripts disabled) and a local tarball copied into the
        // root, so the installed artifact has a lockfile integrity and outlives its source.
        let (npm_spec, shown) = match spec {
            Spec::Registry { spec, .. } => (spec.clone(), spec.clone()),
            Spec::Tarball(path) => {
                let file = self.keep_tarball(root, path)?;
                (format!("./tarballs/{file}"), path.display().to_string())
            }
            Spec::Directory(dir) => {
                let file = self.pack_directory(root, dir, log)?;
                (format!("./tarballs/{file}"), dir.display().to_string())
            }
        };
        let before = read_json(&root.join("package.json"))?;
        self.npm(
            root,
            &[
                "install",
                "--ignore-scripts",
                "--save",
                "--no-audit",
                "--no-fund",
                "--prefix",
                &root.to_string_lossy(),
                &npm_spec,
            ],
            log,
        )?;
        let after = read_json(&root.join("package.json"))?;
        let name = match spec {
            Spec::Registry { name, .. } => name.clone(),
            _ => installed_name(&before, &after, &npm_spec).ok_or_else(|| {
                InstallError::new(
                    InstallErrorCode::NpmFailed,
                    format!("npm installed {shown}, but the root package.json does not name it"),
                )
            })?,
        };
        if !matches!(spec, Spec::Registry { .. })
            && reserved == ReservedNames::Refuse
            && nodetool_protocol::names::is_reserved_package_name(&name)
        {
            return Err(reserved_name_refused(&name, &shown));
        }
        let manifest_path = root.join("node_modules").join(&name).join("package.json");
        let manifest = read_json(&manifest_path)?;
        let mode = classify(&manifest);
        let version = manifest
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let closure = self.closure_in(root, &name)?;
        let record = Record {
            pack_name: name.clone(),
            version,
            spec: shown,
            mode,
            active: mode == Mode::SandboxOnly,
            scripts: Scripts::Skipped,
            closure,
        };
        let previous = ledger.packs.insert(name, record.clone());
        ledger.version = 1;
        ledger
            .write(&root.join("nodetool-packs.json"))
            .map_err(|m| InstallError::new(InstallErrorCode::Io, m))?;
        Ok(Installed { record, previous })
    }

    fn keep_tarball(&self, root: &Path, path: &Path) -> Result<String, InstallError> {
        let tarballs = root.join("tarballs");
        std::fs::create_dir_all(&tarballs).map_err(|e| io("create", &tarballs, &e))?;
        let bytes = std::fs::read(path).map_err(|e| io("read", path, &e))?;
        let digest = sha256_hex(&bytes);
        let stem = path
            .file_name()
            .and_then(|f| f.to_str())
            .map(|f| f.trim_end_matches(".tgz").trim_end_matches(".tar.gz"))
            .filter(|f| !f.is_empty())
            .unwrap_or("pack");
        let safe: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-._".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let file = format!("{safe}-{}.tgz", &digest[..12]);
        std::fs::write(tarballs.join(&file), bytes).map_err(|e| io("write", &tarballs, &e))?;
        Ok(file)
    }

    fn pack_directory(
        &self,
        root: &Path,
        dir: &Path,
        log: &mut dyn FnMut(&str),
    ) -> Result<String, InstallError> {
        let scratch = root.join(".pack-scratch");
        std::fs::create_dir_all(&scratch).map_err(|e| io("create", &scratch, &e))?;
        self.npm(
            dir,
            &[
                "pack",
                "--ignore-scripts",
                "--pack-destination",
                &scratch.to_string_lossy(),
            ],
            log,
        )?;
        let packed = std::fs::read_dir(&scratch)
            .map_err(|e| io("read", &scratch, &e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "tgz"))
            .ok_or_else(|| {
                InstallError::new(
                    InstallErrorCode::NpmFailed,
                    format!("npm pack {} produced no tarball", dir.display()),
                )
            })?;
        let file = self.keep_tarball(root, &packed)?;
        let _ = std::fs::remove_dir_all(&scratch);
        Ok(file)
    }

    fn closure_in(&self, root: &Path, name: &str) -> Result<Vec<LockedPackage>, InstallError> {
        let path = root.join("package-lock.json");
        let lock = read_json(&path)?;
        lockfile::closure(&lock, name).map_err(|m| {
            InstallError::new(
                InstallErrorCode::LockfileInvalid,
                format!("{}: {m}", path.display()),
            )
        })
    }

    /// Runs the pack's and its closure's lifecycle scripts against the files on disk, after
    /// proving they are the ones installed.
    pub fn trust(&self, name: &str, log: &mut dyn FnMut(&str)) -> Result<Record, InstallError> {
        let mut ledger = self.ledger()?;
        let record = ledger.packs.get(name).cloned().ok_or_else(|| {
            InstallError::new(
                InstallErrorCode::NotInstalled,
                format!("{name} was not installed by nodetool packs install"),
            )
        })?;
        let manifest = read_json(&self.node_modules().join(name).join("package.json"))?;
        let mode = classify(&manifest);
        if mode != record.mode {
            return Err(InstallError::new(
                InstallErrorCode::TrustModeMoved,
                format!(
                    "trust refused: {name} was installed as {} but its package.json on disk now reads as {}; reinstall it to classify it again",
                    record.mode.as_str(),
                    mode.as_str()
                ),
            ));
        }
        match mode {
            Mode::Unknown => {
                return Err(InstallError::new(
                    InstallErrorCode::TrustRefusedUnknown,
                    format!(
                        "trust refused: {name} declares nothing NodeTool can use (mode unknown); an unknown pack can never be trusted"
                    ),
                ));
            }
            Mode::SandboxOnly => {
                return Err(InstallError::new(
                    InstallErrorCode::TrustRefusedSandboxOnly,
                    format!(
                        "trust refused: {name} is sandbox-only; it runs no host code and has no scripts to run, and it is already active"
                    ),
                ));
            }
            Mode::Register | Mode::Hybrid => {}
        }
        let on_disk = manifest.get("version").and_then(Value::as_str);
        if on_disk != Some(record.version.as_str()) {
            return Err(InstallError::new(
                InstallErrorCode::TrustIntegrityMismatch,
                format!(
                    "trust refused: {name} was installed at version {} but the package on disk is version {}",
                    record.version,
                    on_disk.unwrap_or("(none)")
                ),
            ));
        }
        let current = self.closure_in(&self.dir, name)?;
        let differences = lockfile::differences(&record.closure, &current);
        if !differences.is_empty() {
            return Err(InstallError::new(
                InstallErrorCode::TrustIntegrityMismatch,
                format!(
                    "trust refused: the lockfile no longer matches what was installed for {name}, so nothing ran:\n  {}",
                    differences.join("\n  ")
                ),
            ));
        }
        let mut args: Vec<String> = [
            "rebuild",
            "--ignore-scripts=false",
            "--foreground-scripts",
            "--prefix",
        ]
        .map(String::from)
        .into();
        args.push(self.dir.to_string_lossy().into_owned());
        let mut names: Vec<String> = record.closure.iter().map(|p| p.name.clone()).collect();
        names.sort();
        names.dedup();
        args.extend(names);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.npm(&self.dir, &args, log).map_err(|e| {
            InstallError::new(
                InstallErrorCode::TrustRebuildFailed,
                format!(
                    "{}\n(some of {name}'s scripts may have run; the pack stays inactive)",
                    e.message
                ),
            )
        })?;
        let mut trusted = record;
        trusted.scripts = Scripts::Ran;
        trusted.active = true;
        ledger.packs.insert(name.to_string(), trusted.clone());
        ledger
            .write(&self.ledger_path())
            .map_err(|m| InstallError::new(InstallErrorCode::Io, m))?;
        Ok(trusted)
    }

    /// Removes a pack this tool installed, and its ledger row.
    pub fn uninstall(&self, name: &str, log: &mut dyn FnMut(&str)) -> Result<Record, InstallError> {
        let mut ledger = self.ledger()?;
        let record = ledger.packs.remove(name).ok_or_else(|| {
            InstallError::new(
                InstallErrorCode::NotInstalled,
                format!("{name} was not installed by nodetool packs install"),
            )
        })?;
        let stage = Stage::begin(&self.dir)?;
        let root = stage.path().to_path_buf();
        let result = self
            .npm(
                &root,
                &[
                    "uninstall",
                    "--ignore-scripts",
                    "--save",
                    "--no-audit",
                    "--no-fund",
                    "--prefix",
                    &root.to_string_lossy(),
                    name,
                ],
                log,
            )
            .and_then(|()| {
                ledger
                    .write(&root.join("nodetool-packs.json"))
                    .map_err(|m| InstallError::new(InstallErrorCode::Io, m))
            });
        match result {
            Ok(()) => {
                stage.commit()?;
                Ok(record)
            }
            Err(e) => {
                stage.abandon();
                Err(e)
            }
        }
    }

    /// Runs npm in `dir`; its output lines go to `log`; a failure carries npm's last lines.
    fn npm(
        &self,
        dir: &Path,
        args: &[&str],
        log: &mut dyn FnMut(&str),
    ) -> Result<(), InstallError> {
        let shown = format!("npm {}", args.first().copied().unwrap_or_default());
        let mut child = Command::new(&self.npm)
            .args(args)
            .arg("--update-notifier=false")
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    InstallError::new(
                        InstallErrorCode::NpmMissing,
                        format!(
                            "{} was not found on PATH; install Node.js and npm",
                            self.npm.display()
                        ),
                    )
                } else {
                    InstallError::new(
                        InstallErrorCode::NpmFailed,
                        format!("cannot start {shown}: {e}"),
                    )
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
                    log(&line);
                }
            }
        }
        let status = child
            .wait()
            .map_err(|e| InstallError::new(InstallErrorCode::NpmFailed, format!("{shown}: {e}")))?;
        let errors = errors.join().unwrap_or_default();
        for line in errors.lines().filter(|l| !l.trim().is_empty()) {
            log(line);
        }
        if status.success() {
            return Ok(());
        }
        Err(InstallError::new(
            InstallErrorCode::NpmFailed,
            format!("{shown} failed ({status}): {}", npm_summary(&errors)),
        ))
    }
}

/// The refusal of a local tarball or directory that takes a reserved name.
fn reserved_name_refused(name: &str, shown: &str) -> InstallError {
    InstallError::new(
        InstallErrorCode::ReservedName,
        format!(
            "{shown} is the package {name}, a name reserved for NodeTool's own packs ({}/...); a local tarball or directory may not take it, so nothing was installed\nhelp: if you mean to replace NodeTool's pack of that name with this one, pass --allow-reserved-name (it is then used instead of the shipped pack, `packs list` says so, and consent given to the shipped pack does not carry over)",
            nodetool_protocol::names::FIRST_PARTY_SCOPE
        ),
    )
}

/// The lines of npm's error output that say what went wrong, without its stack traces, object
/// dumps and log pointer; with a plain word for the network failures people meet most.
pub(crate) fn npm_summary(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .filter_map(|l| {
            l.strip_prefix("npm error")
                .or_else(|| l.strip_prefix("npm ERR!"))
        })
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("at ")
                && !l.starts_with('}')
                && !l.ends_with('{')
                && !l.starts_with("A complete log")
                && !l.starts_with("syscall ")
                && !l.starts_with("errno ")
                && !(l.contains(": ") && l.ends_with(',') || l.ends_with('\''))
        })
        .collect();
    let code = lines
        .iter()
        .find_map(|l| l.strip_prefix("code "))
        .unwrap_or_default();
    let hint = match code {
        "ECONNREFUSED" | "ENOTFOUND" | "ETIMEDOUT" | "EAI_AGAIN" | "ECONNRESET" => {
            "the npm registry is unreachable; "
        }
        "E404" => "the registry has no such package or version; ",
        _ => "",
    };
    let said: Vec<&str> = lines
        .iter()
        .filter(|l| !l.starts_with("code "))
        .take(4)
        .copied()
        .collect();
    match (said.is_empty(), code.is_empty()) {
        (true, true) => "npm printed no error".into(),
        (true, false) => format!("{hint}npm error {code}"),
        (false, _) => format!("{hint}{}", said.join("; ")),
    }
}

/// The dependency npm just added: the key of the root manifest whose spec is `npm_spec`, else
/// the one key that is new or changed.
fn installed_name(before: &Value, after: &Value, npm_spec: &str) -> Option<String> {
    let deps = |v: &Value| v.get("dependencies").and_then(Value::as_object).cloned();
    let after = deps(after)?;
    let wanted = npm_spec.trim_start_matches("./");
    if let Some((name, _)) = after.iter().find(|(_, v)| {
        v.as_str()
            .is_some_and(|s| s.trim_start_matches("file:").trim_start_matches("./") == wanted)
    }) {
        return Some(name.clone());
    }
    let before = deps(before).unwrap_or_default();
    let changed: Vec<&String> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .map(|(k, _)| k)
        .collect();
    match changed.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

fn read_json(path: &Path) -> Result<Value, InstallError> {
    let text = std::fs::read_to_string(path).map_err(|e| io("read", path, &e))?;
    serde_json::from_str(&text).map_err(|e| {
        InstallError::new(
            InstallErrorCode::Io,
            format!("{}: is not valid JSON ({e})", path.display()),
        )
    })
}

fn io(what: &str, path: &Path, e: &std::io::Error) -> InstallError {
    InstallError::new(
        InstallErrorCode::Io,
        format!("cannot {what} {}: {e}", path.display()),
    )
}

/// A staging copy of the installed root. Changes are made in it; [`Stage::commit`] swaps it in
/// with two renames, [`Stage::abandon`] removes it.
struct Stage {
    root: PathBuf,
    staging: PathBuf,
}

impl Stage {
    fn begin(root: &Path) -> Result<Stage, InstallError> {
        let parent = root.parent().ok_or_else(|| {
            InstallError::new(
                InstallErrorCode::Io,
                format!("{} has no parent", root.display()),
            )
        })?;
        std::fs::create_dir_all(parent).map_err(|e| io("create", parent, &e))?;
        let staging = parent.join(".packs-staging");
        // The staging directory doubles as the lock: a second install waits for no one.
        match std::fs::create_dir(&staging) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(InstallError::new(
                    InstallErrorCode::Busy,
                    format!(
                        "another install is in progress ({} exists; remove it if no nodetool is running)",
                        staging.display()
                    ),
                ));
            }
            Err(e) => return Err(io("create", &staging, &e)),
        }
        let stage = Stage {
            root: root.to_path_buf(),
            staging,
        };
        let copied = if root.is_dir() {
            copy_tree(root, &stage.staging)
        } else {
            Ok(())
        };
        let manifest = stage.staging.join("package.json");
        let seeded = copied.and_then(|()| {
            if manifest.is_file() {
                Ok(())
            } else {
                std::fs::write(&manifest, ROOT_MANIFEST).map_err(|e| io("write", &manifest, &e))
            }
        });
        if let Err(e) = seeded {
            stage.abandon();
            return Err(e);
        }
        Ok(stage)
    }

    fn path(&self) -> &Path {
        &self.staging
    }

    fn commit(self) -> Result<(), InstallError> {
        let old = self.staging.with_file_name(".packs-previous");
        let _ = std::fs::remove_dir_all(&old);
        let had_root = self.root.exists();
        if had_root && let Err(e) = std::fs::rename(&self.root, &old) {
            self.abandon();
            return Err(io("move aside", &self.root, &e));
        }
        if let Err(e) = std::fs::rename(&self.staging, &self.root) {
            if had_root {
                let _ = std::fs::rename(&old, &self.root);
            }
            self.abandon();
            return Err(io("replace", &self.root, &e));
        }
        let _ = std::fs::remove_dir_all(&old);
        Ok(())
    }

    fn abandon(&self) {
        let _ = std::fs::remove_dir_all(&self.staging);
    }
}

/// Copies a directory tree, recreating symbolic links as links (npm's `.bin` entries).
fn copy_tree(from: &Path, to: &Path) -> Result<(), InstallError> {
    std::fs::create_dir_all(to).map_err(|e| io("create", to, &e))?;
    for entry in std::fs::read_dir(from).map_err(|e| io("read", from, &e))? {
        let entry = entry.map_err(|e| io("read", from, &e))?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| io("read", &source, &e))?;
        if kind.is_symlink() {
            let link = std::fs::read_link(&source).map_err(|e| io("read", &source, &e))?;
            symlink(&link, &target)?;
        } else if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else {
            std::fs::copy(&source, &target).map_err(|e| io("copy", &source, &e))?;
        }
    }
    Ok(())
}

#[cfg(unix)]
fn symlink(link: &Path, target: &Path) -> Result<(), InstallError> {
    std::os::unix::fs::symlink(link, target).map_err(|e| io("link", target, &e))
}

#[cfg(not(unix))]
fn symlink(_link: &Path, target: &Path) -> Result<(), InstallError> {
    Err(InstallError::new(
        InstallErrorCode::Io,
        format!(
            "{}: symbolic links are only copied on Unix",
            target.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_registry_names_tarballs_or_directories() {
        let registry = |t: &str| match Spec::parse(t) {
            Ok(Spec::Registry { name, .. }) => name,
            other => panic!("{t}: {other:?}"),
        };
        assert_eq!(registry("js-yaml"), "js-yaml");
        assert_eq!(registry("js-yaml@4.1.0"), "js-yaml");
        assert_eq!(registry("@acme/geo@^1.2"), "@acme/geo");
        assert_eq!(registry("@acme/geo"), "@acme/geo");
        // A legacy name with capitals exists on the registry (`JSONStream`), so it installs, as
        // npm installs it; a new pack cannot take one (`protocol::names::check_new_package_name`).
        assert_eq!(registry("JSONStream"), "JSONStream");
        for bad in [
            ".hidden",
            "@acme",
            "a b",
            "git+https://x/y.git",
            "https://x/y.tgz",
            "./missing.tgz",
            "/nope/dir",
            "x@",
            "x@$(rm)",
            "",
        ] {
            assert!(Spec::parse(bad).is_err(), "{bad} was accepted");
        }
        let dir = tempfile::tempdir().ok();
        if let Some(dir) = dir {
            let tgz = dir.path().join("p.tgz");
            let _ = std::fs::write(&tgz, b"x");
            assert_eq!(Spec::parse(&tgz.to_string_lossy()), Ok(Spec::Tarball(tgz)));
            assert_eq!(
                Spec::parse(&dir.path().to_string_lossy()),
                Ok(Spec::Directory(dir.path().to_path_buf()))
            );
        }
    }

    #[test]
    fn npm_errors_are_summarized_without_stack_traces() {
        let stderr = "npm error code ECONNREFUSED\nnpm error syscall connect\nnpm error errno ECONNREFUSED\nnpm error FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED 127.0.0.1:9\nnpm error     at ClientRequest.<anonymous> (/usr/lib/x.js:130:14)\nnpm error   code: 'ECONNREFUSED',\nnpm error }\nnpm error A complete log of this run can be found in: /h/.npm/_logs/x.log\n";
        assert_eq!(
            npm_summary(stderr),
            "the npm registry is unreachable; FetchError: request to http://127.0.0.1:9/x failed, reason: connect ECONNREFUSED 127.0.0.1:9"
        );
        assert_eq!(
            npm_summary(
                "npm error code E404\nnpm error 404 Not Found - GET http://r/x - Not found\n"
            ),
            "the registry has no such package or version; 404 Not Found - GET http://r/x - Not found"
        );
        assert_eq!(npm_summary(""), "npm printed no error");
    }

    #[test]
    fn the_installed_name_is_the_dependency_npm_added() {
        let before = serde_json::json!({"dependencies": {"a": "1"}});
        let after =
            serde_json::json!({"dependencies": {"a": "1", "@s/b": "file:tarballs/b-1.tgz"}});
        assert_eq!(
            installed_name(&before, &after, "./tarballs/b-1.tgz"),
            Some("@s/b".into())
        );
        assert_eq!(
            installed_name(&after, &after, "./tarballs/b-1.tgz"),
            Some("@s/b".into())
        );
        assert_eq!(installed_name(&after, &after, "./tarballs/c.tgz"), None);
    }
}
