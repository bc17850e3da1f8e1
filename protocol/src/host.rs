//! NodeTool's host-module registry: the ids a `kind: "host"` entry may name, the one package
//! allowed to declare each, and the exports its facade exposes.
//!
//! This table is the whole trust rule for host modules. Discovery refuses an entry whose id is
//! absent or pinned to another package, and the dispatcher repeats both checks, because a
//! resolution can come from a catalog this process did not build.

/// One host module NodeTool implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostModuleSpec {
    /// The id a manifest names.
    pub id: &'static str,
    /// The only package allowed to declare it (`@nodetool-ai/sandbox-<id>`).
    pub pack_name: &'static str,
    /// Exports, in facade order.
    pub exports: &'static [&'static str],
    /// One line for summaries and the prompt tier.
    pub description: &'static str,
}

/// Every host module, in registry order.
pub const HOST_MODULES: &[HostModuleSpec] = &[
    HostModuleSpec {
        id: "csv",
        pack_name: "@nodetool-ai/sandbox-csv",
        exports: &["parse", "stringify"],
        description: "Parse CSV text into records or rows, and write records back to CSV.",
    },
    HostModuleSpec {
        id: "html",
        pack_name: "@nodetool-ai/sandbox-html",
        exports: &[
            "select",
            "toMarkdown",
            "toText",
            "extractLinks",
            "extractImages",
            "extractAudio",
            "extractVideos",
            "extractMetadata",
            "extractReadableText",
        ],
        description: "Query HTML with CSS selectors, convert it to Markdown or text, and extract links, media and metadata.",
    },
    HostModuleSpec {
        id: "xml",
        pack_name: "@nodetool-ai/sandbox-xml",
        exports: &["parse"],
        description: "Parse XML into plain objects, attributes prefixed with @_.",
    },
    HostModuleSpec {
        id: "xlsx",
        pack_name: "@nodetool-ai/sandbox-xlsx",
        exports: &["parse", "write"],
        description: "Read Excel workbooks into rows and write styled workbooks from rows.",
    },
    HostModuleSpec {
        id: "ocr",
        pack_name: "@nodetool-ai/sandbox-ocr",
        exports: &["recognize"],
        description: "Recognize text in an image with Tesseract, with per-word confidence and boxes.",
    },
    HostModuleSpec {
        id: "zip",
        pack_name: "@nodetool-ai/sandbox-zip",
        exports: &["unzip", "zip"],
        description: "Unpack and build ZIP archives, with a 50 MB inflation cap.",
    },
    HostModuleSpec {
        id: "diff",
        pack_name: "@nodetool-ai/sandbox-diff",
        exports: &["unified"],
        description: "Produce a unified diff between two texts.",
    },
    HostModuleSpec {
        id: "docx",
        pack_name: "@nodetool-ai/sandbox-docx",
        exports: &["build"],
        description: "Build a Word document from headings, paragraphs, lists, tables, and images.",
    },
    HostModuleSpec {
        id: "mammoth",
        pack_name: "@nodetool-ai/sandbox-mammoth",
        exports: &["extractRawText", "convertToHtml"],
        description: "Read a Word document as plain text or HTML.",
    },
    HostModuleSpec {
        id: "epub",
        pack_name: "@nodetool-ai/sandbox-epub",
        exports: &[
            "metadata",
            "tableOfContents",
            "extractText",
            "extractChapters",
        ],
        description: "Read an EPUB's metadata, table of contents, and chapter text.",
    },
    HostModuleSpec {
        id: "pdf",
        pack_name: "@nodetool-ai/sandbox-pdf",
        exports: &["extractText", "extractPages"],
        description: "Extract a PDF's embedded text, whole or per page. No OCR of scanned pages.",
    },
    HostModuleSpec {
        id: "pptx",
        pack_name: "@nodetool-ai/sandbox-pptx",
        exports: &["extractText", "extractSlides"],
        description: "Extract text from a PowerPoint file, whole or per slide, with titles and notes.",
    },
    HostModuleSpec {
        id: "pdflib",
        pack_name: "@nodetool-ai/sandbox-pdflib",
        exports: &["build", "merge"],
        description: "Build PDF files from a JSON page list of text, images and shapes, and merge PDFs.",
    },
    HostModuleSpec {
        id: "pptxgen",
        pack_name: "@nodetool-ai/sandbox-pptxgen",
        exports: &["build"],
        description: "Build a PowerPoint file from a JSON slide list.",
    },
    HostModuleSpec {
        id: "ics",
        pack_name: "@nodetool-ai/sandbox-ics",
        exports: &["createEvent", "createEvents"],
        description: "Write iCalendar (.ics) text from plain event objects: dates, durations, attendees, alarms, recurrence.",
    },
    HostModuleSpec {
        id: "exif",
        pack_name: "@nodetool-ai/sandbox-exif",
        exports: &["parse"],
        description: "Read the EXIF tags of a JPEG, TIFF, HEIC, PNG or WebP image: camera, exposure, dates, orientation and GPS position.",
    },
    HostModuleSpec {
        id: "fabric",
        pack_name: "@nodetool-ai/sandbox-fabric",
        exports: &["render", "renderSVG", "loadSVG", "toDataURL"],
        description: "Render a Fabric.js canvas scene (rect, circle, path, text, image) or an SVG to PNG, write a scene as SVG, and read an SVG into scene objects.",
    },
    HostModuleSpec {
        id: "aws",
        pack_name: "@nodetool-ai/sandbox-aws",
        exports: &["sigv4", "presign"],
        description: "Sign an AWS request (S3 and friends) with Signature V4: headers for fetch, or a presigned URL.",
    },
    HostModuleSpec {
        id: "subtitle",
        pack_name: "@nodetool-ai/sandbox-subtitle",
        exports: &["parse", "stringify"],
        description: "Parse SRT and WebVTT captions into timed cues, and write cues back as SRT or WebVTT.",
    },
    HostModuleSpec {
        id: "notion",
        pack_name: "@nodetool-ai/sandbox-notion",
        exports: &["request", "plainText", "toMarkdown"],
        description: "Build a Notion API request for fetch, and read Notion rich text and blocks as text or Markdown.",
    },
    HostModuleSpec {
        id: "supabase",
        pack_name: "@nodetool-ai/sandbox-supabase",
        exports: &["from", "rpc"],
        description: "Build a Supabase REST (PostgREST) table or RPC request for fetch.",
    },
    HostModuleSpec {
        id: "twilio",
        pack_name: "@nodetool-ai/sandbox-twilio",
        exports: &["request"],
        description: "Build an authenticated Twilio API request for fetch.",
    },
    HostModuleSpec {
        id: "apify",
        pack_name: "@nodetool-ai/sandbox-apify",
        exports: &["startRun", "runStatus", "datasetItems"],
        description: "Build the start, poll and dataset requests of an Apify actor run for fetch.",
    },
    HostModuleSpec {
        id: "expr",
        pack_name: "@nodetool-ai/sandbox-expr",
        exports: &["evaluate"],
        description: "Evaluate a math or logic formula with variables (expr-eval's language), with no access to anything else.",
    },
    HostModuleSpec {
        id: "sqlite",
        pack_name: "@nodetool-ai/sandbox-sqlite",
        exports: &["query", "run"],
        description: "Query and update a SQLite database passed in and returned as bytes, never a file path.",
    },
    HostModuleSpec {
        id: "tokens",
        pack_name: "@nodetool-ai/sandbox-tokens",
        exports: &["count", "encode", "decode"],
        description: "Count, encode and decode tiktoken tokens (cl100k_base, o200k_base, p50k_base, r50k_base).",
    },
];

