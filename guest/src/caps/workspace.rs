//! The `workspace` global: a frozen object whose async methods the run's authority performs.

use std::sync::Arc;

use nodetool_broker::{Authority, Request, WorkspaceMethod, WorkspaceReply, WorkspaceRequest};
use rquickjs::function::Opt;
use rquickjs::{Array, Ctx, Function, Object, Promise};
use rquickjs::{TypedArray, Value as JsValue};

use super::{Settle, quoted, settled, start_call, type_of};
use crate::engine::bytes_of;

pub(super) fn workspace_object<'js>(
    ctx: &Ctx<'js>,
    authority: &Arc<dyn Authority>,
    freeze: &Function<'js>,
) -> rquickjs::Result<Object<'js>> {
    let object = Object::new(ctx.clone())?;
    for method in WorkspaceMethod::ALL {
        let authority = Arc::clone(authority);
        let function = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>,
                  first: Opt<JsValue<'js>>,
                  second: Opt<JsValue<'js>>|
                  -> rquickjs::Result<Promise<'js>> {
                let label = format!("workspace.{}", method.name());
                match workspace_request(method, first.0, second.0) {
                    Ok(request) => start_call(
                        &ctx,
                        &authority,
                        &label,
                        Request::Workspace(request),
                        Settle::Workspace(method),
                    ),
                    Err(message) => settled(&ctx, Err(format!("{label}: {message}"))),
                }
            },
        )?;
        freeze.call::<_, ()>((function.clone(),))?;
        object.set(method.name(), function)?;
    }
    freeze.call::<_, ()>((object.clone(),))?;
    Ok(object)
}

/// Reads a workspace call's arguments, or says what is wrong with them (after the label).
fn workspace_request(
    method: WorkspaceMethod,
    first: Option<JsValue<'_>>,
    second: Option<JsValue<'_>>,
) -> Result<WorkspaceRequest, String> {
    let path = match first.as_ref() {
        None => None,
        Some(v) if v.is_undefined() => None,
        Some(v) => match v.as_string() {
            Some(s) => Some(s.to_string().map_err(|_| {
                "the path is not a valid string (it has an unpaired surrogate)".to_string()
            })?),
            None => {
                return Err(format!(
                    "the path must be a string, not {}",
                    type_of(Some(v))
                ));
            }
        },
    };
    let path = match (path, method) {
        (Some(path), _) => path,
        (None, WorkspaceMethod::List) => String::new(),
        (None, _) => return Err("the path must be a string, not undefined".to_string()),
    };
    let shown = if path.is_empty() {
        quoted(".")
    } else {
        quoted(&path)
    };
    let data = match method {
        WorkspaceMethod::WriteText => match second.as_ref().and_then(|v| v.as_string()) {
            Some(s) => s
                .to_string()
                .map_err(|_| {
                    format!(
                        "{shown} cannot be written: the text is not a valid string (it has an unpaired surrogate)"
                    )
                })?
                .into_bytes(),
            None => {
                return Err(format!(
                    "{shown} cannot be written: the text must be a string, not {}",
                    type_of(second.as_ref())
                ));
            }
        },
        WorkspaceMethod::WriteBytes => match second.as_ref().and_then(bytes_of) {
            Some(bytes) => bytes,
            None => {
                return Err(format!(
                    "{shown} cannot be written: the bytes must be a Uint8Array, another typed array or an ArrayBuffer, not {}",
                    type_of(second.as_ref())
                ));
            }
        },
        _ => Vec::new(),
    };
    Ok(WorkspaceRequest { method, path, data })
}

pub(super) fn workspace_value<'js>(
    ctx: &Ctx<'js>,
    reply: &WorkspaceReply,
) -> rquickjs::Result<JsValue<'js>> {
    Ok(match reply {
        WorkspaceReply::Text(text) => rquickjs::String::from_str(ctx.clone(), text)?.into_value(),
        WorkspaceReply::Bytes(bytes) => {
            TypedArray::<u8>::new_copy(ctx.clone(), bytes)?.into_value()
        }
        WorkspaceReply::Written => JsValue::new_undefined(ctx.clone()),
        WorkspaceReply::Exists(found) => JsValue::new_bool(ctx.clone(), *found),
        WorkspaceReply::Entries(entries) => {
            let array = Array::new(ctx.clone())?;
            for (i, entry) in entries.iter().enumerate() {
                let item = Object::new(ctx.clone())?;
                item.set("name", entry.name.as_str())?;
                item.set("type", if entry.directory { "directory" } else { "file" })?;
                item.set("size", entry.size as f64)?;
                array.set(i, item)?;
            }
            array.into_value()
        }
    })
}
