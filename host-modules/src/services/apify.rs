//! `apify`: the three requests of an Apify run (start the actor, read the run, read its
//! dataset). The polling loop between them is the guest's, with its own `sleep` and fetch cap.

use nodetool_protocol::value::Value;

use super::{Target, encode_component, header_value, json_body, prepared, require_string};
use crate::error::HostError;
use crate::limits::{option, options_of};

const APIFY_BASE: &str = "https://api.apify.com";

fn bearer(at: &str, token: &str) -> Result<Vec<(&'static str, String)>, HostError> {
    Ok(vec![(
        "Authorization",
        header_value(at, "token", format!("Bearer {token}"))?,
    )])
}

/// `https://api.apify.com` + `path`, built from encoded parts.
fn api(at: &str, path: &str) -> Result<Target, HostError> {
    let bad = || HostError::invalid(format!("{at}: an id may not be \".\" or \"..\""));
    let url = url::Url::parse(APIFY_BASE)
        .and_then(|base| base.join(path))
        .map_err(|_| bad())?;
    // `..` is the one id encoding leaves as it is, and it would move the request elsewhere.
    if url.path() != path {
        return Err(bad());
    }
    Ok(Target::new(url))
}

/// Sets each present option of `names` as the query parameter it maps to.
fn query_of(target: &mut Target, options: &[(String, Value)], names: &[(&str, &str)]) {
    let bag = names
        .iter()
        .filter_map(|(option_name, param)| {
            option(options, option_name).map(|v| (param.to_string(), v.clone()))
        })
        .collect();
    target.params.with_query(Some(&Value::Object(bag)));
}

/// `startRun({ token, actor, input?, build?, memoryMbytes?, timeoutSecs? })` -> a prepared
/// `POST /v2/acts/<owner~name>/runs`, the input as its JSON body. `actor` may be written
/// `owner/name` or `owner~name`.
pub fn start_run(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "apify.startRun";
    let options = options_of(args.first());
    let token = require_string(AT, options, "token")?;
    let actor = require_string(AT, options, "actor")?.replace('/', "~");
    let mut target = api(AT, &format!("/v2/acts/{}/runs", encode_component(&actor)))?;
    query_of(
        &mut target,
        options,
        &[
            ("build", "build"),
            ("memoryMbytes", "memory"),
            ("timeoutSecs", "timeout"),
        ],
    );
    let mut headers = bearer(AT, token)?;
    headers.push(("Content-Type", "application/json".into()));
    let body = json_body(AT, option(options, "input"))?;
    Ok(prepared(
        target.finish(AT)?,
        "POST".into(),
        headers,
        Some(body),
    ))
}

/// `runStatus({ token, runId })` -> a prepared `GET /v2/actor-runs/<runId>`: its `data.status`
/// is what a poll waits on, `data.defaultDatasetId` what it reads next.
pub fn run_status(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "apify.runStatus";
    let options = options_of(args.first());
    let token = require_string(AT, options, "token")?;
    let run_id = require_string(AT, options, "runId")?;
    let target = api(AT, &format!("/v2/actor-runs/{}", encode_component(run_id)))?;
    Ok(prepared(
        target.finish(AT)?,
        "GET".into(),
        bearer(AT, token)?,
        None,
    ))
}

/// `datasetItems({ token, datasetId, format="json", clean?, limit?, offset? })` -> a prepared
/// `GET /v2/datasets/<datasetId>/items`.
pub fn dataset_items(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "apify.datasetItems";
    let options = options_of(args.first());
    let token = require_string(AT, options, "token")?;
    let dataset_id = require_string(AT, options, "datasetId")?;
    let mut target = api(
        AT,
        &format!("/v2/datasets/{}/items", encode_component(dataset_id)),
    )?;
    let format = option(options, "format")
        .cloned()
        .unwrap_or_else(|| Value::String("json".into()));
    let mut bag = vec![("format".to_string(), format)];
    for name in ["clean", "limit", "offset"] {
        if let Some(v) = option(options, name) {
            bag.push((name.to_string(), v.clone()));
        }
    }
    target.params.with_query(Some(&Value::Object(bag)));
    Ok(prepared(
        target.finish(AT)?,
        "GET".into(),
        bearer(AT, token)?,
        None,
    ))
}
