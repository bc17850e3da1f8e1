//! Headless Chromium driven over the DevTools protocol: what the browser tests and `cargo xtask
//! fixtures --browser` share. A minimal client (one WebSocket to the browser, one flattened
//! session to the page) with the flags this machine needs (no background networking, no
//! component updates: the network is closed) and a fresh profile per launch.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

/// The Chromium to drive: `NODETOOL_CHROMIUM`, else `chromium` or `chromium-browser` on
/// `PATH` (Debian's package).
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("NODETOOL_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    /// The DevTools connection.
    pub cdp: Cdp,
}

impl Browser {
    /// Starts `binary` headless with a fresh profile and connects to it; `window` sets the
    /// window size (width, height).
    pub fn launch(binary: &Path, window: Option<(u32, u32)>) -> Result<Browser, String> {
        let profile = tempfile::tempdir().map_err(|e| format!("a browser profile dir: {e}"))?;
        let mut child = Command::new(binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                "--remote-debugging-port=0",
            ])
            .args(window.map(|(w, h)| format!("--window-size={w},{h}")))
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            // Chromium (its crash reporter) and dconf write under `$HOME/.config` and
            // `$HOME/.cache` whatever the profile: they get the profile's directory instead.
            .env("HOME", profile.path())
            .env("XDG_CACHE_HOME", profile.path().join("cache"))
            .env("XDG_CONFIG_HOME", profile.path().join("config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        // Chromium writes the port and the browser endpoint's path here once it listens.
        let active = profile.path().join("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(60);
        let (port, path) = loop {
            if let Ok(text) = std::fs::read_to_string(&active) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    break (port.trim().to_string(), path.trim().to_string());
                }
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err("chromium never opened its DevTools port".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let cdp = match Cdp::connect(&format!("127.0.0.1:{port}"), &path) {
            Ok(cdp) => cdp,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        Ok(Browser {
            child,
            _profile: profile,
            cdp,
        })
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.cdp.call("Browser.close", json!({}));
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal DevTools protocol client: one WebSocket to the browser, one flattened session to
/// the page.
pub struct Cdp {
    socket: WebSocket<TcpStream>,
    next_id: u64,
    session: Option<String>,
}

impl Cdp {
    fn connect(address: &str, path: &str) -> Result<Cdp, String> {
        let stream =
            TcpStream::connect(address).map_err(|e| format!("connect to DevTools: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(180)))
            .map_err(|e| format!("set a read timeout: {e}"))?;
        let url = format!("ws://{address}{path}");
        let (socket, _) = tungstenite::client(url.as_str(), stream)
            .map_err(|e| format!("DevTools handshake: {e}"))?;
        Ok(Cdp {
            socket,
            next_id: 0,
            session: None,
        })
    }

    /// Sends one command (to the page session once attached) and waits for its answer,
    /// skipping events.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = &self.session
            && !method.starts_with("Browser.")
            && !method.starts_with("Target.")
        {
            message["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .map_err(|e| format!("{method}: send: {e}"))?;
        loop {
            let frame = self
                .socket
                .read()
                .map_err(|e| format!("{method}: read: {e}"))?;
            let Message::Text(text) = frame else { continue };
            let answer: Value =
                serde_json::from_str(text.as_str()).map_err(|e| format!("{method}: {e}"))?;
            if answer["id"] != json!(id) {
                continue;
            }
            if let Some(error) = answer.get("error") {
                return Err(format!("{method}: {error}"));
            }
            return Ok(answer["result"].clone());
        }
    }

    /// Opens a page and attaches to it.
    pub fn open_page(&mut self) -> Result<(), String> {
        let target = self.call("Target.createTarget", json!({ "url": "about:blank" }))?;
        let attached = self.call(
            "Target.attachToTarget",
            json!({ "targetId": target["targetId"], "flatten": true }),
        )?;
        self.session = attached["sessionId"].as_str().map(str::to_string);
        if self.session.is_none() {
            return Err(format!("no DevTools session: {attached}"));
        }
        self.call("Page.enable", json!({}))?;
        Ok(())
    }

    /// Evaluates an expression in the page (awaiting a promise) and returns its value.
    pub fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let answer = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        )?;
        if let Some(exception) = answer.get("exceptionDetails") {
            return Err(format!("the page threw: {exception}"));
        }
        Ok(answer["result"]["value"].clone())
    }
}
