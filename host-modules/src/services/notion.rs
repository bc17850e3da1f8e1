//! `notion`: the Notion API's request shape (its `Notion-Version` header and bearer token), and
//! its rich text and blocks read back as text and Markdown.

use nodetool_protocol::value::Value;

use super::{Target, header_value, json_body, method_of, on_origin, prepared, require_string};
use crate::error::HostError;
use crate::limits::{js_string, option, options_of};

/// The API version requests carry unless `version` says otherwise.
pub const DEFAULT_NOTION_VERSION: &str = "2022-06-28";

const NOTION_BASE: &str = "https://api.notion.com";

/// `request({ token, path, method="GET", query?, body?, version? })` -> a prepared request.
/// `path` is under `/v1/` unless it starts with `/`; it must stay on api.notion.com. A body is
/// sent as JSON.
pub fn request(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "notion.request";
    let options = options_of(args.first());
    let token = require_string(AT, options, "token")?;
    let path = require_string(AT, options, "path")?;
    let method = method_of(AT, options, "GET")?;
    let base = url::Url::parse(NOTION_BASE)
        .map_err(|_| HostError::invalid(format!("{AT}: path is not a valid URL path")))?;
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/v1/{path}")
    };
    let mut target = Target::new(on_origin(AT, &base, &path)?);
    target.params.with_query(option(options, "query"));
    let url = target.finish(AT)?;
    let version =
        option(options, "version").map_or_else(|| DEFAULT_NOTION_VERSION.into(), js_string);
    let mut headers = vec![
        (
            "Authorization",
            header_value(AT, "token", format!("Bearer {token}"))?,
        ),
        ("Notion-Version", header_value(AT, "version", version)?),
    ];
    let body = match option(options, "body") {
        None => None,
        Some(body) => {
            headers.push(("Content-Type", "application/json".into()));
            Some(json_body(AT, Some(body))?)
        }
    };
    Ok(prepared(url, method, headers, body))
}

/// `plainText(richText)` -> the text of a rich-text array: each span's `plain_text`, or its
/// `text.content`. A string is returned as it is; anything else is `""`.
pub fn plain_text(args: &[Value]) -> Result<Value, HostError> {
    Ok(Value::String(text_of(args.first())))
}

fn text_of(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(spans)) => spans.iter().map(span_text).collect(),
        _ => String::new(),
    }
}

fn span_text(span: &Value) -> &str {
    let Value::Object(members) = span else {
        return "";
    };
    if let Some(Value::String(s)) = option(members, "plain_text") {
        return s;
    }
    match option(members, "text") {
        Some(Value::Object(text)) => match option(text, "content") {
            Some(Value::String(s)) => s,
            _ => "",
        },
        _ => "",
    }
}

/// `toMarkdown(blocks)` -> a page's blocks as Markdown, one paragraph each: headings, paragraphs,
/// bulleted and numbered items, to-dos, quotes, code and dividers. Blocks Markdown has no form
/// for (databases, embeds, synced blocks) give nothing, and children are not fetched: this reads
/// only the blocks it is given.
pub fn to_markdown(args: &[Value]) -> Result<Value, HostError> {
    let Some(Value::Array(blocks)) = args.first() else {
        return Ok(Value::String(String::new()));
    };
    let mut paragraphs: Vec<String> = Vec::new();
    for block in blocks {
        let Value::Object(members) = block else {
            continue;
        };
        let kind = match option(members, "type") {
            Some(Value::String(s)) => s.as_str(),
            _ => "",
        };
        let payload = options_of(members.iter().find(|(k, _)| k == kind).map(|(_, v)| v));
        let text = text_of(option(payload, "rich_text"));
        let line = match kind {
            "heading_1" => format!("# {text}"),
            "heading_2" => format!("## {text}"),
            "heading_3" => format!("### {text}"),
            "paragraph" => text,
            "bulleted_list_item" => format!("- {text}"),
            "numbered_list_item" => format!("1. {text}"),
            "to_do" => {
                let checked = matches!(option(payload, "checked"), Some(Value::Bool(true)));
                format!("- [{}] {text}", if checked { "x" } else { " " })
            }
            "quote" => format!("> {text}"),
            "code" => {
                let language = option(payload, "language")
                    .map(js_string)
                    .unwrap_or_default();
                format!("```{language}\n{text}\n```")
            }
            "divider" => "---".to_string(),
            _ => continue,
        };
        paragraphs.push(line);
    }
    Ok(Value::String(paragraphs.join("\n\n")))
}
