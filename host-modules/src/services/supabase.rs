//! `supabase`: PostgREST requests against a Supabase project, the query in the URL (PostgREST's
//! filter operators) and the write semantics in the `Prefer` header.

use nodetool_protocol::value::Value;

use super::{
    Target, encode_component, header_value, json_body, method_of, prepared, require_string,
};
use crate::error::HostError;
use crate::limits::{js_string, option, options_of};

/// The project URL (`https://<ref>.supabase.co`, or a self-hosted one).
fn project_url(at: &str, options: &[(String, Value)]) -> Result<url::Url, HostError> {
    let raw = require_string(at, options, "url")?;
    let bad = || {
        HostError::invalid(format!(
            "{at}: url must be the project URL, e.g. https://<ref>.supabase.co"
        ))
    };
    let url = url::Url::parse(raw).map_err(|_| bad())?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad());
    }
    Ok(url)
}

/// `apikey` and the bearer token: Supabase reads both.
fn auth_headers(at: &str, key: &str) -> Result<Vec<(&'static str, String)>, HostError> {
    let key = header_value(at, "key", key.to_string())?;
    Ok(vec![
        ("apikey", key.clone()),
        ("Authorization", format!("Bearer {key}")),
    ])
}

/// `base` with its path replaced by `path` (query and fragment dropped), as
/// `new URL(path, base)` resolves an absolute path; a name that would move it is refused.
fn at_path(at: &str, base: &url::Url, path: &str) -> Result<url::Url, HostError> {
    let bad = || HostError::invalid(format!("{at}: table or fn may not be \".\" or \"..\""));
    let url = base.join(path).map_err(|_| bad())?;
    // `..` is the one name encoding leaves as it is, and it would climb out of /rest/v1/.
    if url.path() != path {
        return Err(bad());
    }
    Ok(url)
}

/// `from({ url, key, table, method="GET", select?, filters?, order?, limit?, offset?,
/// onConflict?, count?, returning?, query?, body? })` -> a prepared request on one table.
/// `GET` selects, `POST` inserts (an upsert with `onConflict`), `PATCH` updates, `DELETE`
/// deletes. Filters are `{ column: "op.value" }` or `{ column: { op: value } }`.
pub fn from(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "supabase.from";
    let options = options_of(args.first());
    let key = require_string(AT, options, "key")?;
    let table = require_string(AT, options, "table")?;
    let base = project_url(AT, options)?;
    let method = method_of(AT, options, "GET")?;

    let url = at_path(AT, &base, &format!("/rest/v1/{}", encode_component(table)))?;
    let mut target = Target::new(url);
    let params = &mut target.params;
    if let Some(select) = option(options, "select") {
        params.set("select", js_string(select));
    }
    if let Some(Value::Object(filters)) = option(options, "filters") {
        for (column, value) in filters {
            match value {
                Value::Undefined | Value::Null => {}
                Value::Object(operators) => {
                    for (operator, operand) in operators {
                        if !matches!(operand, Value::Undefined | Value::Null) {
                            params.append(column, format!("{operator}.{}", js_string(operand)));
                        }
                    }
                }
                value => params.append(column, js_string(value)),
            }
        }
    }
    for (name, param) in [
        ("order", "order"),
        ("limit", "limit"),
        ("offset", "offset"),
        ("onConflict", "on_conflict"),
    ] {
        if let Some(value) = option(options, name) {
            params.set(param, js_string(value));
        }
    }
    params.with_query(option(options, "query"));
    let url = target.finish(AT)?;

    let minimal = matches!(option(options, "returning"), Some(Value::String(s)) if s == "minimal");
    let mut prefer = vec![format!(
        "return={}",
        if minimal { "minimal" } else { "representation" }
    )];
    if option(options, "onConflict").is_some() {
        prefer.push("resolution=merge-duplicates".into());
    }
    if let Some(count) = option(options, "count") {
        prefer.push(format!("count={}", js_string(count)));
    }
    let mut headers = auth_headers(AT, key)?;
    headers.push(("Prefer", header_value(AT, "count", prefer.join(","))?));
    let body = match option(options, "body") {
        None => None,
        Some(body) => {
            headers.push(("Content-Type", "application/json".into()));
            Some(json_body(AT, Some(body))?)
        }
    };
    Ok(prepared(url, method, headers, body))
}

/// `rpc({ url, key, fn, args?, method="POST", query? })` -> a prepared request calling a
/// Postgres function, its arguments as the JSON body.
pub fn rpc(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "supabase.rpc";
    let options = options_of(args.first());
    let key = require_string(AT, options, "key")?;
    let function = require_string(AT, options, "fn")?;
    let base = project_url(AT, options)?;
    let url = at_path(
        AT,
        &base,
        &format!("/rest/v1/rpc/{}", encode_component(function)),
    )?;
    let mut target = Target::new(url);
    target.params.with_query(option(options, "query"));
    let url = target.finish(AT)?;
    let method = method_of(AT, options, "POST")?;
    let mut headers = auth_headers(AT, key)?;
    headers.push(("Content-Type", "application/json".into()));
    let body = json_body(AT, option(options, "args"))?;
    Ok(prepared(url, method, headers, Some(body)))
}
