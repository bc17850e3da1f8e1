//! Consent bound to identity, on the front end's side: the install ledger knows the integrity
//! of each artifact `packs install` landed, which is an installed pack's identity
//! ([`nodetool_discovery::trust::Identity`]); discovery knows the rest. [`allow`] is `nodetool
//! packs allow`: it records the identity the pack has now.

use std::collections::BTreeMap;

use nodetool_discovery::trust::{self, Allowlist, Identity};
use nodetool_runtime::CompiledLookup;

use super::{InstallError, InstallErrorCode, Ledger};
use crate::search::{Environment, PackSources};

/// The ledger's integrity per pack installed by `packs install` and still present in the
/// installed root. A ledger that cannot be read knows none: those packs are then identified
/// by their content digest, so their consent reads as changed (fail closed; `packs list`
/// reports the ledger too).
pub fn installed_integrities(env: &Environment) -> BTreeMap<String, String> {
    let (Some(dir), Some(root)) = (env.install_dir(), env.installed_root()) else {
        return BTreeMap::new();
    };
    let Ok(ledger) = Ledger::read(&dir.join("nodetool-packs.json")) else {
        return BTreeMap::new();
    };
    ledger
        .packs
        .values()
        .filter(|r| root.join(&r.pack_name).is_dir())
        .filter_map(|r| Some((r.pack_name.clone(), r.integrity()?.to_string())))
        .collect()
}

/// What `packs allow` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// The identity the consent now records.
    pub identity: Identity,
    /// What the allowlist recorded before (`None`: not allowed; `Some(None)`: an entry
    /// without an identity).
    pub previous: Option<Option<Identity>>,
}

/// Allows the pack named `name` for the identity it has on the search path now, and writes
/// the allowlist. Refused when no pack of that name is discovered: there is no identity to
/// bind the consent to (`allow-not-found`).
pub fn allow(
    sources: &PackSources,
    compiled: &dyn CompiledLookup,
    name: &str,
) -> Result<Allowed, InstallError> {
    nodetool_protocol::names::check_package_name(name).map_err(|e| {
        InstallError::new(InstallErrorCode::AllowNameInvalid, format!("{name:?} {e}"))
    })?;
    let path = sources
        .env
        .allowlist_path()
        .map_err(|e| InstallError::new(InstallErrorCode::AllowIo, e.to_string()))?;
    let mut allowlist =
        Allowlist::read(&path).map_err(|m| InstallError::new(InstallErrorCode::AllowIo, m))?;
    let catalog = sources
        .discover_for_run(&Allowlist::default(), compiled)
        .map_err(|e| InstallError::new(InstallErrorCode::AllowIo, e.to_string()))?;
    let integrities = installed_integrities(&sources.env);
    let mut identities = trust::identities(&catalog, &|n| integrities.get(n).cloned());
    let identity = match identities.remove(name) {
        Some(identity) => identity,
        None => {
            let hint =
                nodetool_jssource::exports::closest(name, identities.keys().map(String::as_str))
                    .map(|c| format!("; did you mean {c}?"))
                    .unwrap_or_default();
            return Err(InstallError::new(
                InstallErrorCode::AllowNotFound,
                format!(
                    "no pack named {name} is on the search path (or it is withheld: see `nodetool packs doctor`), so there is no identity to allow{hint}\nhelp: install it, or name its root with --packs, first"
                ),
            ));
        }
    };
    let previous = allowlist.recorded(name).map(|r| r.map(str::to_string));
    allowlist.allow(name, identity.clone());
    allowlist
        .write(&path)
        .map_err(|m| InstallError::new(InstallErrorCode::AllowIo, m))?;
    Ok(Allowed { identity, previous })
}

/// Removes `name` from the allowlist. Returns whether it was allowed.
pub fn disallow(env: &Environment, name: &str) -> Result<bool, InstallError> {
    nodetool_protocol::names::check_package_name(name).map_err(|e| {
        InstallError::new(InstallErrorCode::AllowNameInvalid, format!("{name:?} {e}"))
    })?;
    let path = env
        .allowlist_path()
        .map_err(|e| InstallError::new(InstallErrorCode::AllowIo, e.to_string()))?;
    let mut allowlist =
        Allowlist::read(&path).map_err(|m| InstallError::new(InstallErrorCode::AllowIo, m))?;
    let changed = allowlist.disallow(name);
    allowlist
        .write(&path)
        .map_err(|m| InstallError::new(InstallErrorCode::AllowIo, m))?;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::{LockedPackage, Mode, Record, Scripts};

    fn record(name: &str, integrity: Option<&str>) -> Record {
        Record {
            pack_name: name.into(),
            version: "1.0.0".into(),
            spec: "./x.tgz".into(),
            mode: Mode::SandboxOnly,
            active: true,
            scripts: Scripts::Skipped,
            closure: vec![LockedPackage {
                path: format!("node_modules/{name}"),
                name: name.into(),
                version: Some("1.0.0".into()),
                resolved: None,
                integrity: integrity.map(str::to_string),
            }],
        }
    }

    #[test]
    fn only_packs_still_in_the_installed_root_are_identified_by_the_ledger() {
        let Ok(tmp) = tempfile::tempdir() else { return };
        let env = Environment {
            xdg_data_home: Some(tmp.path().to_path_buf()),
            home: Some(tmp.path().to_path_buf()),
            ..Environment::default()
        };
        let (Some(dir), Some(root)) = (env.install_dir(), env.installed_root()) else {
            panic!("no installed root");
        };
        // No ledger: nothing is known by integrity.
        assert_eq!(installed_integrities(&env), BTreeMap::new());
        let mut ledger = Ledger {
            version: 1,
            packs: BTreeMap::new(),
        };
        for r in [
            record("@acme/here", Some("sha512-here")),
            record("@acme/gone", Some("sha512-gone")),
            record("@acme/none", None),
        ] {
            ledger.packs.insert(r.pack_name.clone(), r);
        }
        assert!(std::fs::create_dir_all(&dir).is_ok());
        assert_eq!(ledger.write(&dir.join("nodetool-packs.json")), Ok(()));
        for name in ["@acme/here", "@acme/none"] {
            assert!(std::fs::create_dir_all(root.join(name)).is_ok());
        }
        assert_eq!(
            installed_integrities(&env),
            BTreeMap::from([("@acme/here".to_string(), "sha512-here".to_string())])
        );
        // A ledger that does not parse knows none (those packs fall back to their digest).
        assert!(std::fs::write(dir.join("nodetool-packs.json"), "{").is_ok());
        assert_eq!(installed_integrities(&env), BTreeMap::new());
    }
}
