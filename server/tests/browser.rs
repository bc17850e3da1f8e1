//! The Packages page in a real headless Chromium (Debian's `chromium`, which `.ci/run`
//! installs), driven over the DevTools protocol: load the page, see the packs, read a pack's
//! SKILL.md, run a body that imports a pack on the server and in the browser and read both
//! results side by side, run a failing body and see its line marked; and the playground's
//! browser side running a body that imports a guest pack, a compiled npm pack, a host pack and
//! a WASM pack. Screenshots (the viewport) go to `<target>/tmp/screenshots/`.
//!
//! Without a Chromium on the machine (or without a built runner, `web/dist`) a test says so and
//! passes, except under CI (`CI` set), where either missing is a failure.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use nodetool_tests::chromium::{Browser, find_chromium};
use serde_json::{Value, json};
use support::{ServerProcess, World, must};

/// The shared DevTools client (`nodetool_tests::chromium`) with the page helpers these tests
/// use; every failure panics with what was being done.
struct Page(Browser);

impl Page {
    /// Chromium with a fresh profile and one page at 1280 × 1000.
    fn open(chromium: &Path) -> Page {
        let mut browser = must(
            Browser::launch(chromium, Some((1280, 900))),
            "start chromium",
        );
        must(browser.cdp.open_page(), "open a page");
        let mut page = Page(browser);
        page.must(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false }),
        );
        page
    }

    fn must(&mut self, method: &str, params: Value) -> Value {
        self.0
            .cdp
            .call(method, params)
            .unwrap_or_else(|e| panic!("DevTools: {e}"))
    }

    /// Evaluates an expression in the page and returns its value.
    fn eval(&mut self, expression: &str) -> Value {
        self.0
            .cdp
            .eval(expression)
            .unwrap_or_else(|e| panic!("{expression}: {e}"))
    }

    /// Evaluates until the value is truthy (not null, false, 0 or "").
    fn wait_for(&mut self, what: &str, expression: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let value = self.eval(expression);
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!(0)
                && value != json!("");
            if truthy {
                return value;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until a playground side has an outcome (its state is set and not "running").
    fn outcome(&mut self, id: &str) -> Value {
        self.wait_for(
            &format!("the outcome in #{id}"),
            &format!(
                "(() => {{ const s = document.getElementById('{id}').dataset.state || ''; return s === 'running' ? '' : s; }})()"
            ),
        )
    }

    fn screenshot(&mut self, name: &str) -> PathBuf {
        let shot = self.must("Page.captureScreenshot", json!({ "format": "png" }));
        let bytes = must(
            base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap_or("")),
            "decode the screenshot",
        );
        assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
        must(std::fs::create_dir_all(&dir), "create the screenshot dir");
        let path = dir.join(name);
        must(std::fs::write(&path, bytes), "write a screenshot");
        eprintln!("screenshot: {}", path.display());
        path
    }
}

/// A JavaScript string literal of `text`.
fn js(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// Chromium, and whether the browser runner is built; `None` (after saying why) when a test
/// cannot run here. Under CI both must exist.
fn chromium_and_runner() -> Option<(PathBuf, bool)> {
    let Some(chromium) = find_chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must provide chromium (.ci/run installs it)"
        );
        eprintln!(
            "skipped: no chromium on this machine (set NODETOOL_CHROMIUM or install chromium)"
        );
        return None;
    };
    let built = Path::new(nodetool_server::DEFAULT_WEB_DIR)
        .join("runner.js")
        .is_file();
    assert!(
        built || std::env::var_os("CI").is_none(),
        "CI must build the browser runner (.ci/run runs npm run build --prefix web)"
    );
    Some((chromium, built))
}

