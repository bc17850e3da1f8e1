//! The JSON answers both front ends give, and what to do about each status code.
//!
//! `nodetool run --json` and `POST /api/run` answer with [`run_json`], `nodetool validate
//! --json` and `POST /api/validate` with [`validate_json`], `nodetool packs list --json` and
//! `GET /api/packs/sandbox-modules` with [`packs_list_json`]: one shape each, built once.

use nodetool_guest::RunOutcome;
use nodetool_jssource::validate::{Issue, Severity};
use nodetool_protocol::catalog::StatusCode;
use nodetool_runtime::SandboxModuleCatalog;
use serde_json::{Value as Json, json};

/// A run as one JSON object: `{"ok": true, "result", "logs", "durationMs"}` or
/// `{"ok": false, "error": {code, message, line?, column?, specifier?}, "logs"}`.
pub fn run_json(outcome: &RunOutcome) -> Json {
    let logs = serde_json::to_value(&outcome.logs).unwrap_or_default();
    match &outcome.result {
        Ok(value) => json!({
            "ok": true,
            "result": value.to_json(),
            "logs": logs,
            "durationMs": u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
        }),
        Err(error) => json!({
            "ok": false,
            "error": error,
            "logs": logs,
        }),
    }
}

/// Whether any issue is an error (the workflow would fail).
pub fn has_errors(issues: &[Issue]) -> bool {
    issues.iter().any(|i| i.severity == Severity::Error)
}

/// A validation as one JSON object: `{"ok", "issues"}` (`ok` is false when any issue is an
/// error).
pub fn validate_json(issues: &[Issue]) -> Json {
    json!({ "ok": !has_errors(issues), "issues": issues })
}

/// What is importable and every diagnostic: `{"summaries", "diagnostics"}`.
pub fn packs_list_json(catalog: &dyn SandboxModuleCatalog) -> Json {
    json!({ "summaries": catalog.summaries(), "diagnostics": catalog.diagnostics() })
}

/// What to do about a status, by code.
pub fn advice(code: StatusCode) -> &'static str {
    use StatusCode::*;
    match code {
        DiscoveryFailed => {
            "Fix or remove the package directory; its package.json must be a JSON object with a valid name."
        }
        DuplicatePack => "Remove one of the copies; neither resolves while both are installed.",
        DuplicateSpecifier => {
            "Uninstall one of the packs; neither module resolves while both claim the specifier."
        }
        ManifestInvalid => {
            "Fix the nodetool block of the pack's package.json (the JSON Schema: `nodetool schema`)."
        }
        FileUnreadable | FileEscapesPackage | SymlinkNotAllowed => {
            "Ship the file inside the package as a regular file (no symlinks, no paths outside the package)."
        }
        FileTooLarge | PackTooLarge => {
            "Shrink the pack's sandbox files below the caps, or split the pack."
        }
        JsInvalid | DynamicImport | RequireCall | ImportOutsidePack | ImportEscapesPack
        | ImportUndeclaredFile | ImportNotJs | ModuleCycle => {
            "Fix the pack's JavaScript: static relative imports of declared files only, no import() or require(), no cycles."
        }
        WasmInvalid | WasmImports | WasmMemory | WasmExport => {
            "Rebuild the WASM module within the scalar contract (no imports, bounded unshared memory, i32/f32/f64 exports)."
        }
        HostModuleUnknown | HostModuleForeign => {
            "Remove the host entry: host modules are NodeTool's own and only their pinned packs may declare them."
        }
        PendingCompile => "Run `nodetool packs compile` to build the npm module.",
        NpmModuleCompiled => "Nothing to do.",
        NpmModuleWarning => "Check that the module works without the feature-detected global.",
        // The library is not where the pack's directory resolves it: not installed, or not
        // a dependency of the pack. Nothing says it cannot run.
        NpmModuleUnresolved => {
            "Add the library to the pack's `dependencies` and install it in the pack's directory (`npm install --ignore-scripts`), then run `nodetool packs compile`."
        }
        NpmModuleTooLarge
        | NpmModuleBuiltinImport
        | NpmModuleBundleFailed
        | NpmModuleForbiddenGlobal
        | NpmModuleScanRejected
        | NpmModuleProbeFailed => {
            "The npm package cannot run in the guest; use a different library or a host module."
        }
        SkillMissing | SkillInvalid => {
            "Add or fix SKILL.md so agents can discover the pack (its modules work either way)."
        }
        HostLibraryMissing => {
            "Install what the message names on the host that runs the sandbox; the module resolves meanwhile, but its calls fail."
        }
        ShippedPackShadowed => {
            "Uninstall the installed copy to use the pack shipped with NodeTool again; keep it only if you installed it on purpose (`packs install --allow-reserved-name`)."
        }
        ConsentIdentityChanged => {
            "Review the pack now installed, then `nodetool packs allow NAME` trusts it as it is now; until then it is untrusted."
        }
        ConsentIdentityUnrecorded => {
            "Run `nodetool packs allow NAME` to record the identity of the pack you trust; a pack whose identity then changes loses its trust."
        }
        ModuleNotFound | ModuleUnavailable | VersionMismatch | ContentDigestMismatch => {
            "Check the workflow's imports against `nodetool packs list`."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use nodetool_protocol::run::{RunError, RunErrorCode};
    use nodetool_protocol::value::Value;

    #[test]
    fn every_code_has_advice() {
        for code in StatusCode::ALL {
            assert!(!advice(*code).is_empty(), "{code}");
        }
    }

    #[test]
    fn run_shapes() {
        let ok = RunOutcome {
            result: Ok(Value::Number(2.5)),
            logs: Vec::new(),
            duration: Duration::from_millis(3),
        };
        assert_eq!(
            run_json(&ok),
            json!({"ok": true, "result": 2.5, "logs": [], "durationMs": 3})
        );
        let failed = RunOutcome {
            result: Err(RunError::new(RunErrorCode::Timeout, "too slow")),
            logs: Vec::new(),
            duration: Duration::ZERO,
        };
        assert_eq!(
            run_json(&failed),
            json!({"ok": false, "error": {"code": "timeout", "message": "too slow"}, "logs": []})
        );
    }
}
