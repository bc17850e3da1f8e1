//! Capabilities a run is granted: absent unless granted, and shared with every pack module the
//! body imports (importing a module means trusting it with the node's capabilities).

use std::collections::BTreeMap;

use rquickjs::{Ctx, Exception, Function, Object, Promise};

/// What a run may reach beyond pure computation. Every field defaults to "not granted".
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    /// Secrets `getSecret(name)` may return, by name. `None`: no `getSecret` global at all.
    pub secrets: Option<BTreeMap<String, String>>,
}

/// Installs the granted capabilities as globals.
pub(crate) fn install<'js>(
    ctx: &Ctx<'js>,
    caps: &Capabilities,
    freeze: &Function<'js>,
) -> rquickjs::Result<()> {
    let _ = freeze;
    if let Some(secrets) = &caps.secrets {
        let secrets = secrets.clone();
        let get_secret = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, name: rquickjs::Value<'js>| -> rquickjs::Result<Promise<'js>> {
                let (promise, resolve, reject) = Promise::new(&ctx)?;
                let name = name.as_string().and_then(|s| s.to_string().ok());
                match name.as_deref().and_then(|n| secrets.get(n).map(|v| (n, v))) {
                    Some((_, value)) => resolve.call::<_, ()>((value.clone(),))?,
                    None => {
                        let message = match name {
                            Some(n) => {
                                format!("getSecret: the secret \"{n}\" was not granted to this run")
                            }
                            None => "getSecret: the secret name must be a string".to_string(),
                        };
                        reject.call::<_, ()>((Exception::from_message(ctx.clone(), &message)?,))?;
                    }
                }
                Ok(promise)
            },
        )?;
        ctx.globals().set("getSecret", get_secret)?;
    }
    let _ = Object::new(ctx.clone())?;
    Ok(())
}
