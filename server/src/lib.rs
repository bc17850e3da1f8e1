//! `nodetool-server`: the HTTP front end (axum on tokio).
//!
//! It will own (its own issue): the delivery route `GET /api/sandbox-modules/{*id}` answered
//! only through the catalog's `authorize_delivery`, the catalog and docs API, runs and
//! validation over HTTP, the host-module route for the browser runner, soft reload, and the
//! Packages page.
//!
//! It must never translate a route into a filesystem lookup, and must stay thin like the CLI.
