//! `docs/host-modules.md`'s error table is the one generated from the code declaration in
//! `host-modules/src/error.rs`. Set `NODETOOL_UPDATE_DOCS=1` to write it.

use nodetool_host_modules::error::docs_table;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/host-modules.md");
const BEGIN: &str = "<!-- host-error-codes:begin -->\n";
const END: &str = "<!-- host-error-codes:end -->";

#[test]
fn the_error_table_in_the_docs_is_the_generated_one() {
    let text = std::fs::read_to_string(DOC).unwrap_or_else(|e| panic!("read {DOC}: {e}"));
    let (Some(start), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        panic!("{DOC} has no {BEGIN:?}..{END:?} block");
    };
    let current = &text[start + BEGIN.len()..end];
    let wanted = docs_table();
    if current == wanted {
        return;
    }
    if std::env::var_os("NODETOOL_UPDATE_DOCS").is_some() {
        let updated = format!("{}{wanted}{}", &text[..start + BEGIN.len()], &text[end..]);
        std::fs::write(DOC, updated).unwrap_or_else(|e| panic!("write {DOC}: {e}"));
        return;
    }
    panic!(
        "{DOC}'s error table is stale; run `NODETOOL_UPDATE_DOCS=1 cargo test -p nodetool-host-modules --test error_codes_doc`"
    );
}
