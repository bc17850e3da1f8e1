//! HTML to Markdown: one iterative walk over the parsed tree, writing CommonMark with GFM
//! tables and strikethrough.
//!
//! Output rules (the reference's turndown defaults, `headingStyle: "atx"`, `codeBlockStyle:
//! "fenced"`, `bulletListMarker: "-"`, plus tables):
//!
//! - headings are ATX (`## Title`); paragraphs and other blocks are separated by one blank line;
//! - `<pre>` is a fenced block carrying the language of a `language-*` / `lang-*` class, its
//!   fence longer than any backtick run inside; `<code>` elsewhere is a code span;
//! - `<ul>` items are `- `, `<ol>` items `1. ` (from `start`), nested lists and other blocks in
//!   an item are indented to the item's content column; `<blockquote>` lines start with `> `;
//! - links are `[text](href "title")` (a link without text is dropped, a `javascript:` link
//!   keeps only its text), images `![alt](src "title")`;
//! - tables are GFM pipe tables: the header is the `<thead>` row or a first row of `<th>`
//!   (else an empty header row), cells are one line each with `|` escaped, `colspan` repeats
//!   empty cells, `align` sets the delimiter row; a `<caption>` is a paragraph above;
//! - `<strong>`/`<b>` are `**`, `<em>`/`<i>` `*`, `<del>`/`<s>` `~~`, `<br>` a hard break;
//! - whitespace collapses as a browser collapses it, and text that Markdown would read as
//!   syntax is escaped (`*`, `_` outside words, `` ` ``, `[`, `]`, `\`, a tag-like `<`, an
//!   entity-like `&`, and `#`, `>`, `-`, `+`, `=`, `~`, `1.` at the start of a line);
//! - `<head>`, scripts, styles, templates, `<noscript>`, `<svg>`, `<canvas>`, `<iframe>`,
//!   `<object>`, `<embed>` and `<select>` are left out.
//!
//! `toMarkdown`'s `turndown` option may override `headingStyle` (`"setext"`), `hr`,
//! `bulletListMarker` (`"-"`, `"+"`, `"*"`), `codeBlockStyle` (`"indented"`), `fence`
//! (`"~~~"`), `emDelimiter` (`"_"`), `strongDelimiter` (`"__"`) and `br`; other keys are
//! ignored.
//!
//! Lists and block quotes nest at most [`MAX_NESTING`] levels in the output (deeper levels
//! stay at that indentation), so a page of a million nested lists cannot make every line a
//! megabyte of indentation.

use ego_tree::iter::Edge;
use ego_tree::{NodeId, NodeRef};
use nodetool_protocol::value::Value;
use scraper::node::Element;
use scraper::{Html, Node};

use crate::limits::option;

/// List and block-quote levels the output indents.
pub const MAX_NESTING: usize = 32;

/// Elements whose content never reaches the Markdown.
const SKIPPED: [&str; 11] = [
    "head", "script", "style", "template", "noscript", "svg", "canvas", "iframe", "object",
    "embed", "select",
];

/// Elements that start and end a block (turndown's block list, less what is handled apart).
const BLOCKS: [&str; 29] = [
    "address",
    "article",
    "aside",
    "body",
    "center",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "frameset",
    "header",
    "hgroup",
    "html",
    "main",
    "menu",
    "nav",
    "output",
    "p",
    "section",
    "summary",
    "tbody",
];

/// The Markdown conventions one conversion follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Style {
    setext: bool,
    hr: String,
    bullet: char,
    fenced: bool,
    fence: char,
    em: &'static str,
    strong: &'static str,
    br: String,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            setext: false,
            hr: "---".into(),
            bullet: '-',
            fenced: true,
            fence: '`',
            em: "*",
            strong: "**",
            br: "  ".into(),
        }
    }
}

