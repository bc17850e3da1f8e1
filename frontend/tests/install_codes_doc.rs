//! README.md's table of install error codes is the one generated from the declaration in
//! `frontend/src/install/codes.rs`. Set `NODETOOL_UPDATE_DOCS=1` to write it.

use nodetool_frontend::install::codes::docs_table;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
const BEGIN: &str = "<!-- install-error-codes:begin -->\n";
const END: &str = "<!-- install-error-codes:end -->";

#[test]
fn the_install_code_table_in_the_readme_is_the_generated_one() {
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
        "{DOC}'s install code table is stale; run `NODETOOL_UPDATE_DOCS=1 cargo test -p nodetool-frontend --test install_codes_doc`"
    );
}
