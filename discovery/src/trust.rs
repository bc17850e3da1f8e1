//! The operator's pack allowlist: which packs are *trusted* (their SKILL.md registers as an
//! ordinary skill, and CodeAct sessions allow them by default). A JSON file the caller names
//! (the CLI uses `$XDG_CONFIG_HOME/nodetool/packs.json`):
//!
//! ```json
//! {"allowed": [{"name": "@acme/geo", "identity": "sha512-…"}, "@acme/old"]}
//! ```
//!
//! Consent is given to an *identity*, not only to a name: each entry records the name and the
//! identity the pack had when it was allowed ([`Identity`]). A pack whose identity is another
//! one now (an impostor installed under the name, a new version, edited files) is not trusted
//! until it is allowed again, and says why ([`Consent::Changed`]).
//!
//! A plain string entry is the format before identities were recorded. It is read as a name
//! whose identity is unknown: it keeps working (the pack stays trusted, whatever its identity)
//! and is reported as [`Consent::Unrecorded`] so `packs list` suggests `packs allow`, which
//! records the identity. Nothing rewrites the file behind the operator's back. One exception:
//! such an entry for a name reserved for NodeTool's own packs was given to the shipped pack
//! (nothing else could take the name then), so it does not carry over to an installed pack of
//! that name ([`Consent::UnrecordedNotShipped`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use nodetool_protocol::catalog::{Status, StatusCode, StatusLevel};

use crate::catalog::DiscoveredCatalog;

/// What a pack's identity is, as a consent records it: the string is compared exactly.
///
/// - a pack `nodetool packs install` installed: the lockfile integrity of the installed
///   artifact (`sha512-…`), the same one `packs trust` verifies;
/// - a pack shipped with NodeTool: [`SHIPPED_IDENTITY`], so consent outlives an upgrade that
///   changes the shipped files (the binary vouches for them), and no installed copy can match;
/// - any other pack (a `--packs` or `NODETOOL_PACKS_PATH` root): `sha256:<pack graph digest>`,
///   which changes whenever any of its files, its manifest or a compiled artifact changes.
pub type Identity = String;

/// The identity of every pack shipped with NodeTool.
pub const SHIPPED_IDENTITY: &str = "shipped";

/// The identity of a pack known only by its content: `sha256:<pack graph digest>`.
pub fn digest_identity(graph_digest: &str) -> Identity {
    format!("sha256:{graph_digest}")
}

/// An identity as a sentence shows it.
fn shown(identity: &str) -> String {
    if identity == SHIPPED_IDENTITY {
        "the pack shipped with NodeTool".into()
    } else {
        identity.to_string()
    }
}

/// The allowlist: allowed package names, each with the identity it was allowed for (`None`: an
/// entry of the old format, identity unrecorded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist {
    entries: BTreeMap<String, Option<Identity>>,
}

/// Whether a pack may be treated as trusted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Consent {
    /// The name is not on the allowlist.
    NotAllowed,
    /// Allowed for exactly this identity.
    Allowed,
    /// Allowed by an old entry that records no identity: trusted, identity unknown.
    Unrecorded,
    /// Allowed for another identity: not trusted.
    Changed { was: Identity, now: Identity },
    /// Allowed by an old entry for a reserved name, which was consent to the shipped pack, but
    /// the pack of that name now is another one: not trusted.
    UnrecordedNotShipped { now: Identity },
}

impl Consent {
    /// Whether the pack is trusted.
    pub fn trusted(&self) -> bool {
        matches!(self, Consent::Allowed | Consent::Unrecorded)
    }

    /// The diagnostic a consent that needs the operator's attention becomes (`None` for
    /// [`Consent::Allowed`] and [`Consent::NotAllowed`]).
    pub fn status(&self, pack_name: &str) -> Option<Status> {
        let (code, message) = match self {
            Consent::NotAllowed | Consent::Allowed => return None,
            Consent::Unrecorded => (
                StatusCode::ConsentIdentityUnrecorded,
                format!(
                    "{pack_name} is allowed, but the allowlist records no identity for it (an entry from before identities were recorded); run `nodetool packs allow {pack_name}` to bind the consent to the pack now installed"
                ),
            ),
            Consent::Changed { was, now } => (
                StatusCode::ConsentIdentityChanged,
                format!(
                    "{pack_name} is untrusted: allowed for a different identity: was {}, now {}; run `nodetool packs allow {pack_name}` to trust the pack now installed",
                    shown(was),
                    shown(now)
                ),
            ),
            Consent::UnrecordedNotShipped { now } => (
                StatusCode::ConsentIdentityChanged,
                format!(
                    "{pack_name} is untrusted: allowed for a different identity: was {} (an entry from before identities were recorded), now {}; run `nodetool packs allow {pack_name}` to trust the pack now installed",
                    shown(SHIPPED_IDENTITY),
                    shown(now)
                ),
            ),
        };
        Some(Status {
            pack_name: pack_name.to_string(),
            specifier: None,
            status: StatusLevel::Warning,
            code,
            message,
        })
    }
}

