//! The `fetch` global and the `Response` it settles into.

use std::collections::BTreeMap;
use std::sync::Arc;

use nodetool_broker::{Authority, FetchRequest, FetchResponse, Request};
use rquickjs::function::Opt;
use rquickjs::object::Property;
use rquickjs::{ArrayBuffer, Ctx, Function, Object, Promise};
use rquickjs::{TypedArray, Value as JsValue};

use super::{Settle, rejected_with, settled, start_call, type_of};
use crate::engine::bytes_of;

pub(super) fn fetch_function<'js>(
    ctx: &Ctx<'js>,
    authority: &Arc<dyn Authority>,
) -> rquickjs::Result<Function<'js>> {
    let authority = Arc::clone(authority);
    Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              url: Opt<JsValue<'js>>,
              init: Opt<JsValue<'js>>|
              -> rquickjs::Result<Promise<'js>> {
            match fetch_request(url.0, init.0) {
                Ok(Ok(request)) => start_call(
                    &ctx,
                    &authority,
                    "fetch",
                    Request::Fetch(request),
                    Settle::Fetch,
                ),
                Ok(Err(message)) => settled(&ctx, Err(message)),
                // A getter on `init` threw: that error is the rejection.
                Err(e) if e.is_exception() => rejected_with(&ctx, ctx.catch()),
                Err(e) => Err(e),
            }
        },
    )
}

/// Reads `fetch`'s arguments as text and bytes (what they mean is the authority's to check).
/// `Ok(Err(message))` is a refusal; `Err` is a JavaScript exception raised reading `init`.
fn fetch_request<'js>(
    url: Option<JsValue<'js>>,
    init: Option<JsValue<'js>>,
) -> rquickjs::Result<Result<FetchRequest, String>> {
    let url = match url.as_ref().and_then(|v| v.as_string()) {
        Some(s) => match s.to_string() {
            Ok(s) => s,
            Err(_) => return Ok(Err("fetch: the URL is not a valid string".into())),
        },
        None => {
            return Ok(Err(format!(
                "fetch: the URL must be a string, not {}",
                type_of(url.as_ref())
            )));
        }
    };
    let mut request = FetchRequest {
        url,
        ..FetchRequest::default()
    };
    let Some(init) = init.filter(|v| !v.is_undefined() && !v.is_null()) else {
        return Ok(Ok(request));
    };
    let Some(init) = init.as_object().filter(|_| !init.is_array()) else {
        return Ok(Err(format!(
            "fetch: the options must be an object, not {}",
            init.type_name()
        )));
    };
    let given: JsValue = init.get("method")?;
    if !given.is_undefined() {
        let Some(text) = given.as_string().and_then(|s| s.to_string().ok()) else {
            return Ok(Err(format!(
                "fetch: the method must be a string, not {}",
                given.type_name()
            )));
        };
        request.method = Some(text);
    }
    let given: JsValue = init.get("headers")?;
    if !given.is_undefined() && !given.is_null() {
        let Some(object) = given.as_object().filter(|_| !given.is_array()) else {
            return Ok(Err(
                "fetch: the headers must be an object of name: value pairs".into(),
            ));
        };
        for name in object.keys::<String>() {
            // One past the authority's cap is enough for it to refuse the request.
            if request.headers.len() > nodetool_broker::fetch::MAX_REQUEST_HEADERS {
                break;
            }
            let name = name?;
            let value: JsValue = object.get(name.as_str())?;
            let text = if let Some(s) = value.as_string() {
                s.to_string().ok()
            } else if let Some(n) = value.as_number() {
                Some(number_text(n))
            } else {
                value.as_bool().map(|b| b.to_string())
            };
            let Some(text) = text else {
                return Ok(Err(format!(
                    "fetch: the \"{}\" header must be a string, not {}",
                    name.to_ascii_lowercase(),
                    value.type_name()
                )));
            };
            request.headers.push((name, text));
        }
    }
    let given: JsValue = init.get("body")?;
    if !given.is_undefined() && !given.is_null() {
        let bytes = match given.as_string() {
            Some(s) => match s.to_string() {
                Ok(s) => s.into_bytes(),
                Err(_) => return Ok(Err("fetch: the body is not a valid string".into())),
            },
            None => match bytes_of(&given) {
                Some(bytes) => bytes,
                None => {
                    return Ok(Err(format!(
                        "fetch: the body must be a string, a typed array or an ArrayBuffer, not {}",
                        given.type_name()
                    )));
                }
            },
        };
        request.body = Some(bytes);
    }
    Ok(Ok(request))
}