#[test]
fn the_packages_page_shows_the_packs_and_runs_a_body_in_chromium() {
    let Some((chromium, runner_built)) = chromium_and_runner() else {
        return;
    };
    let world = World::shipped_packs();
    world.trust(&["@nodetool-ai/sandbox-geo"]);
    let server = ServerProcess::start(&world, &[]);
    let mut page = Page::open(&chromium);
    let cdp = &mut page;
    cdp.must("Page.navigate", json!({ "url": server.url("/") }));

    // The packs.
    let count = cdp.wait_for(
        "the pack list",
        "document.querySelector('#packs')?.dataset.loaded ? document.querySelectorAll('article.pack').length : 0",
    );
    assert!(count.as_u64().is_some_and(|n| n >= 6), "{count}");
    let geo = cdp.eval(
        r#"(() => {
            const card = document.querySelector('article.pack[data-pack="@nodetool-ai/sandbox-geo"]');
            if (!card) return null;
            return {
                mode: card.dataset.mode,
                modules: [...card.querySelectorAll('tr[data-specifier]')].map((r) => r.dataset.specifier),
                consent: document.getElementById('consent').textContent,
            };
        })()"#,
    );
    assert_eq!(geo["mode"], json!("trusted"), "{geo}");
    assert_eq!(
        geo["modules"],
        json!([
            "@nodetool-ai/sandbox-geo",
            "@nodetool-ai/sandbox-geo/polyline"
        ])
    );
    assert_eq!(geo["consent"], json!(nodetool_server::CONSENT));

    cdp.screenshot("packages-top.png");

    // Its SKILL.md, rendered.
    cdp.eval(
        r#"document.querySelector('article.pack[data-pack="@nodetool-ai/sandbox-geo"] details.docs').open = true"#,
    );
    let heading = cdp.wait_for(
        "the rendered SKILL.md",
        r#"[...document.querySelectorAll('article.pack[data-pack="@nodetool-ai/sandbox-geo"] .markdown h4')].map((h) => h.textContent).join('\n')"#,
    );
    assert!(
        heading.as_str().is_some_and(|h| h.contains("haversine")),
        "{heading}"
    );
    cdp.eval(
        r#"document.querySelector('article.pack[data-pack="@nodetool-ai/sandbox-geo"]').scrollIntoView()"#,
    );
    cdp.screenshot("packages.png");

    // A body that imports a pack.
    let body = "import { haversine } from \"@nodetool-ai/sandbox-geo\";\nconsole.log(\"measuring\");\nreturn { km: Math.round(haversine(inputs.a, inputs.b) * 10) / 10 };";
    let input = r#"{"a": {"lat": 48.8566, "lon": 2.3522}, "b": {"lat": 51.5074, "lon": -0.1278}}"#;
    cdp.eval(&format!(
        "document.getElementById('code').value = {}; document.getElementById('input').value = {}; document.getElementById('run').click(); true",
        js(body),
        js(input)
    ));
    let state = cdp.outcome("outcome");
    assert_eq!(
        state,
        json!("ok"),
        "{}",
        cdp.eval("document.getElementById('outcome').textContent")
    );
    let result = cdp.eval("document.getElementById('result').textContent");
    let result: Value = must(
        serde_json::from_str(result.as_str().unwrap_or("")),
        "the result is JSON",
    );
    assert_eq!(result, json!({ "km": 343.6 }));
    let logs =
        cdp.eval("[...document.querySelectorAll('#outcome .log')].map((l) => l.textContent)");
    assert_eq!(logs, json!(["log measuring"]));
    // The same body in the browser, side by side.
    let state = cdp.outcome("browser-outcome");
    if runner_built {
        assert_eq!(
            state,
            json!("ok"),
            "{}",
            cdp.eval("document.getElementById('browser-outcome').textContent")
        );
        let in_browser = cdp.eval("document.getElementById('browser-result').textContent");
        let in_browser: Value = must(
            serde_json::from_str(in_browser.as_str().unwrap_or("")),
            "the browser's result is JSON",
        );
        assert_eq!(in_browser, result);
        let logs = cdp.eval(
            "[...document.querySelectorAll('#browser-outcome .log')].map((l) => l.textContent)",
        );
        assert_eq!(logs, json!(["log measuring"]));
        let agreement = cdp.wait_for(
            "the agreement line",
            "document.getElementById('agreement').textContent",
        );
        assert_eq!(
            agreement,
            json!(
                "The server and the browser agree: the same result, or the same error code, message and position."
            )
        );
    } else {
        assert_eq!(state, json!("rejected"));
    }
    cdp.screenshot("run-result.png");

    // A failing body: the error, with its line marked.
    cdp.eval(&format!(
        "document.getElementById('outcome').dataset.state = ''; document.getElementById('code').value = {}; document.getElementById('input').value = '{{}}'; document.getElementById('run').click(); true",
        js("const a = 1;\nconst b = a.missing.deeper;\nreturn b;")
    ));
    let state = cdp.outcome("outcome");
    assert_eq!(state, json!("error"));
    if runner_built {
        assert_eq!(cdp.outcome("browser-outcome"), json!("error"));
        let error = cdp.eval("document.getElementById('browser-error').textContent");
        assert!(
            error
                .as_str()
                .is_some_and(|e| e.starts_with("runtime-error")
                    && e.contains("TypeError: cannot read property 'deeper' of undefined")),
            "{error}"
        );
        // quickjs-ng 0.12 (the registry's WebAssembly build) places an error thrown in a
        // declaration's initializer at the start of the enclosing function; the runner leaves
        // such a position out rather than mark the wrong line (web/src/sandbox.js).
        let marked = cdp.eval(
            "(() => { const m = document.querySelector('#browser-outcome .line.marked'); return m && m.dataset.line; })()",
        );
        assert_eq!(marked, Value::Null);
    }
    let marked = cdp.eval(
        "(() => { const m = document.querySelector('#outcome .line.marked'); return m && { line: m.dataset.line, text: m.textContent, error: document.getElementById('error').textContent }; })()",
    );
    assert_eq!(marked["line"], json!("2"), "{marked}");
    assert!(
        marked["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("runtime-error")),
        "{marked}"
    );
    cdp.screenshot("run-error.png");
}

