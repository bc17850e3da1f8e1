//! The document host modules against the field's own tools, both ways: what `docx`, `pptxgen`
//! and `pdflib` write opens in python-docx, python-pptx, pypdf and poppler's `pdftotext` with the
//! same content, and what those tools (and ebooklib, and poppler's `pdfunite`) write reads back
//! with `mammoth`, `pptx`, `pdf` and `epub`.
//!
//! The tools are the CI machine's, installed by `.ci/run`: poppler-utils, python3-docx,
//! python3-pypdf and python3-ebooklib from Debian, and python-pptx (which Debian does not
//! package) from PyPI into Debian's python3 at the version in
//! `host-modules/tests/interop-requirements.txt`, and LibreOffice Writer and Impress headless
//! (`soffice`) for one round trip per format.
//! On a machine without them each test says what is missing and passes, unless `CI` is set, where
//! a missing tool fails the test.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use nodetool_host_modules::implementation;
use nodetool_protocol::value::Value;

fn call(id: &str, export: &str, args: &[Value]) -> Result<Value, String> {
    let f =
        implementation(id, export).unwrap_or_else(|| panic!("{id}.{export} is not implemented"));
    f(args).map_err(nodetool_host_modules::HostError::into_message)
}

fn bytes_of(v: Result<Value, String>) -> Vec<u8> {
    match v {
        Ok(Value::Bytes(b)) => b,
        other => panic!("expected bytes, got {other:?}"),
    }
}

fn text_of(v: Result<Value, String>) -> String {
    match v {
        Ok(Value::String(s)) => s,
        other => panic!("expected a string, got {other:?}"),
    }
}

fn s(v: &str) -> Value {
    Value::String(v.into())
}