/// The registry row for `id`, by exact match.
pub fn host_module(id: &str) -> Option<&'static HostModuleSpec> {
    HOST_MODULES.iter().find(|m| m.id == id)
}

/// Why `pack_name` may not declare host module `host_id`, or `None` when it may. The reason
/// completes a sentence that starts with `<pack>/<module>: `.
pub fn host_module_violation(pack_name: &str, host_id: &str) -> Option<HostViolation> {
    if host_id.is_empty() {
        return Some(HostViolation::Unknown(
            "a host module must name a host id".into(),
        ));
    }
    match host_module(host_id) {
        None => Some(HostViolation::Unknown(format!(
            "\"{host_id}\" is not a host module NodeTool implements — host modules are first-party only, and a pack cannot bring its own"
        ))),
        Some(spec) if spec.pack_name != pack_name => Some(HostViolation::Foreign(format!(
            "host module \"{host_id}\" belongs to {} and cannot be declared by {pack_name}",
            spec.pack_name
        ))),
        Some(_) => None,
    }
}

/// A refused host entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostViolation {
    /// The id is not in the registry.
    Unknown(String),
    /// The id is pinned to another package.
    Foreign(String),
}

impl HostViolation {
    /// The reason in words.
    pub fn message(&self) -> &str {
        match self {
            HostViolation::Unknown(m) | HostViolation::Foreign(m) => m,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::{check_host_id, check_identifier};

    #[test]
    fn every_row_follows_the_pack_convention() {
        for m in HOST_MODULES {
            assert_eq!(m.pack_name, format!("@nodetool-ai/sandbox-{}", m.id));
            assert!(check_host_id(m.id).is_ok());
            assert!(!m.exports.is_empty());
            for e in m.exports {
                assert!(check_identifier(e).is_ok(), "{e}");
            }
            assert!(m.description.chars().count() <= crate::limits::MAX_DESCRIPTION_CHARS);
        }
    }

    #[test]
    fn violations() {
        assert_eq!(
            host_module_violation("@nodetool-ai/sandbox-csv", "csv"),
            None
        );
        let foreign = host_module_violation("@evil/x", "csv");
        assert!(
            matches!(&foreign, Some(HostViolation::Foreign(m)) if m.contains("belongs to @nodetool-ai/sandbox-csv"))
        );
        let unknown = host_module_violation("@acme/invented", "shell");
        assert!(
            matches!(&unknown, Some(HostViolation::Unknown(m)) if m.contains("is not a host module NodeTool implements"))
        );
        // Prototype-ish names are plain misses, not lookups into something inherited.
        assert!(host_module("constructor").is_none());
        assert!(host_module("__proto__").is_none());
    }
}