impl Style {
    /// The defaults with turndown-style overrides applied (unknown keys and values ignored).
    pub fn from_options(options: &[(String, Value)]) -> Style {
        let mut style = Style::default();
        let text = |name: &str| match option(options, name) {
            Some(Value::String(s)) => Some(s.as_str()),
            _ => None,
        };
        if let Some(v) = text("headingStyle") {
            style.setext = v == "setext";
        }
        if let Some(v) = text("hr") {
            let v = v.trim();
            if !v.is_empty() && !v.contains(['\n', '\r']) && v.len() <= 80 {
                style.hr = v.to_string();
            }
        }
        if let Some(c @ ("-" | "+" | "*")) = text("bulletListMarker") {
            style.bullet = c.chars().next().unwrap_or('-');
        }
        if let Some(v) = text("codeBlockStyle") {
            style.fenced = v != "indented";
        }
        if let Some(v) = text("fence") {
            style.fence = if v.starts_with('~') { '~' } else { '`' };
        }
        match text("emDelimiter") {
            Some("_") => style.em = "_",
            Some("*") => style.em = "*",
            _ => {}
        }
        match text("strongDelimiter") {
            Some("__") => style.strong = "__",
            Some("**") => style.strong = "**",
            _ => {}
        }
        if let Some(v) = text("br")
            && !v.contains(['\n', '\r'])
            && v.len() <= 8
        {
            style.br = v.to_string();
        }
        style
    }
}

/// The document as Markdown.
pub fn convert(document: &Html, style: &Style) -> String {
    let mut writer = Writer::new(style, false);
    writer.walk(document.tree.root());
    writer.finish()
}

/// A line prefix: a list item's marker then its indentation, or a block quote's `> `.
struct Prefix {
    first: String,
    rest: String,
    /// Nothing written under it yet (its first line still needs `first`).
    fresh: bool,
}

/// What closing an element undoes.
struct Frame {
    id: NodeId,
    /// An inline marker: where it starts in `open`, and what closes it once written.
    marker: Option<(usize, Closing)>,
    single_line: bool,
    prefix: bool,
    list: bool,
    /// Setext underline character and the output length when the heading opened.
    setext: Option<(char, usize)>,
    breaks_after: usize,
    space_after: bool,
}

impl Frame {
    fn new(id: NodeId) -> Frame {
        Frame {
            id,
            marker: None,
            single_line: false,
            prefix: false,
            list: false,
            setext: None,
            breaks_after: 0,
            space_after: false,
        }
    }
}

enum Closing {
    /// A heading's `# `: nothing closes it.
    Nothing,
    /// Emphasis, strong, strikethrough.
    Text(&'static str),
    /// A link: `](href "title")`.
    Link(String),
}

/// What opening an element asks of the walk.
enum Opened {
    /// Nothing to undo on close.
    Plain,
    /// Undo this on close.
    Frame(Frame),
    /// Its subtree is done (rendered whole, or left out).
    Skip,
}

struct Writer<'s> {
    style: &'s Style,
    out: String,
    /// Above zero inside links, headings and table cells: block breaks become spaces.
    single_line: usize,
    /// The current line has not had its prefixes written.
    line_start: bool,
    /// Something follows the prefixes on the current line.
    line_has_text: bool,
    /// Line breaks owed before the next content (2 = a blank line).
    breaks: usize,
    /// Collapsed whitespace owed before the next content.
    space: bool,
    /// Inline markers waiting for content (dropped if none comes).
    open: String,
    prefixes: Vec<Prefix>,
    /// Open lists: `None` bulleted, `Some(n)` numbered with the next number.
    lists: Vec<Option<u64>>,
}

fn is_html_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c')
}