impl Allowlist {
    /// An allowlist of old-format entries (no identity recorded), e.g. in tests.
    pub fn unrecorded<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Allowlist {
        Allowlist {
            entries: names.into_iter().map(|n| (n.into(), None)).collect(),
        }
    }

    /// Reads the allowlist at `path`. A missing file is an empty allowlist; a malformed one is
    /// an error naming the file and what is wrong.
    pub fn read(path: &Path) -> Result<Allowlist, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Allowlist::default()),
            Err(e) => return Err(format!("{}: cannot be read ({e})", path.display())),
        };
        Allowlist::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses the file's text: `{"allowed": [...]}` whose entries are a package name, or
    /// `{"name": "<package name>", "identity": "<identity>" | null}`.
    pub fn parse(text: &str) -> Result<Allowlist, String> {
        const SHAPE: &str = "expected {\"allowed\": [\"<package name>\" or {\"name\": \"<package name>\", \"identity\": \"<identity>\"}, ...]}";
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("is not valid JSON ({e})"))?;
        let allowed = value
            .get("allowed")
            .and_then(|a| a.as_array())
            .ok_or_else(|| SHAPE.to_string())?;
        let mut entries = BTreeMap::new();
        for entry in allowed {
            let (name, identity) = match entry {
                serde_json::Value::String(name) => (name.clone(), None),
                serde_json::Value::Object(fields) => {
                    let name = fields.get("name").and_then(|n| n.as_str());
                    let identity = match fields.get("identity") {
                        None | Some(serde_json::Value::Null) => Some(None),
                        Some(serde_json::Value::String(i)) if !i.is_empty() => {
                            Some(Some(i.clone()))
                        }
                        Some(_) => None,
                    };
                    match (name, identity) {
                        (Some(name), Some(identity)) => (name.to_string(), identity),
                        _ => {
                            return Err(format!(
                                "every allowed entry must be a package name, or an object with a \"name\" string and an \"identity\" string ({SHAPE})"
                            ));
                        }
                    }
                }
                _ => {
                    return Err(format!(
                        "every allowed entry must be a package name string or an object ({SHAPE})"
                    ));
                }
            };
            // Two entries for one name: the one that records an identity wins, so a duplicate
            // can never widen consent to "identity unknown".
            let slot = entries.entry(name).or_insert(None);
            if slot.is_none() {
                *slot = identity;
            }
        }
        Ok(Allowlist { entries })
    }

    /// Writes the allowlist atomically (a temporary file renamed over the old one), creating
    /// the directory if needed. An entry without an identity is written as a plain name, as it
    /// was read.
    pub fn write(&self, path: &Path) -> Result<(), String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("{}: cannot be created ({e})", dir.display()))?;
        }
        let allowed: Vec<serde_json::Value> = self
            .entries
            .iter()
            .map(|(name, identity)| match identity {
                Some(identity) => serde_json::json!({ "name": name, "identity": identity }),
                None => serde_json::json!(name),
            })
            .collect();
        let text = serde_json::to_string_pretty(&serde_json::json!({ "allowed": allowed }))
            .unwrap_or_default();
        write_atomically(path, &text)
    }

    /// Allows `name` for `identity` (replacing what was recorded). Returns whether anything
    /// changed.
    pub fn allow(&mut self, name: &str, identity: Identity) -> bool {
        self.entries
            .insert(name.to_string(), Some(identity.clone()))
            != Some(Some(identity))
    }

    /// Removes `name`. Returns whether it was allowed.
    pub fn disallow(&mut self, name: &str) -> bool {
        self.entries.remove(name).is_some()
    }

    /// Every allowed name, whatever identity it records.
    pub fn names(&self) -> BTreeSet<String> {
        self.entries.keys().cloned().collect()
    }

    /// Whether `name` is allowed and, if so, for which identity (`Some(None)`: unrecorded).
    pub fn recorded(&self, name: &str) -> Option<Option<&str>> {
        self.entries.get(name).map(Option::as_deref)
    }

    /// The consent a pack named `name` whose identity is `identity` has.
    pub fn consent(&self, name: &str, identity: &str) -> Consent {
        match self.entries.get(name) {
            None => Consent::NotAllowed,
            Some(None)
                if identity != SHIPPED_IDENTITY
                    && nodetool_protocol::names::is_reserved_package_name(name) =>
            {
                Consent::UnrecordedNotShipped {
                    now: identity.to_string(),
                }
            }
            Some(None) => Consent::Unrecorded,
            Some(Some(was)) if was == identity => Consent::Allowed,
            Some(Some(was)) => Consent::Changed {
                was: was.clone(),
                now: identity.to_string(),
            },
        }
    }
}

