//! `nodetool-broker`: the authority a run is granted, decided and performed outside the engine.
//!
//! A run's `workspace` and `fetch` globals reach the host's files and network. The guest only
//! describes a call (a method, a path string, bytes; a URL, a method, headers, a body) and hands
//! it to an [`Authority`]; every decision about it (path containment, links, quotas, the
//! allowed hosts, the headers that route a request, the size caps) and the work itself happen
//! here. When runs live in worker processes the guest's authority is a channel to the
//! supervisor, which holds the [`RunAuthority`]: the confined worker can neither open a file
//! nor a socket, and needs to.
//!
//! Every call is charged to the run's [`Budget`] (bytes in flight, fetches and workspace calls
//! at once), so many large bodies at once are refused rather than held.
//!
//! Architecture invariant: this crate links no JavaScript engine and no HTTP client (the
//! transport is the front end's, behind [`FetchTransport`]).

pub mod budget;
pub mod fetch;
pub mod workspace;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

pub use budget::{Budget, BudgetLimits, Charge};
pub use fetch::{
    BodyReader, FetchGrant, FetchRequest, FetchResponse, FetchTransport, OutboundRequest, Received,
    TransportFuture,
};
pub use workspace::{ListEntry, WorkspaceGrant, WorkspaceMethod, WorkspaceReply, WorkspaceRequest};

/// One call a run asks its authority to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// A `workspace` method.
    Workspace(WorkspaceRequest),
    /// A `fetch`.
    Fetch(FetchRequest),
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A `workspace` method's result.
    Workspace(WorkspaceReply),
    /// A `fetch`'s response.
    Fetch(FetchResponse),
}

/// A call's reply and what its bytes hold of the run's budget (given back once the reply has
/// been handed over, by dropping this).
#[derive(Debug)]
pub struct Granted {
    /// The reply.
    pub reply: Reply,
    /// The bytes it holds.
    pub charge: Option<Charge>,
}

/// What [`Authority::ask`] resolves to; `Err` is the message the guest's Promise rejects with.
pub type AuthorityFuture = Pin<Box<dyn Future<Output = Result<Granted, String>> + Send>>;

/// Which capabilities a run has (its globals exist only when granted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Grants {
    /// The `workspace` global.
    pub workspace: bool,
    /// The `fetch` global.
    pub fetch: bool,
}

/// What performs a run's capability calls.
///
/// Contract: `ask` returns promptly; the work happens in the future, which the run polls and
/// drops if the run ends first.
pub trait Authority: Send + Sync {
    /// What the run is granted.
    fn grants(&self) -> Grants;
    /// Makes one call.
    fn ask(&self, request: Request) -> AuthorityFuture;
}

/// The authority of one run: its workspace, its outbound HTTP and its budget. Make one per
/// run (the workspace quotas and the budget are the run's). Dropping it ends every read still
/// charging its budget.
pub struct RunAuthority {
    workspace: Option<workspace::Workspace>,
    fetch: Option<fetch::Fetcher>,
    budget: Budget,
}

impl fmt::Debug for RunAuthority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunAuthority")
            .field("workspace", &self.workspace.as_ref().map(|w| w.grant()))
            .field("fetch", &self.fetch.is_some())
            .field("budget", &self.budget.limits())
            .finish()
    }
}

impl RunAuthority {
    /// A run's authority with NodeTool's standard budget ([`BudgetLimits::STANDARD`]).
    pub fn new(workspace: Option<WorkspaceGrant>, fetch: Option<FetchGrant>) -> RunAuthority {
        RunAuthority::with_budget(workspace, fetch, BudgetLimits::STANDARD)
    }

    /// A run's authority with its own budget limits.
    pub fn with_budget(
        workspace: Option<WorkspaceGrant>,
        fetch: Option<FetchGrant>,
        limits: BudgetLimits,
    ) -> RunAuthority {
        RunAuthority {
            workspace: workspace.map(workspace::Workspace::new),
            fetch: fetch.map(fetch::Fetcher::new),
            budget: Budget::new(limits),
        }
    }

    /// The run's budget.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }
}

impl Drop for RunAuthority {
    fn drop(&mut self) {
        self.budget.close();
    }
}

impl Authority for RunAuthority {
    fn grants(&self) -> Grants {
        Grants {
            workspace: self.workspace.is_some(),
            fetch: self.fetch.is_some(),
        }
    }

    fn ask(&self, request: Request) -> AuthorityFuture {
        match request {
            Request::Workspace(request) => {
                let outcome = match &self.workspace {
                    // Files are local and capped: performed now, on the caller's thread.
                    Some(workspace) => {
                        workspace
                            .perform(&request, &self.budget)
                            .map(|(reply, charge)| Granted {
                                reply: Reply::Workspace(reply),
                                charge,
                            })
                    }
                    None => Err("workspace: this run has no workspace".to_string()),
                };
                Box::pin(std::future::ready(outcome))
            }
            Request::Fetch(request) => match &self.fetch {
                Some(fetcher) => match fetcher.fetch(request, &self.budget) {
                    Ok(future) => Box::pin(async move {
                        future.await.map(|received| Granted {
                            reply: Reply::Fetch(received.response),
                            charge: Some(received.charge),
                        })
                    }),
                    Err(message) => Box::pin(std::future::ready(Err(message))),
                },
                None => Box::pin(std::future::ready(Err(
                    "fetch: this run may not make requests".to_string(),
                ))),
            },
        }
    }
}

/// A guest string quoted for a message: escaped (so control characters stay visible) and cut
/// short when long.
pub(crate) fn quoted(text: &str) -> String {
    const SHOWN: usize = 200;
    if text.chars().count() <= SHOWN {
        return format!("{text:?}");
    }
    let cut: String = text.chars().take(SHOWN).collect();
    format!("{cut:?}…")
}
