//! Tests across the document modules: round trips, crafted hostile files, and mutations of
//! real files that must never panic, hang or allocate past the caps.

use nodetool_protocol::value::Value;

use super::*;

pub(crate) fn bytes(b: Vec<u8>) -> Value {
    Value::Bytes(b)
}

pub(crate) fn s(v: &str) -> Value {
    Value::String(v.into())
}

pub(crate) fn obj(members: &[(&str, Value)]) -> Value {
    Value::Object(
        members
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

/// An archive of `entries`, deflated.
pub(crate) fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut w = ::zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = ::zip::write::SimpleFileOptions::default()
        .compression_method(::zip::CompressionMethod::Deflated);
    for (name, data) in entries {
        w.start_file(*name, options)
            .unwrap_or_else(|e| panic!("{e}"));
        w.write_all(data).unwrap_or_else(|e| panic!("{e}"));
    }
    w.finish().unwrap_or_else(|e| panic!("{e}")).into_inner()
}

/// A `w` x `h` PNG of one colour.
pub(crate) fn png(w: u32, h: u32, alpha: u8) -> Vec<u8> {
    let mut out = Vec::new();
    image::RgbaImage::from_pixel(w, h, image::Rgba([10, 120, 200, alpha]))
        .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap_or_else(|e| panic!("{e}"));
    out
}

/// `rounds` copies of `real`, each with one to eight random bytes replaced, removed or
/// inserted (xorshift from `seed`, so a failure reproduces).
pub(crate) fn mutants(real: &[u8], seed: u32, rounds: usize) -> Vec<Vec<u8>> {
    let mut seed = seed.max(1);
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed
    };
    (0..rounds)
        .map(|_| {
            let mut m = real.to_vec();
            for _ in 0..1 + next() % 8 {
                let i = next() as usize % m.len().max(1);
                match next() % 3 {
                    0 if i < m.len() => m[i] = next() as u8,
                    1 if i < m.len() => {
                        m.remove(i);
                    }
                    _ => m.insert(i.min(m.len()), next() as u8),
                }
            }
            m
        })
        .collect()
}

pub(crate) fn text_of(v: Result<Value, HostError>) -> String {
    match v {
        Ok(Value::String(s)) => s,
        other => panic!("expected a string, got {other:?}"),
    }
}

#[test]
fn error_codes_are_the_host_codes() {
    let all = [
        DocError::NotDocument(String::new()),
        DocError::Encrypted(String::new()),
        DocError::TooLarge(String::new()),
        DocError::OutputTooLarge(String::new()),
        DocError::Malformed(String::new()),
        DocError::DeadlinePassed,
        DocError::Internal(String::new()),
    ];
    let codes: Vec<HostErrorCode> = all.iter().map(DocError::code).collect();
    assert_eq!(
        codes,
        [
            HostErrorCode::MalformedInput,
            HostErrorCode::Unsupported,
            HostErrorCode::LimitExceeded,
            HostErrorCode::OutputTooLarge,
            HostErrorCode::MalformedInput,
            HostErrorCode::DeadlineExceeded,
            HostErrorCode::Internal,
        ]
    );
    assert_eq!(
        DocError::Encrypted("locked".into()).at("pdf.extractText"),
        HostError::unsupported("pdf.extractText: locked")
    );
}

#[test]
fn xml_walker_caps_depth_and_refuses_dtds() {
    let deep = format!(
        "{}{}",
        "<a>".repeat(MAX_XML_DEPTH + 1),
        "</a>".repeat(MAX_XML_DEPTH + 1)
    );
    let mut w = XmlWalker::new(&deep, "deep.xml", false);
    let error = loop {
        match w.next() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the walker read past its depth cap"),
            Err(e) => break e,
        }
    };
    assert_eq!(error.code(), HostErrorCode::LimitExceeded);
    let at_cap = format!(
        "{}{}",
        "<a>".repeat(MAX_XML_DEPTH),
        "</a>".repeat(MAX_XML_DEPTH)
    );
    let mut w = XmlWalker::new(&at_cap, "ok.xml", false);
    while w.next().unwrap_or_else(|e| panic!("{e:?}")).is_some() {}

    // The billion laughs: the internal subset is never read, so nothing expands.
    let laughs = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><a>&lol2;</a>"#;
    let mut w = XmlWalker::new(laughs, "laughs.xml", false);
    let e = loop {
        match w.next() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("a DTD was accepted"),
            Err(e) => break e,
        }
    };
    assert!(e.at("x").message().contains("DTDs are refused"), "{e:?}");
    let mut w = XmlWalker::new(laughs, "laughs.xhtml", true);
    let mut text = String::new();
    while let Some(node) = w.next().unwrap_or_else(|e| panic!("{e:?}")) {
        if let XmlNode::Text(t) = node {
            text.push_str(&t);
        }
    }
    assert_eq!(text, "&lol2;");
    // An external entity is only its name, too.
    let xxe = r#"<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><a>&x;&amp;&#65;&nbsp;</a>"#;
    let mut w = XmlWalker::new(xxe, "xxe.xhtml", true);
    let mut text = String::new();
    while let Some(node) = w.next().unwrap_or_else(|e| panic!("{e:?}")) {
        if let XmlNode::Text(t) = node {
            text.push_str(&t);
        }
    }
    assert_eq!(text, "&x;&A\u{a0}");
}

#[test]
fn part_names_resolve_as_keys() {
    assert_eq!(
        resolve_part("word", "media/image1.png"),
        "word/media/image1.png"
    );
    assert_eq!(
        resolve_part("ppt/slides", "../media/a%20b.png"),
        "ppt/media/a b.png"
    );
    assert_eq!(resolve_part("OEBPS", "/x/../../y.html#frag"), "y.html");
    assert_eq!(
        rels_part_of("word/document.xml"),
        "word/_rels/document.xml.rels"
    );
    assert_eq!(folder_of("a.xml"), "");
    assert_eq!(base64(b"Man"), "TWFu");
    assert_eq!(base64(b"Ma"), "TWE=");
    assert_eq!(base64(b"M"), "TQ==");
    assert_eq!(base64(b""), "");
}

#[test]
fn an_overdue_call_stops_at_its_deadline() {
    use nodetool_protocol::catalog::{Resolution, ResolvedKind, ResolvedModule};
    use nodetool_runtime::dispatch::Dispatcher;
    use std::task::{Context, Poll, Waker};

    let pack = "@nodetool-ai/sandbox-pdf";
    let resolution = Resolution {
        modules: vec![ResolvedModule {
            specifier: pack.into(),
            pack_name: pack.into(),
            pack_version: None,
            content_digest: "a".repeat(64),
            module_id: "host:pdf".into(),
            graph: vec![],
            kind: ResolvedKind::Host {
                host_id: "pdf".into(),
            },
        }],
        statuses: vec![],
    };
    let dispatcher = crate::HostDispatcher::for_resolution(&resolution)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("a dispatcher"));
    let pdf = super::pdf::tests::pdf_of(&[&["one"], &["two"]]);
    let call = |deadline| {
        let mut future = dispatcher.call(pack, "extractText", vec![bytes(pdf.clone())], deadline);
        loop {
            if let Poll::Ready(answer) = future
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
            {
                return answer.map_err(|e| e.message);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    let past = std::time::Instant::now();
    assert_eq!(
        call(past),
        Err("pdf.extractText: the run's deadline passed before the call finished".into())
    );
    let later = std::time::Instant::now() + std::time::Duration::from_secs(600);
    assert_eq!(call(later), Ok(Value::String("one\n\ntwo".into())));
}
