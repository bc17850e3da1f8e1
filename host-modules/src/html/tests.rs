use super::*;

fn s(v: &str) -> Value {
    Value::String(v.into())
}

fn strings(v: &[&str]) -> Value {
    Value::Array(v.iter().map(|x| s(x)).collect())
}

fn opts(members: &[(&str, Value)]) -> Value {
    Value::Object(
        members
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

fn md(html: &str) -> String {
    match to_markdown(&[s(html)]) {
        Ok(Value::String(m)) => m,
        other => panic!("{other:?}"),
    }
}

fn count(v: &Result<Value, HostError>) -> usize {
    match v {
        Ok(Value::Array(items)) => items.len(),
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// select

#[test]
fn select_returns_trimmed_text_or_attributes_in_document_order() {
    let page = "<ul><li class=a> one </li><li class=b><a href='/x'>two</a></li><li class=a>\n three\n</li></ul>";
    assert_eq!(
        select(&[s(page), s("li.a")]),
        Ok(strings(&["one", "three"]))
    );
    assert_eq!(
        select(&[s(page), s("li"), opts(&[("attr", s("class"))])]),
        Ok(strings(&["a", "b", "a"]))
    );
    // Matches without the attribute are skipped; the limit counts what is returned.
    assert_eq!(
        select(&[
            s(page),
            s("li, a"),
            opts(&[("attr", s("href")), ("limit", Value::Number(1.0))])
        ]),
        Ok(strings(&["/x"]))
    );
    // The <html> element itself matches, as in cheerio.
    assert_eq!(count(&select(&[s("<p>x</p>"), s("html")])), 1);
    // Selectors level 4.
    assert_eq!(
        select(&[s(page), s("li:is(.b, .c) a, li:nth-child(3):not(.b)")]),
        Ok(strings(&["two", "three"]))
    );
    // An empty `attr` means text.
    assert_eq!(
        select(&[s(page), s("li.b"), opts(&[("attr", s(""))])]),
        Ok(strings(&["two"]))
    );
}

#[test]
fn select_limit_defaults_to_100_and_clamps_to_1000() {
    let page = "<p>x</p>".repeat(1500);
    let with = |limit: Value| count(&select(&[s(&page), s("p"), opts(&[("limit", limit)])]));
    assert_eq!(count(&select(&[s(&page), s("p")])), 100);
    assert_eq!(with(Value::Number(100_000.0)), 1000);
    assert_eq!(with(Value::Number(2.9)), 2);
    assert_eq!(with(Value::Number(-5.0)), 0);
    assert_eq!(with(Value::Number(f64::NAN)), 100);
    assert_eq!(with(Value::Number(f64::INFINITY)), 100);
    assert_eq!(with(Value::Null), 100);
    assert_eq!(with(s("7")), 7);
    assert_eq!(with(s("lots")), 100);
}

#[test]
fn select_errors() {
    for bad in [Value::Undefined, s(""), s("  "), Value::Number(1.0)] {
        assert_eq!(
            select(&[s("<p>"), bad]),
            Err(HostError::invalid(
                "html.select: selector must be a non-empty string"
            ))
        );
    }
    let e = select(&[s("<p>"), s("p[")])
        .err()
        .map(HostError::into_message)
        .unwrap_or_default();
    assert!(
        e.starts_with("html.select: invalid selector \"p[\" ("),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
    let e = select(&[s("<p>"), s("div >> p")])
        .err()
        .map(HostError::into_message)
        .unwrap_or_default();
    assert!(
        e.starts_with("html.select: invalid selector \"div >> p\" ("),
        "{e}"
    );
    let e = select(&[s("<p>"), s("p:nope")])
        .err()
        .map(HostError::into_message)
        .unwrap_or_default();
    assert!(
        e.starts_with("html.select: invalid selector \"p:nope\" ("),
        "{e}"
    );
    assert_eq!(
        select(&[Value::Null, s("p")]),
        Err(HostError::invalid("html.select: html must be a string"))
    );
}

#[test]
fn hostile_selectors_and_documents_are_refused_not_crashed() {
    let deep_selector = format!("{}p{}", ":not(".repeat(40), ")".repeat(40));
    let e = select(&[s("<p>"), s(&deep_selector)])
        .err()
        .map(HostError::into_message)
        .unwrap_or_default();
    assert!(e.ends_with("(nested more than 32 levels deep)"), "{e}");
    let long = "p,".repeat(6000) + "p";
    let e = select(&[s("<p>"), s(&long)])
        .err()
        .map(HostError::into_message)
        .unwrap_or_default();
    assert!(e.ends_with("(longer than 10000 characters)"), "{e}");

    // A document nested past the depth cap is refused quickly (the tree builder's scope
    // checks would otherwise cost a step per open element per tag); at the cap it works.
    // 200,000 open elements (1 MB): past the cap by far. The time bound is a hang guard for a
    // loaded machine (an unbounded walk of the open elements would take minutes), not a
    // performance target (that is `cargo xtask bench hostile`).
    let deep = "<div>".repeat(200_000);
    let started = std::time::Instant::now();
    for f in [
        select as fn(&[Value]) -> Result<Value, HostError>,
        to_markdown,
        to_text,
        extract_readable_text,
    ] {
        let e = f(&[s(&deep), s("div")])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(
            e.ends_with(": the document nests elements more than 1024 deep"),
            "{e}"
        );
    }
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    let formatting: String = (0..20_000)
        .map(|i| format!("<b id={i}>"))
        .collect::<String>()
        + &"<p>x".repeat(20_000);
    let e = to_text(&[s(&formatting)])
        .err()
        .map(HostError::into_message)
        .unwrap_or_default();
    assert!(e.ends_with("more than 1024 deep"), "{e}");
    let at_cap = "<div>".repeat(1000);
    assert_eq!(count(&select(&[s(&at_cap), s("div")])), 100);
    assert!(matches!(to_markdown(&[s(&at_cap)]), Ok(Value::String(_))));
    let e = select(&[s(&at_cap), s("div:has(span)")])
        .err()
        .map(HostError::into_message)
        .unwrap_or_default();
    assert!(
        e.starts_with("html.select: :has() cannot be used on a document nested"),
        "{e}"
    );
    // :has() on an ordinary page works.
    assert_eq!(
        select(&[
            s("<div><span>a</span></div><div>b</div>"),
            s("div:has(span)")
        ]),
        Ok(strings(&["a"]))
    );

    // Nested matches repeat their text: the output budget stops a quadratic answer.
    let nested = format!("{}{}", "<div>".repeat(1000), "x".repeat(40_000));
    let e = select(&[
        s(&nested),
        s("div"),
        opts(&[("limit", Value::Number(1000.0))]),
    ])
    .err()
    .map(HostError::into_message)
    .unwrap_or_default();
    assert_eq!(e, "html.select: the result exceeds the 33554432 byte limit");
}

#[test]
fn the_input_cap_is_enforced_by_one() {
    let at_cap = "a".repeat(5 * 1024 * 1024);
    assert!(to_text(&[s(&at_cap)]).is_ok());
    let over = "a".repeat(5 * 1024 * 1024 + 1);
    for f in [
        select as fn(&[Value]) -> Result<Value, HostError>,
        to_markdown,
        to_text,
        extract_links,
        extract_images,
        extract_audio,
        extract_videos,
        extract_metadata,
        extract_readable_text,
    ] {
        let e = f(&[s(&over), s("p")])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(
            e.ends_with(": input exceeds the 5242880 character limit"),
            "{e}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Text

#[test]
fn to_text_drops_scripts_and_squeezes_whitespace() {
    let page = "<html><head><title>T</title><style>p { x }</style></head><body>\n\n\n\n<p>a \t  b</p><script>no()</script>\n\n\n<p>c</p>  </body></html>";
    assert_eq!(to_text(&[s(page)]), Ok(s("T\n\na b\n\nc")));
    assert_eq!(to_text(&[s("")]), Ok(s("")));
}

#[test]
fn readable_text_prefers_main_content() {
    let page = "<body><header>Site</header><nav>Menu</nav><article><h1>Story</h1><script>x()</script><p>Body\u{a0} text.</p></article><footer>(c)</footer></body>";
    // Text content as `textContent` has it: blocks are not separated (as in the reference).
    assert_eq!(extract_readable_text(&[s(page)]), Ok(s("StoryBody text.")));
    let page = "<body><div id=sidebar>side</div><div class='page-content'>The   text</div></body>";
    assert_eq!(extract_readable_text(&[s(page)]), Ok(s("The text")));
    // An empty first candidate falls through to the next.
    let page = "<body><article></article><main>Main</main></body>";
    assert_eq!(extract_readable_text(&[s(page)]), Ok(s("Main")));
    let page = "<body><nav>only navigation</nav></body>";
    assert_eq!(
        extract_readable_text(&[s(page)]),
        Ok(s("No main content found"))
    );
    // Elements inside removed ones do not match.
    let page = "<body><header><div class=content>in header</div></header><p>Body</p></body>";
    assert_eq!(extract_readable_text(&[s(page)]), Ok(s("Body")));
}

#[test]
fn metadata() {
    let page = "<head><title> A title </title><meta name=description content='About'><meta name=keywords content=''></head>";
    assert_eq!(
        extract_metadata(&[s(page)]),
        Ok(opts(&[
            ("title", s(" A title ")),
            ("description", s("About")),
            ("keywords", s("")),
        ]))
    );
    assert_eq!(
        extract_metadata(&[s("<title></title>")]),
        Ok(opts(&[
            ("title", Value::Null),
            ("description", Value::Null),
            ("keywords", Value::Null),
        ]))
    );
}

// ---------------------------------------------------------------------------------------------
// Links and media

#[test]
fn links_are_classified_as_the_reference_does() {
    let page = r##"<a href="">empty</a><a href="#top">anchor</a><a href="/about"> About </a>
        <a href="mailto:a@b.c">mail</a><a href="TEL:123">tel</a><a href="javascript:void(0)">js</a>
        <a href="https://example.com/x">same</a><a href="https://other.org/">other</a>
        <a href="//cdn.example.com/y">proto</a><a href="docs/page">relative</a><a>no href</a>"##;
    let kinds = |base: Option<&str>| -> Vec<String> {
        let mut args = vec![s(page)];
        if let Some(b) = base {
            args.push(s(b));
        }
        match extract_links(&args) {
            Ok(Value::Array(links)) => links
                .iter()
                .map(|l| match (l.get("href"), l.get("type")) {
                    (Some(Value::String(h)), Some(Value::String(t))) => format!("{h}={t}"),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        kinds(None),
        [
            "=internal",
            "#top=internal",
            "/about=internal",
            "mailto:a@b.c=external",
            "TEL:123=external",
            "javascript:void(0)=external",
            "https://example.com/x=external",
            "https://other.org/=external",
            "//cdn.example.com/y=external",
            "docs/page=internal",
        ]
    );
    assert_eq!(
        kinds(Some("https://example.com/base/")),
        [
            "=internal",
            "#top=internal",
            "/about=internal",
            "mailto:a@b.c=external",
            "TEL:123=external",
            "javascript:void(0)=external",
            "https://example.com/x=internal",
            "https://other.org/=external",
            "//cdn.example.com/y=external",
            "docs/page=internal",
        ]
    );
    // An unparseable base falls back to the scheme rule.
    assert_eq!(
        kinds(Some("not a url"))[6],
        "https://example.com/x=external"
    );
    let links = extract_links(&[s(page)]);
    assert!(matches!(&links, Ok(Value::Array(l)) if l[2].get("text") == Some(&s("About"))));
}

#[test]
fn media_sources_resolve_against_the_base() {
    let page = r#"<img src="a.png"><img src=""><img><img src="https://cdn.x/b.png">
        <audio src="s.mp3"><source src="t.ogg"></audio><source src="lonely.ogg">
        <video src="v.mp4"><source src="/w.webm"></video><iframe src="//yt.example/embed"></iframe>"#;
    let base = s("https://site.example/dir/page.html");
    assert_eq!(
        extract_images(&[s(page), base.clone()]),
        Ok(strings(&[
            "https://site.example/dir/a.png",
            "https://cdn.x/b.png"
        ]))
    );
    assert_eq!(
        extract_images(&[s(page)]),
        Ok(strings(&["a.png", "https://cdn.x/b.png"]))
    );
    assert_eq!(
        extract_audio(&[s(page), base.clone()]),
        Ok(strings(&[
            "https://site.example/dir/s.mp3",
            "https://site.example/dir/t.ogg"
        ]))
    );
    assert_eq!(
        extract_videos(&[s(page), base]),
        Ok(strings(&[
            "https://site.example/dir/v.mp4",
            "https://site.example/w.webm",
            "https://yt.example/embed"
        ]))
    );
    // A base that does not parse leaves every src as written.
    assert_eq!(
        extract_images(&[s(page), s("::")]),
        Ok(strings(&["a.png", "https://cdn.x/b.png"]))
    );
}

#[test]
fn every_extractor_stops_at_1000_items() {
    let page = "<a href=x><img src=y></a><audio src=a></audio><video src=v></video>".repeat(1200);
    assert_eq!(count(&extract_links(&[s(&page)])), 1000);
    assert_eq!(count(&extract_images(&[s(&page)])), 1000);
    assert_eq!(count(&extract_audio(&[s(&page)])), 1000);
    assert_eq!(count(&extract_videos(&[s(&page)])), 1000);
}

// ---------------------------------------------------------------------------------------------
// Markdown

#[test]
fn markdown_blocks() {
    assert_eq!(
        md("<h1>Title</h1><h3>Sub <em>part</em></h3><p>Para one.</p><p>Two</p>"),
        "# Title\n\n### Sub *part*\n\nPara one.\n\nTwo"
    );
    assert_eq!(
        md("<pre><code class=\"language-rust\">fn main() {}\n</code></pre>"),
        "```rust\nfn main() {}\n```"
    );
    assert_eq!(
        md("<pre>a ``` b\n  indented</pre>"),
        "````\na ``` b\n  indented\n````"
    );
    assert_eq!(
        md("<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul><ol start=9><li>x</li><li>y</li></ol>"),
        "- a\n  - b\n- c\n\n9. x\n10. y"
    );
    assert_eq!(
        md("<blockquote><p>q1</p><p>q2</p></blockquote>"),
        "> q1\n>\n> q2"
    );
    assert_eq!(md("<p>a<br>b</p><hr><p>c</p>"), "a  \nb\n\n---\n\nc");
}

#[test]
fn markdown_inline() {
    assert_eq!(
        md(
            "<p>A <a href=\"/x y\" title=\"T\">link</a>, <img src=i.png alt=pic>, <code>a`b</code>, <strong> bold </strong>, <del>gone</del>.</p>"
        ),
        "A [link](/x%20y \"T\"), ![pic](i.png), ``a`b``, **bold** , ~~gone~~."
    );
    // Empty emphasis and links vanish; a javascript: link keeps its text.
    assert_eq!(
        md("<p>x<em> </em><a href=/a></a><a href='javascript:go()'>go</a></p>"),
        "x go"
    );
    assert_eq!(
        md("<p>*not emphasis* _x_ snake_case [a] 1. &lt;b&gt; &amp;amp;</p>"),
        "\\*not emphasis\\* \\_x\\_ snake_case \\[a\\] 1. \\<b> \\&amp;"
    );
    assert_eq!(md("<p># not a heading</p>"), "\\# not a heading");
    assert_eq!(md("<p>1. not a list</p>"), "1\\. not a list");
}

#[test]
fn markdown_tables() {
    assert_eq!(
        md(
            "<table><thead><tr><th>a</th><th align=right>b</th></tr></thead><tbody><tr><td>1|2</td><td><p>x</p><p>y</p></td></tr><tr><td colspan=2>wide</td></tr></tbody></table>"
        ),
        "| a | b |\n| --- | --: |\n| 1\\|2 | x y |\n| wide |  |"
    );
    assert_eq!(
        md("<table><tr><td>no</td><td>header</td></tr></table>"),
        "|  |  |\n| --- | --- |\n| no | header |"
    );
    // colspan cannot blow a table up: at most as many spread cells as the table has.
    let wide = md("<table><tr><td colspan=1000>x</td></tr></table>");
    assert!(wide.len() < 100, "{wide}");
}

#[test]
fn markdown_style_overrides() {
    let out = to_markdown(&[
        s(
            "<h1>T</h1><ul><li>a</li></ul><pre><code>x</code></pre><p><em>e</em> <strong>s</strong></p>",
        ),
        opts(&[(
            "turndown",
            opts(&[
                ("headingStyle", s("setext")),
                ("bulletListMarker", s("*")),
                ("fence", s("~~~")),
                ("emDelimiter", s("_")),
                ("strongDelimiter", s("__")),
            ]),
        )]),
    ]);
    assert_eq!(out, Ok(s("T\n===\n\n* a\n\n~~~\nx\n~~~\n\n_e_ __s__")));
    let out = to_markdown(&[
        s("<pre>x\ny</pre>"),
        opts(&[("turndown", opts(&[("codeBlockStyle", s("indented"))]))]),
    ]);
    assert_eq!(out, Ok(s("    x\n    y")));
}

#[test]
fn markdown_nesting_is_bounded() {
    let deep = "<ul><li>x".repeat(500);
    let out = md(&deep);
    let widest = out.lines().map(str::len).max().unwrap_or(0);
    assert!(widest <= 2 * 32 + 1, "{widest}");
    let quotes = "<blockquote>".repeat(1000) + "q";
    let out = md(&quotes);
    assert_eq!(out, format!("{}q", "> ".repeat(32)));
}

// ---------------------------------------------------------------------------------------------
// attributes

#[test]
fn attribute_pairs_bound_what_the_tokenizer_compares() {
    use parse::attribute_pairs;
    assert_eq!(attribute_pairs(b"<a b c d>"), 3);
    assert_eq!(attribute_pairs(b"<a b=1 c='2' d=\"3\"e>"), 6);
    assert_eq!(attribute_pairs(b"plain text, < b c d"), 0);
    assert_eq!(attribute_pairs(b"</a b c>"), 1);
    // A `<name` inside a value is followed too, as a reading of its own.
    assert!(attribute_pairs(b"<a t=\"<b c d e>\" f>") >= 3);
    // Soundness on tag soup: what the parsed tree holds never exceeds the bound.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    const PIECES: [&str; 16] = [
        "<",
        "</",
        ">",
        "/",
        "=",
        "\"",
        "'",
        " ",
        "a",
        "b",
        "<!--",
        "-->",
        "<script>",
        "</script>",
        "<body ",
        "x",
    ];
    for _ in 0..3000 {
        let text: String = (0..next(60))
            .map(|_| PIECES[next(PIECES.len() as u64) as usize])
            .collect();
        let Ok(document) = parse::parse_document("html.toText", &text) else {
            continue;
        };
        let held: u64 = document
            .tree
            .values()
            .filter_map(|node| node.as_element())
            // <html> and <body> gather the attributes of every such tag (the merge cap's part).
            .filter(|e| !matches!(e.name(), "html" | "body"))
            .map(|e| {
                let n = e.attrs().count() as u64;
                n * n.saturating_sub(1) / 2
            })
            .sum();
        assert!(held <= attribute_pairs(text.as_bytes()), "{text:?}");
    }
}

#[test]
fn many_attributes_are_refused_in_linear_time() {
    let element = |n: usize| {
        let attrs: String = (0..n).map(|i| format!(" a{i}=\"{i}\"")).collect();
        format!("<div{attrs}>x</div>")
    };
    // 40,000 attributes on one element (4.2 s in the tokenizer's repeat check before).
    let e = to_text(&[s(&element(40_000))])
        .err()
        .map(HostError::into_message)
        .unwrap_or_default();
    assert!(
        e.starts_with("html.toText: the document's tags carry too many attributes"),
        "{e}"
    );
    for f in [to_markdown, select_div] {
        assert!(
            f(&[s(&element(40_000))]).is_err_and(|e| e.message().contains("too many attributes"))
        );
    }
    // 5,000 elements with 25 each, and one with 8,000, are fine.
    let page: String = (0..5_000).map(|_| element(25)).collect();
    assert!(to_text(&[s(&page)]).is_ok());
    assert!(to_text(&[s(&element(8_000))]).is_ok());
    // Repeated <body> tags each bringing a new attribute (scraper inserts them one by one).
    let bodies: String = (0..5_000).map(|i| format!("<body b{i}>")).collect();
    let e = to_text(&[s(&bodies)])
        .err()
        .map(HostError::into_message)
        .unwrap_or_default();
    assert!(e.contains("repeated <html> and <body> tags"), "{e}");
}

fn select_div(args: &[Value]) -> Result<Value, HostError> {
    let mut args = args.to_vec();
    args.push(s("div"));
    select(&args)
}
