//! The relative-import rule: how a `./` or `../` request inside a pack names one of the pack's
//! files. Discovery admits a pack's graph with it, the guest loader serves files with it, and
//! the browser runner (`web/src/relative.js`) is checked against [`CASES`], exported as
//! `tests/contract/relative.json`: what discovery admits and what a loader serves cannot drift.
//!
//! Ids are `/`-separated paths from the package root (`sandbox/geo.js`), never filesystem
//! paths: a request that climbs above the package root names nothing.

/// Whether `request` is a relative request (`./…` or `../…`): the only imports a pack file may
/// make of anything but a declared specifier.
pub fn is_relative(request: &str) -> bool {
    request.starts_with("./") || request.starts_with("../")
}

/// Joins `request` onto the directory of the file `importer`, or `None` when it climbs out of
/// the package or names the root itself. Empty and `.` segments are skipped, `..` removes one.
pub fn join_relative(importer: &str, request: &str) -> Option<String> {
    let mut segments: Vec<&str> = importer.split('/').collect();
    segments.pop();
    for part in request.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                segments.pop()?;
            }
            p => segments.push(p),
        }
    }
    (!segments.is_empty()).then(|| segments.join("/"))
}

/// The files a joined relative import may land on, in the order every loader tries them: the
/// id itself, then with `.js`, then its `index.js`.
pub fn relative_candidates(target: &str) -> [String; 3] {
    [
        target.to_string(),
        format!("{target}.js"),
        format!("{target}/index.js"),
    ]
}

/// The file id a relative `request` from `importer` names before candidates are tried, or
/// `None` when the request is not relative or does not stay inside the package.
pub fn relative_file(importer: &str, request: &str) -> Option<String> {
    if is_relative(request) {
        join_relative(importer, request)
    } else {
        None
    }
}

/// One case of the rule: a request from a file, and the id it joins to (`None`: it names
/// nothing). The candidates follow from [`relative_candidates`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RelativeCase {
    /// The importing file's id.
    pub importer: &'static str,
    /// The request as written.
    pub request: &'static str,
    /// What [`join_relative`] answers.
    pub joined: Option<&'static str>,
    /// Why the case is here.
    pub note: &'static str,
}

/// The cases every implementation of the rule must answer alike (Rust tests them here; the
/// browser runner's test reads them from `tests/contract/relative.json`).
pub const CASES: &[RelativeCase] = &[
    RelativeCase {
        importer: "sandbox/geo.js",
        request: "./internal/round.js",
        joined: Some("sandbox/internal/round.js"),
        note: "a sibling directory",
    },
    RelativeCase {
        importer: "sandbox/a/b.js",
        request: "../c.js",
        joined: Some("sandbox/c.js"),
        note: "one level up",
    },
    RelativeCase {
        importer: "sandbox/geo.js",
        request: "../../x.js",
        joined: None,
        note: "climbs above the package root",
    },
    RelativeCase {
        importer: "geo.js",
        request: "../x.js",
        joined: None,
        note: "a root file climbing out",
    },
    RelativeCase {
        importer: "geo.js",
        request: "./x",
        joined: Some("x"),
        note: "no extension: candidates add .js and /index.js",
    },
    RelativeCase {
        importer: "sandbox/geo.js",
        request: "./a/../b.js",
        joined: Some("sandbox/b.js"),
        note: "a .. inside the request",
    },
    RelativeCase {
        importer: "sandbox/geo.js",
        request: ".//./a.js",
        joined: Some("sandbox/a.js"),
        note: "empty and . segments are skipped",
    },
    RelativeCase {
        importer: "sandbox/geo.js",
        request: "../",
        joined: None,
        note: "names the package root, which is no file",
    },
    RelativeCase {
        importer: "sandbox/geo.js",
        request: "./",
        joined: Some("sandbox"),
        note: "the importer's directory (candidates: sandbox.js, sandbox/index.js)",
    },
    RelativeCase {
        importer: "sandbox/a/b/c.js",
        request: "../../../x.js",
        joined: Some("x.js"),
        note: "back to the root, not above it",
    },
    RelativeCase {
        importer: "sandbox/a/b/c.js",
        request: "../../../../x.js",
        joined: None,
        note: "one level above the root",
    },
    RelativeCase {
        importer: "sandbox/geo.js",
        request: "./lib/../../../etc/passwd",
        joined: None,
        note: "climbs out part-way through",
    },
    RelativeCase {
        importer: "sandbox/geo.js",
        request: "./caf\u{e9}.js",
        joined: Some("sandbox/caf\u{e9}.js"),
        note: "non-ASCII ids are kept as written",
    },
    RelativeCase {
        importer: "sandbox/geo.js",
        request: "./a\\..\\..\\x.js",
        joined: Some("sandbox/a\\..\\..\\x.js"),
        note: "a backslash is no separator",
    },
    RelativeCase {
        importer: "sandbox/geo.js",
        request: "@acme/geo",
        joined: Some("sandbox/@acme/geo"),
        note: "join alone does not check relativeness (relative_file does)",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_joins_as_written() {
        for case in CASES {
            assert_eq!(
                join_relative(case.importer, case.request).as_deref(),
                case.joined,
                "{case:?}"
            );
            let file = relative_file(case.importer, case.request);
            if is_relative(case.request) {
                assert_eq!(file.as_deref(), case.joined, "{case:?}");
            } else {
                assert_eq!(file, None, "{case:?}");
            }
        }
    }

    #[test]
    fn candidates_are_tried_exact_then_js_then_index() {
        assert_eq!(
            relative_candidates("sandbox/x"),
            ["sandbox/x", "sandbox/x.js", "sandbox/x/index.js"]
        );
    }

    #[test]
    fn relative_means_dot_slash_or_dot_dot_slash() {
        for yes in ["./a", "../a", "./", "../"] {
            assert!(is_relative(yes), "{yes}");
        }
        for no in ["a", ".", "..", "/a", ".a", "@a/b", "node:fs", ".\\a"] {
            assert!(!is_relative(no), "{no}");
        }
    }

    #[test]
    fn a_deep_climb_is_refused_without_cost() {
        let request = "../".repeat(100_000);
        assert_eq!(join_relative("a/b.js", &request), None);
        let deep = format!("{}x.js", "./a/".repeat(50_000));
        assert!(join_relative("b.js", &deep).is_some_and(|j| j.len() > 100_000));
    }
}