impl<'s> Writer<'s> {
    fn new(style: &'s Style, single_line: bool) -> Writer<'s> {
        Writer {
            style,
            out: String::new(),
            single_line: usize::from(single_line),
            line_start: true,
            line_has_text: false,
            breaks: 0,
            space: false,
            open: String::new(),
            prefixes: Vec::new(),
            lists: Vec::new(),
        }
    }

    fn finish(self) -> String {
        let mut out = self.out;
        let end = out.trim_end().len();
        out.truncate(end);
        out
    }

    // -----------------------------------------------------------------------------------------
    // The walk

    fn walk(&mut self, root: NodeRef<'_, Node>) {
        let mut skip: Option<NodeId> = None;
        let mut frames: Vec<Frame> = Vec::new();
        for edge in root.traverse() {
            match edge {
                Edge::Open(node) => {
                    if skip.is_some() {
                        continue;
                    }
                    match node.value() {
                        Node::Text(text) => self.text(text),
                        Node::Element(element) => match self.open_element(node, element) {
                            Opened::Plain => {}
                            Opened::Frame(frame) => frames.push(frame),
                            Opened::Skip => skip = Some(node.id()),
                        },
                        _ => {}
                    }
                }
                Edge::Close(node) => {
                    if skip.is_some() {
                        if skip == Some(node.id()) {
                            skip = None;
                        }
                        continue;
                    }
                    if frames.last().is_some_and(|f| f.id == node.id())
                        && let Some(frame) = frames.pop()
                    {
                        self.close(frame);
                    }
                }
            }
        }
    }

    fn open_element(&mut self, node: NodeRef<'_, Node>, element: &Element) -> Opened {
        let name = element.name();
        if SKIPPED.contains(&name) {
            return Opened::Skip;
        }
        let mut frame = Frame::new(node.id());
        let single = self.single_line > 0;
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" if !single => {
                let level = name.as_bytes().get(1).map_or(1, |b| usize::from(b - b'0'));
                self.block_break(2);
                if self.style.setext && level <= 2 {
                    frame.setext = Some((if level == 1 { '=' } else { '-' }, self.out.len()));
                } else {
                    let start = self.open.len();
                    self.open.push_str(&"#".repeat(level));
                    self.open.push(' ');
                    frame.marker = Some((start, Closing::Nothing));
                }
                self.single_line += 1;
                frame.single_line = true;
                frame.breaks_after = 2;
            }
            "ul" | "ol" if !single => {
                let nested = parent_is(node, "li");
                self.block_break(if nested { 1 } else { 2 });
                let numbering = (name == "ol").then(|| {
                    element
                        .attr("start")
                        .and_then(|s| s.trim().parse::<i64>().ok())
                        .map_or(1, |n| n.clamp(0, 999_999_999) as u64)
                });
                self.lists.push(numbering);
                frame.list = true;
                frame.breaks_after = if nested { 1 } else { 2 };
            }
            "li" if !single => {
                self.block_break(1);
                let in_list = node
                    .parent()
                    .and_then(|p| p.value().as_element().map(Element::name))
                    .is_some_and(|p| matches!(p, "ul" | "ol" | "menu"));
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) if in_list => {
                        let marker = format!("{n}. ");
                        *n = n.saturating_add(1);
                        marker
                    }
                    _ => format!("{} ", self.style.bullet),
                };
                frame.prefix = self.push_prefix(marker);
                frame.breaks_after = 1;
            }
            "blockquote" if !single => {
                self.block_break(2);
                frame.prefix = self.push_prefix("> ".into());
                frame.breaks_after = 2;
            }
            "pre" => {
                let (code, language) = pre_text(node);
                if single {
                    self.code_span(&code);
                } else {
                    self.code_block(&code, &language);
                }
                return Opened::Skip;
            }
            "code" | "kbd" | "samp" | "tt" => {
                let mut code = String::new();
                for edge in node.traverse() {
                    if let Edge::Open(n) = edge
                        && let Node::Text(text) = n.value()
                    {
                        code.push_str(text);
                    }
                }
                self.code_span(&code);
                return Opened::Skip;
            }
            "table" if !single => {
                self.table(node);
                return Opened::Skip;
            }
            "hr" if !single => {
                self.block_break(2);
                let hr = self.style.hr.clone();
                self.raw(&hr);
                self.block_break(2);
            }
            "br" => {
                if single {
                    self.space = true;
                } else {
                    self.hard_break();
                }
            }
            "img" => self.image(element),
            "a" => {
                let href = element.attr("href").map(str::trim).unwrap_or_default();
                let scripted = href
                    .get(..11)
                    .is_some_and(|s| s.eq_ignore_ascii_case("javascript:"));
                if href.is_empty() || scripted {
                    return Opened::Plain;
                }
                let mut closing = String::from("](");
                closing.push_str(&link_destination(href));
                if let Some(title) = element
                    .attr("title")
                    .map(collapse)
                    .filter(|t| !t.is_empty())
                {
                    closing.push_str(" \"");
                    closing.push_str(&title.replace('\\', "\\\\").replace('"', "\\\""));
                    closing.push('"');
                }
                closing.push(')');
                let start = self.open.len();
                self.open.push('[');
                frame.marker = Some((start, Closing::Link(closing)));
                self.single_line += 1;
                frame.single_line = true;
            }
            "strong" | "b" => {
                let start = self.open.len();
                self.open.push_str(self.style.strong);
                frame.marker = Some((start, Closing::Text(self.style.strong)));
            }
            "em" | "i" => {
                let start = self.open.len();
                self.open.push_str(self.style.em);
                frame.marker = Some((start, Closing::Text(self.style.em)));
            }
            "del" | "s" | "strike" => {
                let start = self.open.len();
                self.open.push_str("~~");
                frame.marker = Some((start, Closing::Text("~~")));
            }
            _ if single && (is_block(name) || is_heading_or_table_part(name)) => {
                self.space = true;
                frame.space_after = true;
            }
            _ if is_block(name) => {
                self.block_break(2);
                frame.breaks_after = 2;
            }
            _ => return Opened::Plain,
        }
        Opened::Frame(frame)
    }

    fn close(&mut self, frame: Frame) {
        if let Some((start, closing)) = frame.marker {
            if self.open.len() > start {
                // Nothing was written inside: drop the marker.
                self.open.truncate(start);
            } else {
                match closing {
                    Closing::Nothing => {}
                    Closing::Text(text) => self.out.push_str(text),
                    Closing::Link(text) => self.out.push_str(&text),
                }
            }
        }
        if frame.single_line {
            self.single_line = self.single_line.saturating_sub(1);
        }
        if let Some((underline, at)) = frame.setext
            && self.out.len() > at
        {
            let width = self
                .out
                .rsplit('\n')
                .next()
                .map_or(3, |line| line.chars().count().max(3));
            self.new_line();
            self.write_prefixes();
            self.out.extend(std::iter::repeat_n(underline, width));
            self.line_has_text = true;
        }
        if frame.prefix {
            self.prefixes.pop();
        }
        if frame.list {
            self.lists.pop();
        }
        if frame.breaks_after > 0 {
            self.block_break(frame.breaks_after);
        }
        if frame.space_after {
            self.space = true;
        }
    }

    // -----------------------------------------------------------------------------------------
    // Lines and prefixes

    /// Pushes a prefix unless the output is already nested [`MAX_NESTING`] deep.
    fn push_prefix(&mut self, first: String) -> bool {
        if self.prefixes.len() >= MAX_NESTING {
            return false;
        }
        let rest = if first.starts_with('>') {
            first.clone()
        } else {
            " ".repeat(first.len())
        };
        self.prefixes.push(Prefix {
            first,
            rest,
            fresh: true,
        });
        true
    }

    /// Asks for `n` line breaks before the next content (a space, on a single line).
    fn block_break(&mut self, n: usize) {
        if self.single_line > 0 {
            self.space = true;
            return;
        }
        // The first content of a list item or quote goes on its marker's line.
        if self.prefixes.last().is_some_and(|p| p.fresh) {
            return;
        }
        self.breaks = self.breaks.max(n);
    }

    /// Ends the current line (if it has anything).
    fn new_line(&mut self) {
        if !self.line_start {
            self.out.push('\n');
            self.line_start = true;
            self.line_has_text = false;
        }
    }

    fn write_prefixes(&mut self) {
        for prefix in &mut self.prefixes {
            if prefix.fresh {
                self.out.push_str(&prefix.first);
                prefix.fresh = false;
            } else {
                self.out.push_str(&prefix.rest);
            }
        }
        self.line_start = false;
    }

    /// A blank line's prefixes (`>` inside quotes), trailing spaces dropped.
    fn write_blank_line(&mut self) {
        let start = self.out.len();
        for prefix in self.prefixes.iter().filter(|p| !p.fresh) {
            self.out.push_str(&prefix.rest);
        }
        let end = start + self.out[start..].trim_end().len();
        self.out.truncate(end);
        self.out.push('\n');
    }

    /// Settles what is owed before content: line breaks, prefixes, a space, open markers.
    fn flush(&mut self) {
        if self.breaks > 0 {
            if !self.out.is_empty() {
                self.new_line();
                for _ in 1..self.breaks {
                    self.write_blank_line();
                }
            }
            self.breaks = 0;
            self.space = false;
        }
        if self.line_start {
            self.write_prefixes();
            self.space = false;
        } else if self.space && self.line_has_text {
            self.out.push(' ');
        }
        self.space = false;
        if !self.open.is_empty() {
            self.out.push_str(&self.open);
            self.open.clear();
            self.line_has_text = true;
        }
    }

    /// Content written as it is.
    fn raw(&mut self, text: &str) {
        self.flush();
        self.out.push_str(text);
        self.line_has_text = true;
    }

    fn hard_break(&mut self) {
        if self.breaks == 0 && self.line_has_text && !self.line_start {
            self.out.push_str(&self.style.br.clone());
            self.new_line();
        }
        self.space = false;
    }

    // -----------------------------------------------------------------------------------------
    // Text

    fn text(&mut self, text: &str) {
        let mut first = true;
        for word in text.split(is_html_space) {
            if !first {
                self.space = true;
            }
            first = false;
            if !word.is_empty() {
                self.flush();
                // On a single line (a cell, a heading, a link) nothing starts a block.
                let at_line_start = !self.line_has_text && self.single_line == 0;
                escape_into(&mut self.out, word, at_line_start);
                self.line_has_text = true;
            }
        }
    }

    fn code_span(&mut self, code: &str) {
        if code.is_empty() {
            return;
        }
        let code: String = code
            .chars()
            .map(|c| if matches!(c, '\n' | '\r') { ' ' } else { c })
            .collect();
        let longest = longest_run(&code, '`');
        let delimiter = "`".repeat(longest + 1);
        let pad = code.starts_with('`')
            || code.ends_with('`')
            || (code.starts_with(' ') && code.ends_with(' ') && !code.trim().is_empty());
        let pad = if pad { " " } else { "" };
        self.raw(&format!("{delimiter}{pad}{code}{pad}{delimiter}"));
    }

    fn code_block(&mut self, code: &str, language: &str) {
        let code = code.strip_suffix('\n').unwrap_or(code);
        self.block_break(2);
        if self.style.fenced {
            let fence = self
                .style
                .fence
                .to_string()
                .repeat((longest_run(code, self.style.fence) + 1).max(3));
            self.raw(&fence);
            self.out.push_str(language);
            for line in code.split('\n') {
                self.code_line(line, "");
            }
            self.code_line(&fence, "");
        } else {
            let mut lines = code.split('\n');
            self.raw("    ");
            self.out.push_str(lines.next().unwrap_or_default());
            for line in lines {
                self.code_line(line, "    ");
            }
        }
        self.line_has_text = true;
        self.block_break(2);
    }

    /// One more line of a code block, under the current prefixes.
    fn code_line(&mut self, line: &str, indent: &str) {
        self.out.push('\n');
        if line.is_empty() {
            let start = self.out.len();
            for prefix in &self.prefixes {
                self.out.push_str(&prefix.rest);
            }
            let end = start + self.out[start..].trim_end().len();
            self.out.truncate(end);
            return;
        }
        for prefix in &self.prefixes {
            self.out.push_str(&prefix.rest);
        }
        self.out.push_str(indent);
        self.out.push_str(line);
    }

    fn image(&mut self, element: &Element) {
        let Some(src) = element.attr("src").map(str::trim).filter(|s| !s.is_empty()) else {
            return;
        };
        let alt = element.attr("alt").map(collapse).unwrap_or_default();
        let mut text = String::from("![");
        for c in alt.chars() {
            if matches!(c, '[' | ']' | '\\') {
                text.push('\\');
            }
            text.push(c);
        }
        text.push_str("](");
        text.push_str(&link_destination(src));
        if let Some(title) = element
            .attr("title")
            .map(collapse)
            .filter(|t| !t.is_empty())
        {
            text.push_str(" \"");
            text.push_str(&title.replace('\\', "\\\\").replace('"', "\\\""));
            text.push('"');
        }
        text.push(')');
        self.raw(&text);
    }

    // -----------------------------------------------------------------------------------------
    // Tables

    fn table(&mut self, table: NodeRef<'_, Node>) {
        let mut caption = String::new();
        let mut rows: Vec<(Vec<Cell>, bool)> = Vec::new();
        let mut physical = 0usize;
        for child in table.children() {
            let Some(element) = child.value().as_element() else {
                continue;
            };
            match element.name() {
                "caption" => caption = self.inline_markdown(child),
                "thead" | "tbody" | "tfoot" => {
                    let head = element.name() == "thead";
                    for row in child.children() {
                        if row.value().as_element().is_some_and(|e| e.name() == "tr") {
                            let cells = self.row_cells(row);
                            physical += cells.len();
                            rows.push((cells, head));
                        }
                    }
                }
                "tr" => {
                    let cells = self.row_cells(child);
                    physical += cells.len();
                    rows.push((cells, false));
                }
                _ => {}
            }
        }
        self.block_break(2);
        if !caption.is_empty() {
            self.raw(&caption);
            self.block_break(2);
        }
        rows.retain(|(cells, _)| !cells.is_empty());
        if rows.is_empty() {
            return;
        }
        // colspan repeats empty cells, never more in all than the table's own cells.
        let mut spare = physical;
        let rows: Vec<(Vec<Cell>, bool)> = rows
            .into_iter()
            .map(|(cells, head)| {
                let mut spread = Vec::with_capacity(cells.len());
                for cell in cells {
                    let extra = cell.colspan.saturating_sub(1).min(spare);
                    spare -= extra;
                    spread.push(cell);
                    spread.extend((0..extra).map(|_| Cell::empty()));
                }
                (spread, head)
            })
            .collect();
        let columns = rows.iter().map(|(cells, _)| cells.len()).max().unwrap_or(1);
        let header_row = rows
            .first()
            .is_some_and(|(cells, head)| *head || cells.iter().all(|c| c.header));
        let mut rows = rows.into_iter();
        let header: Vec<Cell> = if header_row {
            rows.next().map(|(cells, _)| cells).unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut line = String::from("|");
        for i in 0..columns {
            line.push(' ');
            line.push_str(header.get(i).map_or("", |c| c.text.as_str()));
            line.push_str(" |");
        }
        self.raw(&line);
        line.clear();
        line.push('|');
        for i in 0..columns {
            line.push_str(match header.get(i).and_then(|c| c.align) {
                Some(Align::Left) => " :-- |",
                Some(Align::Center) => " :-: |",
                Some(Align::Right) => " --: |",
                None => " --- |",
            });
        }
        self.code_line(&line, "");
        for (cells, _) in rows {
            line.clear();
            line.push('|');
            for cell in cells {
                line.push(' ');
                line.push_str(&cell.text);
                line.push_str(" |");
            }
            self.code_line(&line, "");
        }
        self.line_has_text = true;
        self.block_break(2);
    }

    fn row_cells(&self, row: NodeRef<'_, Node>) -> Vec<Cell> {
        let mut cells = Vec::new();
        for cell in row.children() {
            let Some(element) = cell.value().as_element() else {
                continue;
            };
            let header = match element.name() {
                "th" => true,
                "td" => false,
                _ => continue,
            };
            let text = self.inline_markdown(cell).replace('|', "\\|");
            let colspan = element
                .attr("colspan")
                .and_then(|s| s.trim().parse::<usize>().ok())
                .unwrap_or(1)
                .clamp(1, 1000);
            let align = match element
                .attr("align")
                .map(str::to_ascii_lowercase)
                .as_deref()
            {
                Some("left") => Some(Align::Left),
                Some("center") => Some(Align::Center),
                Some("right") => Some(Align::Right),
                _ => None,
            };
            cells.push(Cell {
                text,
                header,
                colspan,
                align,
            });
        }
        cells
    }

    /// A subtree's content on one line.
    fn inline_markdown(&self, node: NodeRef<'_, Node>) -> String {
        let mut writer = Writer::new(self.style, true);
        writer.walk(node);
        let text = writer.finish();
        text.trim_start().to_string()
    }
}