/// A number as JavaScript's `String(n)` would write the common cases.
fn number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Builds the guest's Response for a finished fetch.
pub(super) fn build_response<'js>(
    ctx: &Ctx<'js>,
    response: &FetchResponse,
) -> rquickjs::Result<JsValue<'js>> {
    let final_url = response.url.as_str();
    let host = url::Url::parse(final_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let object = Object::new(ctx.clone())?;
    let field =
        |key: &str, value: JsValue<'js>| object.prop(key, Property::from(value).enumerable());
    field(
        "status",
        JsValue::new_int(ctx.clone(), i32::from(response.status)),
    )?;
    field(
        "statusText",
        rquickjs::String::from_str(ctx.clone(), &response.status_text)?.into_value(),
    )?;
    field(
        "ok",
        JsValue::new_bool(ctx.clone(), (200..300).contains(&response.status)),
    )?;
    field(
        "url",
        rquickjs::String::from_str(ctx.clone(), final_url)?.into_value(),
    )?;
    let mut merged: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in &response.headers {
        merged
            .entry(name.to_ascii_lowercase())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(value);
            })
            .or_insert_with(|| value.clone());
    }
    let headers = Object::new(ctx.clone())?;
    for (name, value) in &merged {
        // Defined, not assigned: a header named `__proto__` is just a header.
        headers.prop(name.as_str(), Property::from(value.as_str()).enumerable())?;
    }
    field("headers", headers.into_value())?;

    // The body lives in the guest's heap (counted against its memory limit), not the host's.
    let body = ArrayBuffer::new_copy(ctx.clone(), &response.body)?;
    let reader = |read: BodyRead| -> rquickjs::Result<Function<'js>> {
        let body = body.clone();
        let host = host.clone();
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>| -> rquickjs::Result<Promise<'js>> {
                read_body(&ctx, &body, &host, read)
            },
        )
    };
    field("text", reader(BodyRead::Text)?.into_value())?;
    field("json", reader(BodyRead::Json)?.into_value())?;
    field("bytes", reader(BodyRead::Bytes)?.into_value())?;
    field("arrayBuffer", reader(BodyRead::ArrayBuffer)?.into_value())?;
    Ok(object.into_value())
}

#[derive(Debug, Clone, Copy)]
enum BodyRead {
    Text,
    Json,
    Bytes,
    ArrayBuffer,
}

/// One of a Response's body methods: a Promise of the body read as asked. The body may be read
/// any number of times.
fn read_body<'js>(
    ctx: &Ctx<'js>,
    body: &ArrayBuffer<'js>,
    host: &str,
    read: BodyRead,
) -> rquickjs::Result<Promise<'js>> {
    // The buffer is private to the Response's methods, so it cannot have been detached.
    let body = bytes_of(body.as_value()).unwrap_or_default();
    let body = body.as_slice();
    match read {
        // As the web's fetch does, malformed UTF-8 becomes U+FFFD.
        BodyRead::Text => settled(
            ctx,
            Ok(
                rquickjs::String::from_str(ctx.clone(), &String::from_utf8_lossy(body))?
                    .into_value(),
            ),
        ),
        BodyRead::Bytes => settled(
            ctx,
            Ok(TypedArray::<u8>::new_copy(ctx.clone(), body)?.into_value()),
        ),
        BodyRead::ArrayBuffer => settled(
            ctx,
            Ok(ArrayBuffer::new_copy(ctx.clone(), body)?.into_value()),
        ),
        BodyRead::Json => {
            // The engine's own JSON parser: what the guest did to the `JSON` global is
            // irrelevant here.
            let text = String::from_utf8_lossy(body).into_owned();
            match ctx.json_parse(text) {
                Ok(value) => settled(ctx, Ok(value)),
                Err(e) if e.is_exception() => rejected_with(ctx, ctx.catch()),
                Err(_) => settled(
                    ctx,
                    Err(format!("fetch: the response from {host} is not valid JSON")),
                ),
            }
        }
    }
}
