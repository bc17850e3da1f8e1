//! The entry builder, which lives in `nodetool-jssource` (engine-free, so discovery-side and
//! offline tools use the same one): the names the run, the caret and the crate root need.

pub use nodetool_jssource::entry::{BodyImport, BodySyntaxError, body_imports};
pub(crate) use nodetool_jssource::entry::{
    ENTRY_LINE_OFFSET, ENTRY_MODULE_NAME, build_entry, parse_body,
};