#[derive(Clone, Copy)]
enum Align {
    Left,
    Center,
    Right,
}

struct Cell {
    text: String,
    header: bool,
    colspan: usize,
    align: Option<Align>,
}

impl Cell {
    fn empty() -> Cell {
        Cell {
            text: String::new(),
            header: false,
            colspan: 1,
            align: None,
        }
    }
}

fn is_block(name: &str) -> bool {
    BLOCKS.contains(&name)
}

/// Elements that are blocks on their own lines but only spaces on a single line.
fn is_heading_or_table_part(name: &str) -> bool {
    matches!(
        name,
        "h1" | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "ul"
            | "ol"
            | "li"
            | "blockquote"
            | "table"
            | "caption"
            | "thead"
            | "tfoot"
            | "tr"
            | "td"
            | "th"
            | "hr"
    )
}

fn parent_is(node: NodeRef<'_, Node>, name: &str) -> bool {
    node.parent()
        .and_then(|p| p.value().as_element().map(|e| e.name() == name))
        .unwrap_or(false)
}

/// A `<pre>`'s text (`<br>` as a line break) and the language its classes name.
fn pre_text(pre: NodeRef<'_, Node>) -> (String, String) {
    let mut code = String::new();
    let mut language = pre
        .value()
        .as_element()
        .and_then(language_of)
        .unwrap_or_default();
    for edge in pre.traverse() {
        if let Edge::Open(node) = edge {
            match node.value() {
                Node::Text(text) => code.push_str(text),
                Node::Element(e) if e.name() == "br" => code.push('\n'),
                Node::Element(e) if e.name() == "code" && language.is_empty() => {
                    language = language_of(e).unwrap_or_default();
                }
                _ => {}
            }
        }
    }
    (code, language)
}