/// The identity of every pack in `catalog` ([`Identity`]): [`SHIPPED_IDENTITY`] for a pack
/// from the shipped root, `installed_integrity(name)` when the front end knows the installed
/// artifact's integrity (the install ledger), else [`digest_identity`] of its graph digest.
pub fn identities(
    catalog: &DiscoveredCatalog,
    installed_integrity: &dyn Fn(&str) -> Option<String>,
) -> BTreeMap<String, Identity> {
    catalog
        .pack_origins()
        .map(|(name, shipped, graph_digest)| {
            let identity = if shipped {
                SHIPPED_IDENTITY.to_string()
            } else {
                installed_integrity(name).unwrap_or_else(|| digest_identity(graph_digest))
            };
            (name.to_string(), identity)
        })
        .collect()
}

/// Binds the catalog's trust to identity: `catalog` was discovered with
/// [`Allowlist::names`] as its trusted packs; every pack whose consent does not hold for its
/// current identity loses its trust, and every consent that needs the operator's attention
/// becomes a diagnostic ([`Consent::status`]). Returns each allowed pack's consent.
pub fn apply_consent(
    catalog: &mut DiscoveredCatalog,
    allowlist: &Allowlist,
    installed_integrity: &dyn Fn(&str) -> Option<String>,
) -> BTreeMap<String, Consent> {
    let mut consents = BTreeMap::new();
    let mut statuses = Vec::new();
    for (name, identity) in identities(catalog, installed_integrity) {
        let consent = allowlist.consent(&name, &identity);
        if consent == Consent::NotAllowed {
            continue;
        }
        if !consent.trusted() {
            catalog.withhold_trust(&name);
        }
        statuses.extend(consent.status(&name));
        consents.insert(name, consent);
    }
    catalog.add_diagnostics(statuses);
    consents
}