/// Compiles the shipped yaml pack's npm entry into `cache_home`'s compiler cache, as
/// `nodetool packs compile` would, so the server serves it. `false` when its library is not
/// installed (`npm ci --ignore-scripts --prefix packs`; CI always has it).
fn compile_yaml(world: &World, cache_home: &Path) -> bool {
    let roots = must(world.sources().roots(), "the search roots");
    let Some(entry) = nodetool_compiler::npm_entries(&roots)
        .into_iter()
        .find(|e| e.specifier == "@nodetool-ai/sandbox-yaml")
    else {
        return false;
    };
    if !entry.pack_dir.join("../../node_modules/js-yaml").is_dir()
        && !support::repo().join("packs/node_modules/js-yaml").is_dir()
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must install the packs' libraries"
        );
        return false;
    }
    let cache = nodetool_compiler::Cache::new(nodetool_compiler::cache_root(cache_home));
    let compiler = must(nodetool_compiler::Compiler::new(cache), "a compiler");
    let report = compiler.compile(&entry.request(), &mut |_| {});
    assert!(
        report.bytes().is_some(),
        "js-yaml did not compile: {:?}",
        report.message()
    );
    true
}

#[test]
fn the_playground_runs_guest_host_and_wasm_packs_in_the_browser() {
    let Some((chromium, runner_built)) = chromium_and_runner() else {
        return;
    };
    if !runner_built {
        eprintln!("skipped: the browser runner is not built (npm run build --prefix web)");
        return;
    }
    let world = World::shipped_packs();
    world.install_fixture("@fixture/wasm-scalar");
    let yaml = compile_yaml(&world, &world.tmp.path().join("cache"));
    let server = ServerProcess::start(&world, &[]);
    let mut page = Page::open(&chromium);
    let cdp = &mut page;
    cdp.must("Page.navigate", json!({ "url": server.url("/") }));
    cdp.wait_for(
        "the pack list",
        "document.querySelector('#packs')?.dataset.loaded || ''",
    );

    let mut body = String::from(
        "import { haversine } from \"@nodetool-ai/sandbox-geo\";\n\
         import Papa from \"@nodetool-ai/sandbox-csv\";\n\
         import { add, sumF32, scale } from \"@fixture/wasm-scalar\";\n",
    );
    if yaml {
        body.push_str("import { load } from \"@nodetool-ai/sandbox-yaml\";\n");
    }
    body.push_str(
        "const rows = await Papa.parse(\"city,km\\nParis,0\\nLondon,344\");\n\
         return {\n  km: Math.round(haversine(inputs.a, inputs.b)),\n  rows,\n  wasm: [await add(2, 40), await sumF32(0.5, 0.25), await scale(2)],\n",
    );
    if yaml {
        body.push_str("  yaml: load(\"a: 1\\nb: [x, y]\"),\n");
    }
    body.push_str("};");
    let input = r#"{"a": {"lat": 48.8566, "lon": 2.3522}, "b": {"lat": 51.5074, "lon": -0.1278}}"#;
    cdp.eval(&format!(
        "document.getElementById('code').value = {}; document.getElementById('input').value = {}; document.getElementById('run').click(); true",
        js(&body),
        js(input)
    ));
    let state = cdp.outcome("browser-outcome");
    assert_eq!(
        state,
        json!("ok"),
        "{}",
        cdp.eval("document.getElementById('browser-outcome').textContent")
    );
    let in_browser = cdp.eval("document.getElementById('browser-result').textContent");
    let in_browser: Value = must(
        serde_json::from_str(in_browser.as_str().unwrap_or("")),
        "the browser's result is JSON",
    );
    let mut expected = json!({
        "km": 344,
        "rows": [{ "city": "Paris", "km": "0" }, { "city": "London", "km": "344" }],
        "wasm": [42, 0.75, 5],
    });
    if yaml {
        expected["yaml"] = json!({ "a": 1, "b": ["x", "y"] });
    }
    assert_eq!(in_browser, expected);
    // The server ran the same body to the same result.
    assert_eq!(cdp.outcome("outcome"), json!("ok"));
    let on_server = cdp.eval("document.getElementById('result').textContent");
    let on_server: Value = must(
        serde_json::from_str(on_server.as_str().unwrap_or("")),
        "the server's result is JSON",
    );
    assert_eq!(on_server, expected);
    cdp.eval("document.getElementById('playground').scrollIntoView()");
    cdp.screenshot("playground-both.png");

    // A WASM call the scalar contract refuses, in the browser, with the Rust host's message.
    cdp.eval(&format!(
        "document.getElementById('code').value = {}; document.getElementById('run').click(); true",
        js("import { add } from \"@fixture/wasm-scalar\";\nreturn await add(1.5, 2);")
    ));
    assert_eq!(cdp.outcome("browser-outcome"), json!("error"));
    let error = cdp.eval("document.getElementById('browser-error').textContent");
    assert!(
        error.as_str().is_some_and(|e| e.starts_with("wasm-error")
            && e.contains(
                "@fixture/wasm-scalar: add argument 1 expects i32, received the non-integer 1.5"
            )),
        "{error}"
    );
    assert_eq!(cdp.outcome("outcome"), json!("error"));
    let on_server = cdp.eval("document.getElementById('error').textContent");
    assert!(
        on_server
            .as_str()
            .is_some_and(|e| e.contains("expects i32, received the non-integer 1.5")),
        "{on_server}"
    );
}

