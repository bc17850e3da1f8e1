//! `cargo bench -p nodetool-host-modules --bench fabric` (run by `cargo xtask bench data` after
//! `--bench data`): `fabric.renderSVG` (a scene to SVG text), `fabric.render` (a scene to PNG)
//! and `render` of an SVG document, beside the reference's library (Fabric.js 6 on node-canvas:
//! `canvas.toSVG()`, `canvas.toDataURL()`, `loadSVGFromString` then `toDataURL`) on the same
//! inputs.
//!
//! The inputs are made here, deterministically: `shapes` (800x600, 200 rects, circles,
//! ellipses, triangles and lines, rotated and stroked), `text` (800x600, 40 text objects),
//! `paths` (800x600, 50 closed cubic paths of 40 segments) and `svg-icons` (an SVG document of
//! 120 icons: groups, `<use>`, paths, a gradient). Figures are the median of `BENCH_RUNS` (15)
//! calls after 3 warm-ups, of the host implementations called directly (the reference's are its
//! library calls, likewise without the sandbox crossing).
//!
//! The reference needs `fabric` and its native `canvas` (built from source: its prebuilt
//! binaries come from GitHub). It is looked for in `NODETOOL_BENCH_FABRIC_DIR` or
//! `target/bench-fabric` (`node_modules/fabric`), installed by name there, never in the repo:
//! `apt-get install libcairo2-dev libpango1.0-dev libjpeg-dev libgif-dev librsvg2-dev`, then
//! `npm_config_nodedir=/usr npm install fabric@6 canvas@3 jsdom` in that directory. Without it
//! (or without `node`) the bench says so and prints ours alone.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use nodetool_host_modules::implementation;
use nodetool_protocol::value::Value;

const BENCH_RUNS: usize = 15;
const WARMUPS: usize = 3;

/// A small deterministic generator (xorshift), so both sides get the same scenes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % 1_000_000) as f64 / 1_000_000.0
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        (lo + (hi - lo) * self.next()).round()
    }
    fn color(&mut self) -> String {
        format!(
            "rgb({},{},{})",
            self.range(0.0, 255.0),
            self.range(0.0, 255.0),
            self.range(0.0, 255.0)
        )
    }
}

fn shapes() -> serde_json::Value {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut objects = Vec::new();
    for i in 0..200 {
        let common = serde_json::json!({
            "left": r.range(0.0, 760.0), "top": r.range(0.0, 560.0),
            "fill": r.color(), "stroke": r.color(), "strokeWidth": r.range(1.0, 4.0),
            "angle": r.range(0.0, 90.0), "opacity": 0.8,
        });
        let mut o = match i % 5 {
            0 => {
                serde_json::json!({ "type": "rect", "width": r.range(10.0, 120.0), "height": r.range(10.0, 120.0), "rx": 4, "ry": 4 })
            }
            1 => serde_json::json!({ "type": "circle", "radius": r.range(5.0, 60.0) }),
            2 => {
                serde_json::json!({ "type": "ellipse", "rx": r.range(5.0, 60.0), "ry": r.range(5.0, 40.0) })
            }
            3 => {
                serde_json::json!({ "type": "triangle", "width": r.range(10.0, 80.0), "height": r.range(10.0, 80.0) })
            }
            _ => {
                serde_json::json!({ "type": "line", "x1": 0, "y1": 0, "x2": r.range(10.0, 200.0), "y2": r.range(10.0, 200.0) })
            }
        };
        if let (Some(o), Some(c)) = (o.as_object_mut(), common.as_object()) {
            for (k, v) in c {
                o.insert(k.clone(), v.clone());
            }
        }
        objects.push(o);
    }
    serde_json::json!({ "width": 800, "height": 600, "backgroundColor": "#ffffff", "objects": objects })
}

fn text() -> serde_json::Value {
    let mut r = Rng(0x2545_f491_4f6c_dd1d);
    let words = [
        "Quarterly",
        "revenue",
        "grew",
        "in",
        "every",
        "region",
        "Sales",
        "forecast",
    ];
    let objects: Vec<serde_json::Value> = (0..40)
        .map(|i| {
            let line: Vec<&str> = (0..4).map(|j| words[(i * 3 + j) % words.len()]).collect();
            serde_json::json!({
                "type": "text", "text": line.join(" "), "left": r.range(0.0, 500.0),
                "top": r.range(0.0, 560.0), "fontSize": r.range(12.0, 36.0), "fill": r.color(),
            })
        })
        .collect();
    serde_json::json!({ "width": 800, "height": 600, "backgroundColor": "#f8f8f8", "objects": objects })
}

