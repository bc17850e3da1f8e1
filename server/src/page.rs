//! The Packages page: plain HTML, CSS and JavaScript compiled into the binary (`include_str!`),
//! so serving it needs no build step and no network. It reads the same API any client does.

use axum::http::{HeaderName, HeaderValue, header};
use axum::response::IntoResponse;

const INDEX: &str = include_str!("../page/index.html");
const SCRIPT: &str = include_str!("../page/app.js");
const STYLE: &str = include_str!("../page/style.css");

/// Everything the page loads comes from this server; SKILL.md text is rendered as text nodes,
/// and the policy stops anything else even if a bug let markup through. `'wasm-unsafe-eval'`
/// lets the browser runner compile WebAssembly (QuickJS itself, and WASM packs); it allows no
/// JavaScript evaluation. The runner's workers are same-origin scripts under `/web/`.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    let headers: [(HeaderName, HeaderValue); 4] = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
    ];
    (headers, body)
}

/// `GET /`.
pub async fn index() -> impl IntoResponse {
    asset("text/html; charset=utf-8", INDEX)
}

/// `GET /assets/app.js`.
pub async fn script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /assets/style.css`.
pub async fn style() -> impl IntoResponse {
    asset("text/css; charset=utf-8", STYLE)
}