/// `language-xyz` or `lang-xyz` in an element's classes.
fn language_of(element: &Element) -> Option<String> {
    element.classes().find_map(|class| {
        let name = class
            .strip_prefix("language-")
            .or_else(|| class.strip_prefix("lang-"))?;
        let name: String = name
            .chars()
            .filter(|c| !c.is_whitespace() && !matches!(c, '`' | '~'))
            .take(40)
            .collect();
        (!name.is_empty()).then_some(name)
    })
}

/// The longest run of `c` in `text`.
fn longest_run(text: &str, c: char) -> usize {
    let (mut run, mut longest) = (0usize, 0usize);
    for ch in text.chars() {
        if ch == c {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// An attribute's text with whitespace collapsed.
fn collapse(text: &str) -> String {
    text.split(is_html_space)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A link destination: spaces percent-encoded, parentheses and angle brackets escaped.
fn link_destination(href: &str) -> String {
    let mut out = String::with_capacity(href.len());
    for c in href.chars() {
        match c {
            ' ' => out.push_str("%20"),
            '\n' | '\r' | '\t' => {}
            '(' | ')' | '<' | '>' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Writes `word` with what Markdown would read as syntax escaped.
fn escape_into(out: &mut String, word: &str, at_line_start: bool) {
    let plain = word
        .bytes()
        .all(|b| !matches!(b, b'\\' | b'*' | b'`' | b'[' | b']' | b'_' | b'<' | b'&'));
    if plain && (!at_line_start || word.starts_with(|c: char| c.is_alphabetic())) {
        out.push_str(word);
        return;
    }
    let chars: Vec<char> = word.chars().collect();
    let leading_digits = chars.iter().take_while(|c| c.is_ascii_digit()).count();
    for (i, &c) in chars.iter().enumerate() {
        let escape = match c {
            '\\' | '*' | '`' | '[' | ']' => true,
            '_' => {
                let before = i > 0 && chars[i - 1].is_alphanumeric();
                let after = chars.get(i + 1).is_some_and(|c| c.is_alphanumeric());
                !(before && after)
            }
            '#' | '>' | '-' | '+' | '=' | '~' => at_line_start && i == 0,
            '.' | ')' => {
                at_line_start && i > 0 && i == leading_digits && i <= 9 && i + 1 == chars.len()
            }
            '<' => chars
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?')),
            '&' => looks_like_entity(&chars[i + 1..]),
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
    }
}

/// `name;` or `#123;` right after an `&`.
fn looks_like_entity(rest: &[char]) -> bool {
    let body = rest
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == '#')
        .count();
    body > 0 && rest.get(body) == Some(&';')
}
