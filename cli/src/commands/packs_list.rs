//! `nodetool packs list`: every importable module and every diagnostic, with the install
//! ledger's mode, activity and scripts per installed pack.

use nodetool_discovery::DiscoveredCatalog;
use nodetool_frontend::search::Environment;

use crate::{Outcome, install, render, term};

pub(super) fn list(catalog: &DiscoveredCatalog, env: &Environment, json: bool) -> Outcome {
    // A ledger that cannot be read is reported and the catalog is listed anyway.
    let ledger = install::installer(env)
        .ok()
        .map(|i| i.ledger())
        .transpose()
        .unwrap_or_else(|e| {
            errln!("nodetool: {}", term::safe(&e.message));
            None
        });
    render::packs_list(catalog, ledger.as_ref(), json);
    if !json {
        install::print_consent(catalog);
    }
    Ok(())
}