/// Writes `text` and a final newline to `path` atomically ([`crate::atomic::write_atomic`]).
/// Operator files (the allowlist, the install ledger) are written this way.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    crate::atomic::write_atomic(path, format!("{text}\n").as_bytes()).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("nodetool/packs.json");
        assert_eq!(Allowlist::read(&path), Ok(Allowlist::default()));
        let mut list = Allowlist::default();
        assert!(list.allow("@acme/geo", "sha256:aa".into()));
        assert!(!list.allow("@acme/geo", "sha256:aa".into()));
        assert_eq!(list.write(&path), Ok(()));
        assert_eq!(Allowlist::read(&path), Ok(list.clone()));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(text.contains("\"identity\": \"sha256:aa\""), "{text}");
        for bad in [
            "{\"allowed\": [1]}",
            "{\"allowed\": [{\"identity\": \"x\"}]}",
            "{\"allowed\": [{\"name\": \"a\", \"identity\": 3}]}",
            "{\"allowed\": [{\"name\": \"a\", \"identity\": \"\"}]}",
            "{\"allowed\": {}}",
            "[]",
        ] {
            std::fs::write(&path, bad).unwrap_or_default();
            assert!(Allowlist::read(&path).is_err(), "{bad}");
        }
        std::fs::write(&path, "nope").unwrap_or_default();
        assert!(
            Allowlist::read(&path)
                .err()
                .unwrap_or_default()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn the_old_format_still_reads_as_identity_unrecorded() {
        let list = Allowlist::parse("{\"allowed\": [\"@acme/geo\", \"@acme/csv\"]}")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(list, Allowlist::unrecorded(["@acme/csv", "@acme/geo"]));
        assert_eq!(list.recorded("@acme/geo"), Some(None));
        assert_eq!(list.consent("@acme/geo", "sha256:aa"), Consent::Unrecorded);
        assert!(list.consent("@acme/geo", "sha256:aa").trusted());
        let status = list.consent("@acme/geo", "x").status("@acme/geo");
        assert_eq!(
            status.map(|s| (s.code, s.status)),
            Some((StatusCode::ConsentIdentityUnrecorded, StatusLevel::Warning))
        );
        // Written back as it was read: plain names.
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("packs.json");
        assert_eq!(list.write(&path), Ok(()));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(text.contains("\"@acme/geo\""), "{text}");
        assert!(!text.contains("identity"), "{text}");
    }

    #[test]
    fn consent_holds_only_for_the_recorded_identity() {
        let mut list = Allowlist::default();
        list.allow("@nodetool-ai/sandbox-geo", SHIPPED_IDENTITY.into());
        assert_eq!(
            list.consent("@nodetool-ai/sandbox-geo", SHIPPED_IDENTITY),
            Consent::Allowed
        );
        assert_eq!(list.consent("@acme/other", "x"), Consent::NotAllowed);
        let changed = list.consent("@nodetool-ai/sandbox-geo", "sha512-impostor");
        assert!(!changed.trusted());
        let status = changed
            .status("@nodetool-ai/sandbox-geo")
            .unwrap_or_else(|| panic!("no status"));
        assert_eq!(status.code, StatusCode::ConsentIdentityChanged);
        assert_eq!(
            status.message,
            "@nodetool-ai/sandbox-geo is untrusted: allowed for a different identity: was the pack shipped with NodeTool, now sha512-impostor; run `nodetool packs allow @nodetool-ai/sandbox-geo` to trust the pack now installed"
        );
        // Allowing again binds the consent to the new identity.
        assert!(list.allow("@nodetool-ai/sandbox-geo", "sha512-impostor".into()));
        assert_eq!(
            list.consent("@nodetool-ai/sandbox-geo", "sha512-impostor"),
            Consent::Allowed
        );
        assert!(list.disallow("@nodetool-ai/sandbox-geo"));
        assert!(!list.disallow("@nodetool-ai/sandbox-geo"));
    }

    #[test]
    fn an_old_entry_for_a_reserved_name_was_consent_to_the_shipped_pack_only() {
        let list = Allowlist::unrecorded(["@nodetool-ai/sandbox-geo"]);
        let geo = "@nodetool-ai/sandbox-geo";
        assert_eq!(list.consent(geo, SHIPPED_IDENTITY), Consent::Unrecorded);
        let impostor = list.consent(geo, "sha512-impostor");
        assert!(!impostor.trusted());
        assert_eq!(
            impostor.status(geo).map(|s| (s.code, s.message)),
            Some((
                StatusCode::ConsentIdentityChanged,
                "@nodetool-ai/sandbox-geo is untrusted: allowed for a different identity: was the pack shipped with NodeTool (an entry from before identities were recorded), now sha512-impostor; run `nodetool packs allow @nodetool-ai/sandbox-geo` to trust the pack now installed".into()
            ))
        );
    }

    #[test]
    fn hostile_allowlists_are_errors_or_lists_never_panics() {
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let deep_entry = format!(
            "{{\"allowed\": [{{\"name\": \"a\", \"identity\": {}\"x\"{}}}]}}",
            "[".repeat(5_000),
            "]".repeat(5_000)
        );
        let many = format!(
            "{{\"allowed\": [{}]}}",
            (0..20_000)
                .map(|i| format!("\"@s/p{i}\""))
                .collect::<Vec<_>>()
                .join(",")
        );
        for text in [
            "",
            "null",
            "{\"allowed\": null}",
            "{\"allowed\": [null]}",
            "{\"allowed\": [{\"name\": 1}]}",
            "{\"allowed\": [{\"name\": \"a\", \"identity\": {}}]}",
            "{\"allowed\": [1e999999]}",
            "{\"allowed\": [\"\\ud800\"]}",
            "\u{feff}{\"allowed\": []}",
            &deep,
            &deep_entry,
        ] {
            let _ = Allowlist::parse(text);
        }
        assert_eq!(Allowlist::parse(&many).map(|l| l.names().len()), Ok(20_000));
        // An entry may carry fields this version does not know; they are ignored.
        let list = Allowlist::parse(
            "{\"allowed\": [{\"name\": \"a\", \"identity\": \"sha256:1\", \"note\": 1}], \"other\": true}",
        );
        assert_eq!(
            list.map(|l| l.recorded("a").map(|i| i.map(str::to_string))),
            Ok(Some(Some("sha256:1".into())))
        );
    }

    #[test]
    fn a_duplicate_entry_never_widens_consent() {
        for text in [
            "{\"allowed\": [\"a\", {\"name\": \"a\", \"identity\": \"sha256:1\"}]}",
            "{\"allowed\": [{\"name\": \"a\", \"identity\": \"sha256:1\"}, \"a\"]}",
        ] {
            let list = Allowlist::parse(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(list.recorded("a"), Some(Some("sha256:1")), "{text}");
        }
    }
}