fn paths() -> serde_json::Value {
    let mut r = Rng(0x1234_5678_9abc_def1);
    let objects: Vec<serde_json::Value> = (0..50)
        .map(|_| {
            let (cx, cy) = (r.range(50.0, 750.0), r.range(50.0, 550.0));
            let mut d = format!("M {cx} {cy}");
            for _ in 0..40 {
                d.push_str(&format!(
                    " C {} {} {} {} {} {}",
                    cx + r.range(-60.0, 60.0),
                    cy + r.range(-60.0, 60.0),
                    cx + r.range(-60.0, 60.0),
                    cy + r.range(-60.0, 60.0),
                    cx + r.range(-50.0, 50.0),
                    cy + r.range(-50.0, 50.0)
                ));
            }
            d.push_str(" Z");
            serde_json::json!({ "type": "path", "path": d, "fill": r.color(), "stroke": "#000000", "strokeWidth": 1, "opacity": 0.7 })
        })
        .collect();
    serde_json::json!({ "width": 800, "height": 600, "backgroundColor": "#ffffff", "objects": objects })
}

fn svg_icons() -> String {
    let mut r = Rng(0x0bad_cafe_f00d_d00d);
    let mut s = String::from(
        "<svg xmlns='http://www.w3.org/2000/svg' xmlns:xlink='http://www.w3.org/1999/xlink' width='800' height='600' viewBox='0 0 800 600'>\
         <defs><linearGradient id='g' x1='0' y1='0' x2='1' y2='1'><stop offset='0' stop-color='#ff8800'/><stop offset='1' stop-color='#0044ff'/></linearGradient>\
         <g id='star'><path d='M10 0 L13 7 L20 7 L14 12 L16 20 L10 15 L4 20 L6 12 L0 7 L7 7 Z'/></g></defs>\
         <rect width='800' height='600' fill='#ffffff'/>",
    );
    for i in 0..120 {
        let (x, y) = ((i % 15) as f64 * 52.0 + 10.0, (i / 15) as f64 * 72.0 + 10.0);
        s.push_str(&format!(
            "<g transform='translate({x} {y}) rotate({} 20 20)'>\
             <circle cx='20' cy='20' r='18' fill='url(#g)' stroke='{}' stroke-width='2'/>\
             <rect x='8' y='8' width='24' height='24' rx='5' fill='{}' opacity='0.6'/>\
             <use xlink:href='#star' x='10' y='10' fill='{}'/></g>",
            r.range(0.0, 45.0),
            r.color(),
            r.color(),
            r.color()
        ));
    }
    s.push_str("</svg>");
    s
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn time(f: impl Fn()) -> Duration {
    for _ in 0..WARMUPS {
        f();
    }
    median(
        (0..BENCH_RUNS)
            .map(|_| {
                let started = Instant::now();
                f();
                started.elapsed()
            })
            .collect(),
    )
}

/// The reference's script: for each case, the median milliseconds of `toSVG` and `toDataURL`
/// on a StaticCanvas loaded from the scene, and of `loadSVGFromString` + `toDataURL` for the
/// SVG document.
const PEER: &str = r#"
import { StaticCanvas, loadSVGFromString, version } from "fabric/node";
import { readFileSync } from "node:fs";
const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const RUNS = Number(process.argv[3]), WARM = Number(process.argv[4]);
async function median(f) {
  for (let i = 0; i < WARM; i++) await f();
  const t = [];
  for (let i = 0; i < RUNS; i++) { const s = process.hrtime.bigint(); await f(); t.push(Number(process.hrtime.bigint() - s) / 1e6); }
  t.sort((a, b) => a - b);
  return t[Math.floor(t.length / 2)];
}
async function canvasOf(scene) {
  const c = new StaticCanvas(null, { width: scene.width, height: scene.height, backgroundColor: scene.backgroundColor });
  // Fabric reads the background from `background` (it clears the constructor's): both paint it.
  await c.loadFromJSON({ ...scene, background: scene.backgroundColor });
  c.renderAll();
  return c;
}
const out = { version, results: {} };
for (const [name, scene] of Object.entries(cases.scenes)) {
  out.results[`${name}/renderSVG`] = await median(async () => { const c = await canvasOf(scene); c.toSVG(); c.dispose(); });
  out.results[`${name}/render`] = await median(async () => { const c = await canvasOf(scene); c.toDataURL({ format: "png" }); c.dispose(); });
}
out.results["svg-icons/render"] = await median(async () => {
  const { objects, options } = await loadSVGFromString(cases.svg);
  const c = new StaticCanvas(null, { width: options.width, height: options.height });
  c.add(...objects.filter(Boolean));
  c.renderAll();
  c.toDataURL({ format: "png" });
  c.dispose();
});
process.stdout.write(JSON.stringify(out));
"#;

fn main() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default();
    let scenes = [("shapes", shapes()), ("text", text()), ("paths", paths())];
    let svg = svg_icons();

    let call = |export: &str, args: &[Value]| {
        let f = implementation("fabric", export).unwrap_or_else(|| panic!("fabric.{export}"));
        if let Err(e) = f(args) {
            panic!("{e:?}")
        }
    };
    let mut ours: Vec<(String, Duration)> = Vec::new();
    for (name, scene) in &scenes {
        let v = Value::from_json(scene.clone());
        ours.push((
            format!("{name}/renderSVG"),
            time(|| call("renderSVG", std::slice::from_ref(&v))),
        ));
        ours.push((
            format!("{name}/render"),
            time(|| call("render", std::slice::from_ref(&v))),
        ));
    }
    let svg_value = Value::String(svg.clone());
    ours.push((
        "svg-icons/render".into(),
        time(|| call("render", std::slice::from_ref(&svg_value))),
    ));

    let dir = std::env::var_os("NODETOOL_BENCH_FABRIC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target/bench-fabric"));
    let peer = if !dir.join("node_modules/fabric").is_dir() {
        Err(format!(
            "the reference (npm fabric with its native canvas) is not installed in {}; see this bench's doc comment",
            dir.display()
        ))
    } else {
        let cases = serde_json::json!({
            "scenes": scenes.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<serde_json::Map<String, serde_json::Value>>(),
            "svg": svg,
        });
        let written = std::fs::write(dir.join("fabric-bench-cases.json"), cases.to_string())
            .and_then(|_| std::fs::write(dir.join("fabric-bench.mjs"), PEER));
        match written {
            Err(e) => Err(format!("could not write the peer's inputs: {e}")),
            Ok(()) => match Command::new("node")
                .args([
                    "fabric-bench.mjs",
                    "fabric-bench-cases.json",
                    &BENCH_RUNS.to_string(),
                    &WARMUPS.to_string(),
                ])
                .current_dir(&dir)
                .output()
            {
                Err(e) => Err(format!("node could not run: {e}")),
                Ok(out) if !out.status.success() => Err(format!(
                    "the peer failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                )),
                Ok(out) => serde_json::from_slice::<serde_json::Value>(&out.stdout)
                    .map_err(|e| format!("the peer's answer is not JSON: {e}")),
            },
        }
    };

    println!(
        "fabric (median of {BENCH_RUNS} after {WARMUPS} warm-ups; ours: resvg, called directly)"
    );
    match &peer {
        Ok(p) => println!(
            "{:<22} {:>12} {:>16} {:>8}",
            "case",
            "ours",
            format!("fabric {}", p["version"].as_str().unwrap_or("?")),
            "ratio"
        ),
        Err(why) => println!("reference not run: {why}"),
    }
    for (name, ours) in &ours {
        let ours_ms = ours.as_secs_f64() * 1000.0;
        match peer.as_ref().ok().and_then(|p| p["results"][name].as_f64()) {
            Some(theirs) => println!(
                "{name:<22} {ours_ms:>9.2} ms {theirs:>13.2} ms {:>7.1}x",
                theirs / ours_ms
            ),
            None => println!("{name:<22} {ours_ms:>9.2} ms"),
        }
    }
}