#[test]
fn with_a_token_the_page_asks_once_and_both_sides_run_and_reload() {
    let Some((chromium, runner_built)) = chromium_and_runner() else {
        return;
    };
    let world = World::shipped_packs();
    let token = "browser-test-token-0123456789";
    let file = world.tmp.path().join("token");
    must(std::fs::write(&file, token), "write the token");
    let file = file.display().to_string();
    let server = ServerProcess::start(&world, &["--token-file", &file]);
    let mut page = Page::open(&chromium);
    let cdp = &mut page;
    cdp.must("Page.navigate", json!({ "url": server.url("/") }));

    // The first /api/ answer is 401: the page shows its token form.
    cdp.wait_for(
        "the token form",
        "(() => { const f = document.getElementById('token-form'); return f && !f.hidden; })()",
    );
    cdp.screenshot("token-form.png");
    cdp.eval(&format!(
        "document.getElementById('token').value = {}; document.getElementById('token-form').requestSubmit(); true",
        js(token)
    ));
    let count = cdp.wait_for(
        "the pack list",
        "document.querySelector('#packs')?.dataset.loaded ? document.querySelectorAll('article.pack').length : 0",
    );
    assert!(count.as_u64().is_some_and(|n| n >= 6), "{count}");
    assert_eq!(
        cdp.eval("sessionStorage.getItem('nodetool-server-token')"),
        json!(token)
    );
    assert_eq!(
        cdp.eval("document.getElementById('token-form').hidden"),
        json!(true)
    );

    // Reload is an operator action: the token is enough.
    cdp.eval("document.getElementById('reload').click(); true");
    let status = cdp.wait_for(
        "the reload",
        "(() => { const t = document.getElementById('reload-status').textContent; return t.startsWith('Reloaded') || t.includes('(') ? t : ''; })()",
    );
    assert!(
        status.as_str().is_some_and(|s| s.starts_with("Reloaded")),
        "{status}"
    );

    // Both sides run a body that imports a guest pack and a host pack (the browser's host calls
    // and deliveries carry the token too).
    let body = "import { haversine } from \"@nodetool-ai/sandbox-geo\";\nimport Papa from \"@nodetool-ai/sandbox-csv\";\nconst rows = await Papa.parse(\"a,b\\n1,2\");\nreturn { km: Math.round(haversine({lat: 0, lon: 0}, {lat: 0, lon: 1})), rows };";
    cdp.eval(&format!(
        "document.getElementById('code').value = {}; document.getElementById('input').value = '{{}}'; document.getElementById('run').click(); true",
        js(body)
    ));
    assert_eq!(
        cdp.outcome("outcome"),
        json!("ok"),
        "{}",
        cdp.eval("document.getElementById('outcome').textContent")
    );
    let expected = json!({ "km": 111, "rows": [{ "a": "1", "b": "2" }] });
    let on_server = cdp.eval("document.getElementById('result').textContent");
    let on_server: Value = must(
        serde_json::from_str(on_server.as_str().unwrap_or("")),
        "the server's result is JSON",
    );
    assert_eq!(on_server, expected);
    if runner_built {
        assert_eq!(
            cdp.outcome("browser-outcome"),
            json!("ok"),
            "{}",
            cdp.eval("document.getElementById('browser-outcome').textContent")
        );
        let in_browser = cdp.eval("document.getElementById('browser-result').textContent");
        let in_browser: Value = must(
            serde_json::from_str(in_browser.as_str().unwrap_or("")),
            "the browser's result is JSON",
        );
        assert_eq!(in_browser, expected);
    }
    cdp.screenshot("token-playground.png");
    drop(page);

    // Without a token, on loopback, the page's reload carries the header the server asks for.
    let open = ServerProcess::start(&world, &[]);
    let mut page = Page::open(&chromium);
    let cdp = &mut page;
    cdp.must("Page.navigate", json!({ "url": open.url("/") }));
    cdp.wait_for(
        "the pack list",
        "document.querySelector('#packs')?.dataset.loaded || ''",
    );
    cdp.eval("document.getElementById('reload').click(); true");
    let status = cdp.wait_for(
        "the reload",
        "(() => { const t = document.getElementById('reload-status').textContent; return t.startsWith('Reloaded') || t.includes('(') ? t : ''; })()",
    );
    assert!(
        status.as_str().is_some_and(|s| s.starts_with("Reloaded")),
        "{status}"
    );
}

