//! `nodetool serve`: the `nodetool-server` front end over the CLI's own search path.

use std::path::PathBuf;

use nodetool_frontend::search::Environment;

use crate::{Failure, Outcome, report_error};

pub(super) fn serve(
    args: nodetool_server::ServeArgs,
    packs: Vec<PathBuf>,
    env: Environment,
) -> Outcome {
    // Every directory is settled before anything starts, so nothing is ever written into the
    // current directory.
    env.dirs().map_err(|e| Failure::Usage(e.to_string()))?;
    nodetool_server::serve_blocking(args, packs, env).map_err(|e| match e {
        nodetool_server::ServeError::Config(message) => Failure::Usage(message),
        nodetool_server::ServeError::Failed(message) => {
            report_error("serve-failed", &message);
            Failure::Failed
        }
    })
}