fn obj(members: &[(&str, Value)]) -> Value {
    Value::Object(
        members
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

/// Whether a tool is here; without it, a note (and a failure under CI).
fn have(what: &str, probe: &mut Command) -> bool {
    let ok = probe
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let note = format!(
            "{what} is not installed (Debian: poppler-utils python3-docx python3-pypdf python3-ebooklib; python-pptx: /usr/bin/python3 -m pip install --break-system-packages -r host-modules/tests/interop-requirements.txt)"
        );
        assert!(std::env::var_os("CI").is_none(), "{note}");
        eprintln!("skipped: {note}");
    }
    ok
}

/// The interpreters to try, in order: `NODETOOL_INTEROP_PYTHON`, Debian's (where python3-docx,
/// python3-pypdf and python3-ebooklib install), then the first `python3` on PATH.
fn pythons() -> Vec<String> {
    let mut out: Vec<String> = std::env::var("NODETOOL_INTEROP_PYTHON")
        .into_iter()
        .collect();
    out.extend(["/usr/bin/python3".to_string(), "python3".to_string()]);
    out
}

/// An interpreter that can import `module`, or `None` (with a note, and a failure under CI).
fn python_with(module: &str) -> Option<String> {
    let found = pythons().into_iter().find(|p| {
        Command::new(p)
            .args(["-c", &format!("import {module}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() {
        have(
            &format!("the Python module {module}"),
            &mut Command::new("false"),
        );
    }
    found
}

/// Runs a Python script with `input` on stdin and returns its stdout.
fn run_python(python: &str, script: &str, input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input)
            .unwrap_or_else(|e| panic!("stdin: {e}"));
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("python: {e}"));
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A file in a fresh temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, data: &[u8]) -> TempFile {
        let dir = std::env::temp_dir().join(format!(
            "nodetool-interop-{}-{}",
            std::process::id(),
            name.replace('.', "-")
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let path = dir.join(name);
        std::fs::write(&path, data).unwrap_or_else(|e| panic!("{e}"));
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn sample_pdf() -> Vec<u8> {
    let text = |t: &str, y: f64| {
        obj(&[
            ("type", s("text")),
            ("text", s(t)),
            ("x", Value::Number(72.0)),
            ("y", Value::Number(y)),
        ])
    };
    bytes_of(call(
        "pdflib",
        "build",
        &[obj(&[(
            "pages",
            Value::Array(vec![
                obj(&[(
                    "items",
                    Value::Array(vec![
                        text("Quarterly report", 72.0),
                        text("Revenue grew 12 percent.", 100.0),
                    ]),
                )]),
                obj(&[("items", Value::Array(vec![text("Second page", 72.0)]))]),
            ]),
        )])],
    ))
}

#[test]
fn pdflib_output_reads_in_pdftotext_and_pypdf() {
    let pdf = sample_pdf();
    if have(
        "pdftotext (poppler-utils)",
        Command::new("pdftotext").arg("-v"),
    ) {
        let file = TempFile::new("ours.pdf", &pdf);
        let out = Command::new("pdftotext")
            .arg(&file.0)
            .arg("-")
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let pages: Vec<Vec<&str>> = text
            .split('\u{c}')
            .map(|p| p.lines().map(str::trim).filter(|l| !l.is_empty()).collect())
            .filter(|p: &Vec<&str>| !p.is_empty())
            .collect();
        assert_eq!(
            pages,
            [
                vec!["Quarterly report", "Revenue grew 12 percent."],
                vec!["Second page"]
            ]
        );
    }
    if let Some(py) = python_with("pypdf") {
        let out = run_python(
            &py,
            "import sys, io, pypdf\nr = pypdf.PdfReader(io.BytesIO(sys.stdin.buffer.read()))\nprint(len(r.pages))\nfor p in r.pages: print(repr(p.extract_text()))",
            &pdf,
        );
        let out = String::from_utf8_lossy(&out);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "2");
        assert!(
            lines[1].contains("Quarterly report") && lines[1].contains("Revenue grew 12 percent."),
            "{out}"
        );
        assert!(lines[2].contains("Second page"), "{out}");
    }
}

#[test]
fn pdfs_poppler_and_pypdf_write_read_back_with_ours() {
    let pdf = sample_pdf();
    if have(
        "pdfunite (poppler-utils)",
        Command::new("pdfunite").arg("-v"),
    ) {
        let a = TempFile::new("a.pdf", &pdf);
        let b = TempFile::new(
            "b.pdf",
            &bytes_of(call(
                "pdflib",
                "build",
                &[obj(&[(
                    "pages",
                    Value::Array(vec![obj(&[(
                        "items",
                        Value::Array(vec![obj(&[
                            ("type", s("text")),
                            ("text", s("Appendix")),
                            ("x", Value::Number(72.0)),
                            ("y", Value::Number(72.0)),
                        ])]),
                    )])]),
                )])],
            )),
        );
        let out_dir = TempFile::new("united.txt", b"");
        let united = out_dir.0.with_file_name("united.pdf");
        let status = Command::new("pdfunite")
            .arg(&a.0)
            .arg(&b.0)
            .arg(&united)
            .status()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(status.success());
        let data = std::fs::read(&united).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            text_of(call("pdf", "extractText", &[Value::Bytes(data)])),
            "Quarterly report\nRevenue grew 12 percent.\n\nSecond page\n\nAppendix"
        );
    }
    if let Some(py) = python_with("pypdf") {
        // pypdf rewrites the file with its own object layout and metadata. (Its
        // `compress_content_streams` in Debian's 3.4.1 writes page content as a direct stream,
        // which no reader accepts, poppler included, so it is not used here.)
        let rewritten = run_python(
            &py,
            "import sys, io, pypdf\nr = pypdf.PdfReader(io.BytesIO(sys.stdin.buffer.read()))\nw = pypdf.PdfWriter()\nfor p in r.pages: w.add_page(p)\nw.add_metadata({'/Title': 'rewritten'})\nb = io.BytesIO(); w.write(b); sys.stdout.buffer.write(b.getvalue())",
            &pdf,
        );
        assert_eq!(
            text_of(call(
                "pdf",
                "extractText",
                &[Value::Bytes(rewritten.clone())]
            )),
            "Quarterly report\nRevenue grew 12 percent.\n\nSecond page"
        );
        let merged = bytes_of(call(
            "pdflib",
            "merge",
            &[Value::Array(vec![
                Value::Bytes(rewritten),
                Value::Bytes(pdf),
            ])],
        ));
        let out = run_python(
            &py,
            "import sys, io, pypdf\nr = pypdf.PdfReader(io.BytesIO(sys.stdin.buffer.read()))\nprint(len(r.pages))",
            &merged,
        );
        assert_eq!(String::from_utf8_lossy(&out).trim(), "4");
    }
}

fn sample_docx() -> Vec<u8> {
    bytes_of(call(
        "docx",
        "build",
        &[obj(&[
            (
                "properties",
                obj(&[("title", s("Interop")), ("author", s("NodeTool"))]),
            ),
            (
                "elements",
                Value::Array(vec![
                    obj(&[
                        ("type", s("heading")),
                        ("text", s("Title here")),
                        ("level", Value::Number(1.0)),
                    ]),
                    obj(&[
                        ("type", s("paragraph")),
                        (
                            "runs",
                            Value::Array(vec![
                                obj(&[("text", s("Bold")), ("bold", Value::Bool(true))]),
                                s(" then plain"),
                            ]),
                        ),
                    ]),
                    obj(&[
                        ("type", s("list")),
                        ("items", Value::Array(vec![s("apple"), s("pear")])),
                    ]),
                    obj(&[
                        ("type", s("table")),
                        (
                            "rows",
                            Value::Array(vec![
                                Value::Array(vec![s("a"), s("b")]),
                                Value::Array(vec![s("c"), s("d")]),
                            ]),
                        ),
                    ]),
                ]),
            ),
        ])],
    ))
}

#[test]
fn docx_output_opens_in_python_docx() {
    let Some(py) = python_with("docx") else {
        return;
    };
    let out = run_python(
        &py,
        "import sys, io, docx\nd = docx.Document(io.BytesIO(sys.stdin.buffer.read()))\nprint(d.core_properties.title, d.core_properties.author, sep='|')\nfor p in d.paragraphs: print(p.style.name, p.text, [r.bold for r in p.runs], sep='|')\nt = d.tables[0]\nprint([[c.text for c in row.cells] for row in t.rows])",
        &sample_docx(),
    );
    let out = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "Interop|NodeTool",
            "Heading 1|Title here|[None]",
            "Normal|Bold then plain|[True, None]",
            "List Paragraph|apple|[None]",
            "List Paragraph|pear|[None]",
            "Normal||[]",
            "[['a', 'b'], ['c', 'd']]",
        ],
        "{out}"
    );
}

#[test]
fn python_docx_output_reads_with_mammoth() {
    let Some(py) = python_with("docx") else {
        return;
    };
    let file = run_python(
        &py,
        "import sys, io, docx\nd = docx.Document()\nd.add_heading('Report', level=1)\np = d.add_paragraph('Plain and ')\np.add_run('bold').bold = True\nd.add_paragraph('first', style='List Bullet')\nd.add_paragraph('second', style='List Number')\nt = d.add_table(rows=1, cols=2)\nt.rows[0].cells[0].text = 'x'\nt.rows[0].cells[1].text = 'y'\nb = io.BytesIO(); d.save(b); sys.stdout.buffer.write(b.getvalue())",
        b"",
    );
    assert_eq!(
        text_of(call(
            "mammoth",
            "extractRawText",
            &[Value::Bytes(file.clone())]
        )),
        "Report\n\nPlain and bold\n\nfirst\n\nsecond\n\nx\n\ny\n\n"
    );
    let html = text_of(call("mammoth", "convertToHtml", &[Value::Bytes(file)]));
    assert_eq!(
        html,
        "<h1>Report</h1><p>Plain and <strong>bold</strong></p><ul><li>first</li></ul><ol><li>second</li></ol><table><tr><td><p>x</p></td><td><p>y</p></td></tr></table>"
    );
}

#[test]
fn pptxgen_output_opens_in_python_pptx() {
    let Some(py) = python_with("pptx") else {
        return;
    };
    let deck = bytes_of(call(
        "pptxgen",
        "build",
        &[obj(&[(
            "slides",
            Value::Array(vec![
                obj(&[
                    ("title", s("Hello")),
                    ("notes", s("speaker says hi")),
                    (
                        "items",
                        Value::Array(vec![obj(&[("type", s("text")), ("text", s("Body text"))])]),
                    ),
                ]),
                obj(&[
                    ("title", s("Table")),
                    (
                        "items",
                        Value::Array(vec![obj(&[
                            ("type", s("table")),
                            (
                                "rows",
                                Value::Array(vec![Value::Array(vec![s("k"), s("v")])]),
                            ),
                        ])]),
                    ),
                ]),
            ]),
        )])],
    ));
    let out = run_python(
        &py,
        "import sys, io, pptx\np = pptx.Presentation(io.BytesIO(sys.stdin.buffer.read()))\nfor s in p.slides:\n  title = s.shapes.title.text if s.shapes.title is not None else None\n  texts = [sh.text_frame.text for sh in s.shapes if sh.has_text_frame]\n  tables = [[[c.text for c in r.cells] for r in sh.table.rows] for sh in s.shapes if sh.has_table]\n  notes = s.notes_slide.notes_text_frame.text if s.has_notes_slide else None\n  print(title, texts, tables, notes, sep='|')",
        &deck,
    );
    let out = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "Hello|['Hello', 'Body text']|[]|speaker says hi",
            "Table|['Table']|[[['k', 'v']]]|None",
        ],
        "{out}"
    );
}

