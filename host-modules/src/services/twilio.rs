//! `twilio`: Twilio's request shape, HTTP Basic auth over form-encoded bodies, the account SID in
//! the path.

use base64::Engine;
use nodetool_protocol::value::Value;

use super::{
    Target, encode_component, form_body, header_value, method_of, on_origin, prepared,
    require_string,
};
use crate::error::HostError;
use crate::limits::{js_string, option, options_of};

/// The API version every Account resource path carries.
pub const ACCOUNT_API_VERSION: &str = "2010-04-01";

/// `request({ accountSid, authToken, path, method="GET", params?, query?,
/// host="api.twilio.com" })` -> a prepared request. A `path` without a leading `/` is an Account
/// resource, under `/2010-04-01/Accounts/<sid>/`; one with it is used as written, on `host`
/// (another Twilio product: `lookups.twilio.com`). `params` are the form body of a write and
/// the query of a `GET` or `DELETE`.
pub fn request(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "twilio.request";
    let options = options_of(args.first());
    let account_sid = require_string(AT, options, "accountSid")?;
    let auth_token = require_string(AT, options, "authToken")?;
    let path = require_string(AT, options, "path")?;
    let method = method_of(AT, options, "GET")?;
    let host = option(options, "host").map_or_else(|| "api.twilio.com".into(), js_string);
    let twilio_host = host.strip_suffix(".twilio.com").is_some_and(|name| {
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-'))
    });
    if !twilio_host {
        // The host is not quoted: whatever the body put there stays out of logs.
        return Err(HostError::invalid(format!(
            "{AT}: host must be a twilio.com host, such as api.twilio.com or lookups.twilio.com"
        )));
    }
    let base = url::Url::parse(&format!("https://{host}"))
        .map_err(|_| HostError::invalid(format!("{AT}: host must be a twilio.com host")))?;
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!(
            "/{ACCOUNT_API_VERSION}/Accounts/{}/{path}",
            encode_component(account_sid)
        )
    };
    let mut target = Target::new(on_origin(AT, &base, &path)?);
    let credentials = base64::engine::general_purpose::STANDARD
        .encode(format!("{account_sid}:{auth_token}").as_bytes());
    let mut headers = vec![(
        "Authorization",
        header_value(AT, "authToken", format!("Basic {credentials}"))?,
    )];
    if method == "GET" || method == "DELETE" {
        target.params.with_query(option(options, "params"));
        target.params.with_query(option(options, "query"));
        return Ok(prepared(target.finish(AT)?, method, headers, None));
    }
    target.params.with_query(option(options, "query"));
    headers.push(("Content-Type", "application/x-www-form-urlencoded".into()));
    let body = form_body(AT, option(options, "params"))?;
    Ok(prepared(target.finish(AT)?, method, headers, Some(body)))
}
