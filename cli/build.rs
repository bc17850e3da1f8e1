//! Reads the exact versions of the engine crates this binary links from the workspace's
//! `Cargo.lock`, for `nodetool info` and `--version` (`NODETOOL_LOCKED_<CRATE>`, `unknown` when
//! the lockfile is not beside the workspace).

fn main() {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default();
    let lockfile = std::path::Path::new(&manifest).join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lockfile.display());
    let text = std::fs::read_to_string(&lockfile).unwrap_or_default();
    for (krate, variable) in [
        ("rquickjs-sys", "NODETOOL_LOCKED_RQUICKJS_SYS"),
        ("wasmtime", "NODETOOL_LOCKED_WASMTIME"),
        ("rolldown", "NODETOOL_LOCKED_ROLLDOWN"),
    ] {
        let version = locked_version(&text, krate).unwrap_or("unknown");
        println!("cargo:rustc-env={variable}={version}");
    }
}

/// The `version` of the `[[package]]` named `name` (the first, if several are locked).
fn locked_version<'a>(lockfile: &'a str, name: &str) -> Option<&'a str> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lockfile.lines();
    while let Some(line) = lines.next() {
        if line.trim() == wanted {
            let version = lines.next()?.trim().strip_prefix("version = \"")?;
            return version.strip_suffix('"');
        }
    }
    None
}