#[test]
fn python_pptx_output_reads_with_pptx() {
    let Some(py) = python_with("pptx") else {
        return;
    };
    let deck = run_python(
        &py,
        "import sys, io, pptx\np = pptx.Presentation()\ns = p.slides.add_slide(p.slide_layouts[0])\ns.shapes.title.text = 'Opening'\ns.placeholders[1].text = 'A subtitle'\ns.notes_slide.notes_text_frame.text = 'Remember to smile'\ns2 = p.slides.add_slide(p.slide_layouts[1])\ns2.shapes.title.text = 'Points'\ntf = s2.placeholders[1].text_frame\ntf.text = 'one'\ntf.add_paragraph().text = 'two'\nb = io.BytesIO(); p.save(b); sys.stdout.buffer.write(b.getvalue())",
        b"",
    );
    let slides = call("pptx", "extractSlides", &[Value::Bytes(deck.clone())]);
    let Ok(Value::Array(slides)) = slides else {
        panic!("{slides:?}")
    };
    let field = |v: &Value, key: &str| match v {
        Value::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
        _ => None,
    };
    assert_eq!(field(&slides[0], "title"), Some(s("Opening")));
    assert_eq!(field(&slides[0], "text"), Some(s("Opening\nA subtitle")));
    assert_eq!(field(&slides[0], "notes"), Some(s("Remember to smile")));
    assert_eq!(field(&slides[1], "text"), Some(s("Points\none\ntwo")));
    assert_eq!(
        text_of(call("pptx", "extractText", &[Value::Bytes(deck)])),
        "Opening\nA subtitle\n\nPoints\none\ntwo"
    );
}