/// The page's states: one legend instead of a sentence per card, READY notes folded and not
/// counted, the filter box, a copy button per import line, an input error shown as an error,
/// a code frame scrolled to a caret far along its line, the empty state naming the next
/// command, and a default body that runs with no pack at all.
#[test]
fn the_packages_page_states_in_chromium() {
    let Some((chromium, runner_built)) = chromium_and_runner() else {
        return;
    };
    let world = World::shipped_packs();
    let server = ServerProcess::start(&world, &[]);
    let mut page = Page::open(&chromium);
    let cdp = &mut page;
    cdp.must("Page.navigate", json!({ "url": server.url("/") }));
    let count = cdp.wait_for(
        "the pack list",
        "document.querySelector('#packs')?.dataset.loaded ? document.querySelectorAll('article.pack').length : 0",
    );
    let total = count.as_u64().unwrap_or(0);
    assert!(total >= 6, "{count}");
    let layout = cdp.eval(
        r#"(() => ({
            legend: document.querySelectorAll('#legend dt').length,
            sentences: document.querySelectorAll('article.pack .mode-sentence').length,
            labels: [...new Set([...document.querySelectorAll('article.pack .mode')].map((m) => m.textContent))],
            readyListed: document.querySelectorAll('ul.diagnostics:not(details.ready-notes ul) li.level-ready').length,
            copies: document.querySelectorAll('tr[data-specifier] button.copy').length,
            rows: document.querySelectorAll('tr[data-specifier]').length,
            copyText: document.querySelector('tr[data-specifier="@nodetool-ai/sandbox-geo"] button.copy')?.dataset.copy,
        }))()"#,
    );
    assert_eq!(layout["legend"], 2, "{layout}");
    assert_eq!(layout["sentences"], 0, "{layout}");
    assert_eq!(
        layout["labels"],
        json!(["not allowed for agents"]),
        "{layout}"
    );
    assert_eq!(layout["readyListed"], 0, "{layout}");
    assert_eq!(layout["copies"], layout["rows"], "{layout}");
    assert_eq!(
        layout["copyText"],
        json!("import * as mod from \"@nodetool-ai/sandbox-geo\";")
    );
    // READY notes (nothing to do) fold under their own summary and are not counted.
    let folded = cdp.eval(
        r#"(() => {
            const parts = diagnosticList([
                { status: "ready", code: "npm-module-compiled", message: "compiled", advice: "Nothing to do." },
                { status: "warning", code: "skill-missing", message: "no SKILL.md", advice: "Add one." },
                { status: "ready", code: "npm-module-compiled", message: "compiled too", advice: "Nothing to do." },
            ]).filter(Boolean);
            const holder = document.createElement("div");
            holder.append(...parts);
            return {
                listed: holder.querySelector(":scope > ul.diagnostics").dataset.count,
                listedCodes: [...holder.querySelectorAll(":scope > ul.diagnostics li")].map((l) => l.dataset.code),
                summary: holder.querySelector("details.ready-notes summary").textContent,
                open: holder.querySelector("details.ready-notes").open,
                readyAdvice: holder.querySelectorAll("details.ready-notes .advice").length,
            };
        })()"#,
    );
    assert_eq!(folded["listed"], "1", "{folded}");
    assert_eq!(folded["listedCodes"], json!(["skill-missing"]), "{folded}");
    assert_eq!(
        folded["summary"], "2 ready note(s): nothing to do",
        "{folded}"
    );
    assert_eq!(folded["open"], false, "{folded}");
    assert_eq!(folded["readyAdvice"], 0, "{folded}");
    cdp.screenshot("states-legend.png");

    // The filter keeps the cards that match every word.
    cdp.eval("(() => { const f = document.getElementById('filter'); f.value = 'geo'; f.dispatchEvent(new Event('input')); return true; })()");
    let filtered = cdp.eval(
        r#"(() => ({
            shown: [...document.querySelectorAll('article.pack')].filter((c) => !c.hidden).map((c) => c.dataset.pack),
            count: document.getElementById('filter-count').textContent,
        }))()"#,
    );
    assert_eq!(
        filtered["shown"],
        json!(["@nodetool-ai/sandbox-geo"]),
        "{filtered}"
    );
    assert_eq!(filtered["count"], json!(format!("1 of {total} pack(s)")));
    cdp.screenshot("states-filter.png");
    cdp.eval("(() => { const f = document.getElementById('filter'); f.value = 'no such pack at all'; f.dispatchEvent(new Event('input')); return true; })()");
    assert_eq!(
        cdp.eval("[...document.querySelectorAll('article.pack')].filter((c) => !c.hidden).length"),
        json!(0)
    );

    // Input that is not a JSON object is an error beside the box; nothing runs.
    cdp.eval("document.getElementById('input').value = '{bad'; document.getElementById('run').click(); true");
    let input_error = cdp.eval(
        r#"(() => { const e = document.getElementById('input-error'); return { hidden: e.hidden, text: e.textContent, role: e.getAttribute('role'), invalid: document.getElementById('input').getAttribute('aria-invalid'), state: document.getElementById('outcome').dataset.state || '' }; })()"#,
    );
    assert_eq!(input_error["hidden"], false, "{input_error}");
    assert_eq!(input_error["role"], "alert");
    assert_eq!(input_error["invalid"], "true");
    assert_eq!(input_error["state"], "", "{input_error}");
    assert!(
        input_error["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("inputs is not valid")),
        "{input_error}"
    );
    cdp.eval("document.getElementById('playground').scrollIntoView()");
    cdp.screenshot("states-input-error.png");

    // The default body runs with no pack, and both sides agree.
    cdp.eval("document.getElementById('input').value = '{}'; document.getElementById('outcome').dataset.state = ''; document.getElementById('run').click(); true");
    assert_eq!(cdp.outcome("outcome"), json!("ok"));
    assert_eq!(
        cdp.eval("document.getElementById('result').textContent"),
        json!("{\n  \"words\": 5,\n  \"longest\": \"sandbox\"\n}")
    );
    assert_eq!(
        cdp.eval("document.getElementById('input-error').hidden"),
        json!(true)
    );
    if runner_built {
        assert_eq!(cdp.outcome("browser-outcome"), json!("ok"));
        let agreement = cdp.wait_for(
            "the agreement line",
            "document.getElementById('agreement').textContent",
        );
        assert!(
            agreement
                .as_str()
                .is_some_and(|a| a.starts_with("The server and the browser agree")),
            "{agreement}"
        );
    }

    // An error far along a long line: the frame is scrolled so the caret shows.
    let long = format!(
        "const pad = \"{}\"; throw new Error(\"far\");",
        "x".repeat(400)
    );
    cdp.eval(&format!(
        "document.getElementById('outcome').dataset.state = ''; document.getElementById('code').value = {}; document.getElementById('run').click(); true",
        js(&long)
    ));
    assert_eq!(cdp.outcome("outcome"), json!("error"));
    let frame = cdp.eval(
        r#"(() => { const f = document.querySelector('#outcome pre.source'); const m = f.querySelector('.caret-mark'); const a = f.getBoundingClientRect(); const b = m.getBoundingClientRect(); return { scrolled: f.scrollLeft, visible: b.left >= a.left && b.right <= a.right, width: Math.round(a.width), side: Math.round(document.getElementById('outcome').getBoundingClientRect().width) }; })()"#,
    );
    assert!(
        frame["scrolled"].as_f64().is_some_and(|s| s > 0.0),
        "{frame}"
    );
    assert_eq!(frame["visible"], true, "{frame}");
    assert_eq!(
        frame["width"], frame["side"],
        "the frame is as wide as its side: {frame}"
    );
    cdp.eval("document.getElementById('outcome').scrollIntoView()");
    cdp.screenshot("states-caret.png");

    // A throw from inside functions: both sides show the same short stack.
    if runner_built {
        let nested = "function inner(v) {\n  throw new RangeError(`out of range: ${v}`);\n}\nfunction outer(v) {\n  return inner(v + 1);\n}\nreturn [1].map(outer);";
        cdp.eval(&format!(
            "document.getElementById('outcome').dataset.state = ''; document.getElementById('browser-outcome').dataset.state = ''; document.getElementById('code').value = {}; document.getElementById('run').click(); true",
            js(nested)
        ));
        assert_eq!(cdp.outcome("outcome"), json!("error"));
        assert_eq!(cdp.outcome("browser-outcome"), json!("error"));
        let stacks = cdp.eval(
            "[document.querySelector('#outcome pre.stack')?.textContent, document.querySelector('#browser-outcome pre.stack')?.textContent]",
        );
        assert_eq!(
            stacks[0],
            json!(
                "at inner (body:2:3)\nat outer (body:5:20)\nat map (native)\nat <anonymous> (body:7:16)"
            ),
            "{stacks}"
        );
        assert_eq!(stacks[0], stacks[1], "{stacks}");
        cdp.screenshot("states-stack.png");
    }
    drop(server);

    // No pack at all: the empty state names the commands that add one.
    let empty = World::empty();
    let server = ServerProcess::start(&empty, &[]);
    cdp.must("Page.navigate", json!({ "url": server.url("/") }));
    let text = cdp.wait_for(
        "the empty state",
        "document.getElementById('empty-state')?.textContent || ''",
    );
    let text = text.as_str().unwrap_or_default();
    assert!(text.contains("nodetool packs install NAME"), "{text}");
    assert!(text.contains("nodetool packs new @scope/name"), "{text}");
    cdp.screenshot("states-empty.png");
}

