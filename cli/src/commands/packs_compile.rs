//! `nodetool packs compile`: every npm entry on the search path bundled, scanned, probed and
//! cached; exit 1 when any module was skipped.

use nodetool_compiler::Cache;
use nodetool_frontend::search::PackSources;

use crate::{Failure, Outcome, compile, report_error};

pub(super) fn packs_compile(sources: &PackSources, cache: &Cache, json: bool) -> Outcome {
    let roots = sources.roots().map_err(|e| Failure::Usage(e.to_string()))?;
    match compile::packs_compile(&roots, cache, json, &compile::npm()) {
        Ok(true) => Ok(()),
        Ok(false) => Err(Failure::Failed),
        Err(message) => {
            report_error("compile-failed", &message);
            Err(Failure::Failed)
        }
    }
}