#[test]
fn ebooklib_output_reads_with_epub() {
    let Some(py) = python_with("ebooklib") else {
        return;
    };
    let book = run_python(
        &py,
        "import sys, io, tempfile, os\nfrom ebooklib import epub\nb = epub.EpubBook()\nb.set_identifier('id-123')\nb.set_title('Interop Book')\nb.set_language('en')\nb.add_author('Grace Hopper')\nc1 = epub.EpubHtml(title='Intro', file_name='intro.xhtml', lang='en')\nc1.content = '<h1>Intro</h1><p>First paragraph.</p><p>Second one.</p>'\nc2 = epub.EpubHtml(title='Body', file_name='body.xhtml', lang='en')\nc2.content = '<h1>Body</h1><p>Main text &amp; more.</p>'\nb.add_item(c1); b.add_item(c2)\nb.toc = (epub.Link('intro.xhtml', 'Intro', 'intro'), epub.Link('body.xhtml', 'Body', 'body'))\nb.add_item(epub.EpubNcx()); b.add_item(epub.EpubNav())\nb.spine = ['nav', c1, c2]\nd = tempfile.mkdtemp(); path = os.path.join(d, 'b.epub')\nepub.write_epub(path, b)\nsys.stdout.buffer.write(open(path, 'rb').read())\nos.remove(path); os.rmdir(d)",
        b"",
    );
    let meta = call("epub", "metadata", &[Value::Bytes(book.clone())]);
    let Ok(Value::Object(meta)) = meta else {
        panic!("{meta:?}")
    };
    let get = |k: &str| {
        meta.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("title"), Some(s("Interop Book")));
    assert_eq!(get("creator"), Some(s("Grace Hopper")));
    assert_eq!(get("language"), Some(s("en")));
    let toc = call("epub", "tableOfContents", &[Value::Bytes(book.clone())]);
    let Ok(Value::Array(toc)) = toc else {
        panic!("{toc:?}")
    };
    let titles: Vec<Value> = toc
        .iter()
        .filter_map(|e| match e {
            Value::Object(m) => m.iter().find(|(k, _)| k == "title").map(|(_, v)| v.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(titles, [s("Intro"), s("Body")]);
    let text = text_of(call("epub", "extractText", &[Value::Bytes(book)]));
    assert!(
        text.ends_with("Intro\nFirst paragraph.\nSecond one.\n\nBody\nMain text & more."),
        "{text}"
    );
}

/// The drawing `pdflib.build` writes, as poppler renders it: the header band, the text's colour
/// and the ellipse sit where the description put them (top-left origin, points). The page at
/// 100 dpi, checked by eye, is kept as `host-modules/tests/artifacts/pdflib-sample-page-1.png`.
#[test]
fn pdflib_drawing_renders_in_pdftoppm() {
    if !have(
        "pdftoppm (poppler-utils)",
        Command::new("pdftoppm").arg("-v"),
    ) {
        return;
    }
    let num = Value::Number;
    let item = |members: &[(&str, Value)]| obj(members);
    let pdf = bytes_of(call(
        "pdflib",
        "build",
        &[obj(&[(
            "pages",
            Value::Array(vec![obj(&[
                ("width", num(400.0)),
                ("height", num(300.0)),
                (
                    "items",
                    Value::Array(vec![
                        item(&[
                            ("type", s("rect")),
                            ("x", num(0.0)),
                            ("y", num(0.0)),
                            ("width", num(400.0)),
                            ("height", num(50.0)),
                            ("fill", s("#2563eb")),
                        ]),
                        item(&[
                            ("type", s("text")),
                            ("x", num(20.0)),
                            ("y", num(14.0)),
                            ("size", num(20.0)),
                            ("bold", Value::Bool(true)),
                            ("color", s("#ffffff")),
                            ("text", s("Invoice No. 42")),
                        ]),
                        item(&[
                            ("type", s("ellipse")),
                            ("x", num(300.0)),
                            ("y", num(130.0)),
                            ("width", num(80.0)),
                            ("height", num(50.0)),
                            ("fill", s("#f59e0b")),
                            ("stroke", s("#000000")),
                        ]),
                    ]),
                ),
            ])]),
        )])],
    ));
    let file = TempFile::new("drawing.pdf", &pdf);
    let prefix = file.0.with_file_name("page");
    let status = Command::new("pdftoppm")
        .args(["-png", "-r", "72", "-singlefile"])
        .arg(&file.0)
        .arg(&prefix)
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success());
    let png = std::fs::read(prefix.with_extension("png")).unwrap_or_else(|e| panic!("{e}"));
    let picture = image::load_from_memory(&png)
        .unwrap_or_else(|e| panic!("{e}"))
        .to_rgb8();
    assert_eq!(picture.dimensions(), (400, 300));
    let near = |x: u32, y: u32, rgb: [u8; 3]| {
        let p = picture.get_pixel(x, y).0;
        p.iter().zip(rgb).all(|(a, b)| a.abs_diff(b) < 24)
    };
    assert!(near(380, 40, [0x25, 0x63, 0xeb]), "the header band");
    assert!(near(340, 155, [0xf5, 0x9e, 0x0b]), "the ellipse's fill");
    assert!(near(200, 280, [255, 255, 255]), "the page");
    // The white title is drawn over the band: some of its pixels are white.
    let white_in_band = (20..200)
        .flat_map(|x| (14..40).map(move |y| (x, y)))
        .filter(|&(x, y)| near(x, y, [255, 255, 255]))
        .count();
    assert!(
        white_in_band > 200,
        "{white_in_band} white pixels of title text"
    );
}

/// Converts `data` (a file named `name`) with LibreOffice headless to `format` and returns the
/// converted file, each conversion in its own directory and user profile.
/// `soffice` with its home, caches and configuration under `dir`: LibreOffice (and dconf)
/// write to `$HOME/.config` and `$HOME/.cache`, and a test writes only under its own
/// temporary directories.
fn soffice_in(dir: &std::path::Path) -> Command {
    let mut command = Command::new("soffice");
    command
        .env("HOME", dir)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_DATA_HOME", dir.join("data"));
    command
}

fn soffice(name: &str, data: &[u8], format: &str) -> Vec<u8> {
    let input = TempFile::new(name, data);
    let dir = input.0.parent().map(PathBuf::from).unwrap_or_default();
    let out = soffice_in(&dir)
        .arg(format!(
            "-env:UserInstallation=file://{}/profile",
            dir.display()
        ))
        .args([
            "--headless",
            "--norestore",
            "--convert-to",
            format,
            "--outdir",
        ])
        .arg(dir.join("out"))
        .arg(&input.0)
        .output()
        .unwrap_or_else(|e| panic!("soffice: {e}"));
    assert!(
        out.status.success(),
        "soffice: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let extension = format.split(':').next().unwrap_or(format);
    let path = dir.join("out").join(format!("{stem}.{extension}"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "soffice wrote no {}: {e} ({})",
            path.display(),
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn sample_pptx() -> Vec<u8> {
    bytes_of(call(
        "pptxgen",
        "build",
        &[obj(&[(
            "slides",
            Value::Array(vec![
                obj(&[
                    ("title", s("Hello")),
                    ("notes", s("speaker says hi")),
                    (
                        "items",
                        Value::Array(vec![obj(&[
                            ("type", s("text")),
                            ("text", s("Body text")),
                            ("y", Value::Number(1.5)),
                        ])]),
                    ),
                ]),
                obj(&[
                    ("title", s("Second")),
                    (
                        "items",
                        Value::Array(vec![obj(&[
                            ("type", s("text")),
                            ("bullets", Value::Array(vec![s("one"), s("two")])),
                            ("y", Value::Number(1.5)),
                        ])]),
                    ),
                ]),
            ]),
        )])],
    ))
}

/// One round trip per format through LibreOffice: what we write, LibreOffice opens and writes
/// again (as PDF, EPUB, and its own .docx and .pptx), and ours reads that back with the same
/// content.
#[test]
fn libreoffice_round_trips() {
    if !have(
        "soffice (Debian: libreoffice-writer-nogui libreoffice-impress-nogui)",
        soffice_in(&std::env::temp_dir().join(format!("nodetool-soffice-{}", std::process::id())))
            .arg("--version"),
    ) {
        return;
    }
    // docx -> PDF (LibreOffice's writer_pdf_Export) -> pdf.extractText.
    let docx = sample_docx();
    let pdf = soffice("report.docx", &docx, "pdf");
    let text = text_of(call("pdf", "extractText", &[Value::Bytes(pdf.clone())]));
    for line in ["Title here", "Bold then plain", "apple", "pear"] {
        assert!(
            text.lines().any(|l| l.trim().ends_with(line)),
            "{line:?} in {text:?}"
        );
    }
    // docx -> ODT -> LibreOffice's own .docx -> mammoth.
    let odt = soffice("report.docx", &docx, "odt");
    let again = soffice("report.odt", &odt, "docx:MS Word 2007 XML");
    let html = text_of(call("mammoth", "convertToHtml", &[Value::Bytes(again)]));
    for part in [
        "<h1>Title here</h1>",
        "<strong>Bold</strong>",
        "<li>apple</li>",
        "<td><p>a</p></td>",
    ] {
        assert!(html.contains(part), "{part} in {html}");
    }
    // docx -> EPUB (LibreOffice's EPUB export) -> epub.
    let book = soffice("report.docx", &docx, "epub");
    let meta = call("epub", "metadata", &[Value::Bytes(book.clone())]);
    assert!(
        matches!(&meta, Ok(Value::Object(m)) if m.iter().any(|(k, v)| k == "title" && *v == s("Interop"))),
        "{meta:?}"
    );
    let text = text_of(call("epub", "extractText", &[Value::Bytes(book)]));
    assert!(
        text.contains("Title here") && text.contains("Bold then plain"),
        "{text}"
    );
    // pptx -> PDF -> pdf.extractPages, and pptx -> ODP -> LibreOffice's own .pptx -> pptx.
    let deck = sample_pptx();
    let deck_pdf = soffice("deck.pptx", &deck, "pdf");
    let pages = call("pdf", "extractPages", &[Value::Bytes(deck_pdf.clone())]);
    let Ok(Value::Array(pages)) = pages else {
        panic!("{pages:?}")
    };
    assert_eq!(pages.len(), 2);
    let page_text = |i: usize| match &pages[i] {
        Value::Object(m) => m.iter().find(|(k, _)| k == "text").map(|(_, v)| v.clone()),
        _ => None,
    };
    assert!(
        matches!(page_text(0), Some(Value::String(t)) if t.contains("Hello") && t.contains("Body text")),
        "{:?}",
        page_text(0)
    );
    let odp = soffice("deck.pptx", &deck, "odp");
    let again = soffice("deck.odp", &odp, "pptx:Impress MS PowerPoint 2007 XML");
    let slides = call("pptx", "extractSlides", &[Value::Bytes(again)]);
    let Ok(Value::Array(slides)) = slides else {
        panic!("{slides:?}")
    };
    let field = |v: &Value, key: &str| match v {
        Value::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
        _ => None,
    };
    assert_eq!(
        slides.iter().map(|s| field(s, "title")).collect::<Vec<_>>(),
        [Some(s("Hello")), Some(s("Second"))]
    );
    assert!(
        matches!(field(&slides[0], "notes"), Some(Value::String(n)) if n.contains("speaker says hi")),
        "{:?}",
        field(&slides[0], "notes")
    );
    assert!(
        matches!(field(&slides[1], "text"), Some(Value::String(t)) if t.contains("one") && t.contains("two"))
    );
    // The PDFs LibreOffice made of our .docx and .pptx, first page each, for eyes (kept as test
    // artifacts: host-modules/tests/artifacts/libreoffice-*-page-1.png).
    if let Ok(dir) = std::env::var("NODETOOL_INTEROP_RENDER_DIR") {
        for (name, data) in [("docx", &pdf), ("pptx", &deck_pdf)] {
            let file = TempFile::new(&format!("lo-{name}.pdf"), data);
            let status = Command::new("pdftoppm")
                .args(["-png", "-r", "60", "-singlefile", "-f", "1", "-l", "1"])
                .arg(&file.0)
                .arg(PathBuf::from(&dir).join(format!("libreoffice-{name}-page-1")))
                .status();
            assert!(status.is_ok_and(|s| s.success()));
        }
    }
}