#[test]
fn the_browser_runner_reaches_the_document_modules_through_the_host_module_route() {
    let Some((chromium, runner_built)) = chromium_and_runner() else {
        return;
    };
    if !runner_built {
        eprintln!("skipped: the browser runner is not built (npm run build --prefix web)");
        return;
    }
    let world = World::shipped_packs();
    let server = ServerProcess::start(&world, &[]);
    let mut page = Page::open(&chromium);
    let cdp = &mut page;
    cdp.must("Page.navigate", json!({ "url": server.url("/") }));
    cdp.wait_for(
        "the pack list",
        "document.querySelector('#packs')?.dataset.loaded || ''",
    );
    // Bytes cross the route both ways: built on the host, handed back, read on the host.
    let body = "import { build } from \"@nodetool-ai/sandbox-docx\";\n\
         import { extractRawText } from \"@nodetool-ai/sandbox-mammoth\";\n\
         import pdflib from \"@nodetool-ai/sandbox-pdflib\";\n\
         import { extractPages } from \"@nodetool-ai/sandbox-pdf\";\n\
         const docx = await build({ elements: [{ type: \"heading\", text: \"Hello\" }] });\n\
         const pdf = await pdflib.build({ pages: [{ items: [{ type: \"text\", text: \"Page one\", x: 72, y: 72 }] }] });\n\
         return { docx: await extractRawText(docx), pdf: await extractPages(pdf), bytes: docx instanceof Uint8Array };";
    cdp.eval(&format!(
        "document.getElementById('code').value = {}; document.getElementById('input').value = '{{}}'; document.getElementById('run').click(); true",
        js(body)
    ));
    assert_eq!(
        cdp.outcome("browser-outcome"),
        json!("ok"),
        "{}",
        cdp.eval("document.getElementById('browser-error').textContent")
    );
    let in_browser = cdp.eval("document.getElementById('browser-result').textContent");
    let in_browser: Value = must(
        serde_json::from_str(in_browser.as_str().unwrap_or("")),
        "the browser's result is JSON",
    );
    let expected = json!({
        "docx": "Hello\n\n",
        "pdf": [{ "index": 0, "pageNumber": 1, "text": "Page one" }],
        "bytes": true,
    });
    assert_eq!(in_browser, expected);
    assert_eq!(cdp.outcome("outcome"), json!("ok"));
    let on_server = cdp.eval("document.getElementById('result').textContent");
    let on_server: Value = must(
        serde_json::from_str(on_server.as_str().unwrap_or("")),
        "the server's result is JSON",
    );
    assert_eq!(on_server, expected);
}
