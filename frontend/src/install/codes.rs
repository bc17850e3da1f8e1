//! The install, trust (rebuild) and allow error codes, declared once: each code's stable name,
//! what it means and what the operator can do about it. [`super::InstallError`] carries one,
//! the CLI renders its name in `--json` output (`error.code`), and the table in README.md's
//! "Installing packs" section is generated from [`CODES`] (a test keeps the two equal).

nodetool_protocol::stable_codes! {
    /// Why an install, a trust (rebuild), an uninstall or an allow failed. The names are
    /// stable: scripts read them from `--json` output.
    pub enum InstallErrorCode, table CODES;
    /// The install spec is neither a registry name nor an existing tarball or directory.
    SpecInvalid = "install-spec-invalid",
        "The spec is not a registry package name (with an optional @version), and names no existing tarball or directory.",
        "Pass `@scope/name`, `name@version`, or the path of a `.tgz` or a pack directory.";
    /// The install ledger cannot be read.
    LedgerCorrupt = "install-ledger-corrupt",
        "The install ledger (`nodetool-packs.json` in the installed root) is not one this version reads.",
        "Fix or remove the ledger file the message names, then reinstall the packs it listed.";
    /// npm ran and failed, or did not produce what it should have.
    NpmFailed = "install-npm-failed",
        "npm ran and failed (the message ends with npm's own summary), or did not produce the package or tarball it should have.",
        "Read npm's summary: a missing version, a network or registry error, or a broken package; retry once it is fixed.";
    /// The npm executable was not found.
    NpmMissing = "install-npm-missing",
        "The npm executable (`npm`, or what `NODETOOL_NPM` names) was not found on PATH.",
        "Install Node.js and npm, or point `NODETOOL_NPM` at an npm executable.";
    /// A file of the installed root could not be read or written.
    Io = "install-io",
        "A file or directory of the installed root could not be read, written or renamed (the message names it and the system's reason).",
        "Check the permissions and free space of `$XDG_DATA_HOME/nodetool/packs` and the path the message names.";
    /// npm's lockfile does not describe the pack's dependency closure.
    LockfileInvalid = "install-lockfile-invalid",
        "npm's lockfile does not describe the pack and its dependency closure the way the ledger needs.",
        "Reinstall the pack; if it persists, the npm in use writes a lockfile version this release does not read.";
    /// The pack was not installed by `packs install`.
    NotInstalled = "install-not-installed",
        "The pack is not in the install ledger: `nodetool packs install` did not install it.",
        "Check the name with `nodetool packs list`; install it first.";
    /// A local package takes a name reserved for NodeTool's own packs.
    ReservedName = "install-reserved-name",
        "A local tarball or directory holds a package whose name is in NodeTool's own scope (`@nodetool-ai/`).",
        "Rename the package, or pass `--allow-reserved-name` to install it in place of the shipped pack.";
    /// Another install holds the staging directory.
    Busy = "install-busy",
        "Another install, rebuild or uninstall is in progress (its staging directory exists).",
        "Wait for it; if no nodetool is running, remove the staging directory the message names.";
    /// An unknown pack can never be trusted.
    TrustRefusedUnknown = "trust-refused-unknown",
        "The pack declares nothing NodeTool can use (install mode `unknown`), so it can never be trusted.",
        "Nothing to rebuild: fix the pack's `package.json`, or uninstall it.";
    /// A sandbox-only pack has nothing to rebuild.
    TrustRefusedSandboxOnly = "trust-refused-sandbox-only",
        "The pack is sandbox-only: it runs no host code, has no scripts to run, and is already active.",
        "Nothing to do; the pack is usable as it is.";
    /// What is on disk is not what was installed.
    TrustIntegrityMismatch = "trust-integrity-mismatch",
        "The version on disk, or the lockfile's closure, differs from what the ledger recorded at install (the message lists each difference), so no script ran.",
        "Reinstall the pack to record what is on disk now, then rebuild it.";
    /// The pack's `package.json` now reads as another install mode.
    TrustModeMoved = "trust-mode-moved",
        "The pack's `package.json` on disk now reads as another install mode than the one recorded at install.",
        "Reinstall the pack to classify it again.";
    /// `npm rebuild` failed after the checks passed.
    TrustRebuildFailed = "trust-rebuild-failed",
        "`npm rebuild` with scripts failed after every check passed; some of the pack's scripts may have run, and it stays inactive.",
        "Read npm's summary in the message, fix the cause, and rebuild again.";
    /// The name given to `packs allow` is not a package name.
    AllowNameInvalid = "allow-name-invalid",
        "The name given to `packs allow` or `packs disallow` is not a valid npm package name.",
        "Pass the pack's package name, as `nodetool packs list` shows it.";
    /// The allowlist or the pack search could not be read or written.
    AllowIo = "allow-io",
        "The allowlist (`$XDG_CONFIG_HOME/nodetool/packs.json`), the compile cache or the pack search path could not be read or written.",
        "Check the file the message names (its permissions, and that it is valid JSON).";
    /// No pack of that name is on the search path.
    AllowNotFound = "allow-not-found",
        "No pack of that name is on the search path (or it is withheld), so there is no identity to allow.",
        "Install the pack, or name its root with `--packs`, first; `nodetool packs doctor` says why one is withheld.";
}

/// One code's documentation.
pub type InstallCodeDoc = nodetool_protocol::codes::CodeDoc<InstallErrorCode>;

/// The error table of README.md's "Installing packs" section, generated from [`CODES`].
pub fn docs_table() -> String {
    nodetool_protocol::codes::docs_table(CODES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_named_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for doc in CODES {
            assert!(seen.insert(doc.name), "{} twice", doc.name);
            assert!(
                ["install-", "trust-", "allow-"]
                    .iter()
                    .any(|p| doc.name.starts_with(p)),
                "{}",
                doc.name
            );
            assert_eq!(doc.code.as_str(), doc.name);
            assert_eq!(InstallErrorCode::parse(doc.name), Some(doc.code));
            assert_eq!(doc.code.doc().name, doc.name);
            assert!(doc.meaning.ends_with('.') && doc.todo.ends_with('.'));
        }
        assert_eq!(InstallErrorCode::parse("install-nope"), None);
    }

    /// The codes a real installer call provokes here without a network or a real npm: the call
    /// in words, and its error (`dir` the installed root, shown as `<root>`).
    fn provoke(
        code: InstallErrorCode,
        dir: &std::path::Path,
    ) -> Option<(&'static str, super::super::InstallError)> {
        use super::super::{Installer, ReservedNames, Spec};
        let root = dir.join("packs");
        let mut installer = Installer::new(root.clone());
        let registry = || Spec::parse("@acme/geo@1.2").unwrap_or_else(|e| panic!("{e}"));
        let install = |installer: &Installer| {
            installer
                .install(&registry(), ReservedNames::Refuse, &mut |_| {})
                .err()
        };
        let error = match code {
            InstallErrorCode::SpecInvalid => Spec::parse("./no-such-pack.tgz").err(),
            InstallErrorCode::LedgerCorrupt => {
                std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("{e}"));
                std::fs::write(installer.ledger_path(), "not json")
                    .unwrap_or_else(|e| panic!("{e}"));
                installer.ledger().err()
            }
            InstallErrorCode::NotInstalled => installer.trust("@acme/geo", &mut |_| {}).err(),
            InstallErrorCode::Busy => {
                std::fs::create_dir_all(dir.join(".packs-staging"))
                    .unwrap_or_else(|e| panic!("{e}"));
                install(&installer)
            }
            InstallErrorCode::NpmMissing => {
                installer.npm = dir.join("no-such-npm");
                install(&installer)
            }
            InstallErrorCode::NpmFailed => {
                let npm = dir.join("npm");
                std::fs::write(
                    &npm,
                    "#!/bin/sh\necho 'npm error code E404' >&2\necho 'npm error 404 Not Found - GET http://127.0.0.1:9/@acme%2fgeo' >&2\nexit 1\n",
                )
                .unwrap_or_else(|e| panic!("{e}"));
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(&npm, std::fs::Permissions::from_mode(0o755))
                        .unwrap_or_else(|e| panic!("{e}"));
                }
                installer.npm = npm;
                install(&installer)
            }
            _ => return None,
        };
        let call = match code {
            InstallErrorCode::SpecInvalid => "Spec::parse(\"./no-such-pack.tgz\")",
            InstallErrorCode::LedgerCorrupt => "ledger() of a ledger file holding \"not json\"",
            InstallErrorCode::NotInstalled => "trust(\"@acme/geo\") with an empty ledger",
            InstallErrorCode::Busy => {
                "install(\"@acme/geo@1.2\") while the staging directory exists"
            }
            InstallErrorCode::NpmMissing => {
                "install(\"@acme/geo@1.2\") with no npm at NODETOOL_NPM"
            }
            _ => "install(\"@acme/geo@1.2\") with an npm that answers 404",
        };
        Some((call, error.unwrap_or_else(|| panic!("{call} succeeded"))))
    }

    /// One snapshot per code, ruff-style: its name, what it means and what to do (as the docs
    /// table shows them), and for the codes a local call provokes, the call and the message it
    /// gave, with the code checked. (The rest are provoked end to end in `cli/tests/install.rs`.)
    #[test]
    fn every_code_has_its_snapshot() {
        for doc in CODES {
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let mut text = format!(
                "code: {}\nmeaning: {}\nwhat to do: {}\n",
                doc.name, doc.meaning, doc.todo
            );
            if let Some((call, error)) = provoke(doc.code, dir.path()) {
                assert_eq!(error.kind(), doc.code, "{call}: {error}");
                let shown = dir.path().display().to_string();
                text.push_str(&format!(
                    "call: {call}\nmessage: {}\n",
                    error.message.replace(&shown, "<dir>")
                ));
            }
            insta::assert_snapshot!(doc.name, text);
        }
    }
}
