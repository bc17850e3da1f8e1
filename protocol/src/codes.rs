//! Stable codes declared once: [`stable_codes!`](crate::stable_codes) turns one list of
//! `Variant = "name", "what it means", "what to do";` rows into the enum, its table of
//! [`CodeDoc`]s (from which each doc's table is generated with [`docs_table`]), and the
//! conversions to and from the stable name. Host-module errors, install errors and validation
//! issues each declare their codes with it, so a code's name, meaning and advice live in one
//! row, and the three lists cannot drift apart in shape.

/// One code's documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeDoc<C: 'static> {
    /// The code.
    pub code: C,
    /// Its stable name.
    pub name: &'static str,
    /// What it means.
    pub meaning: &'static str,
    /// What the reader of the message can do about it.
    pub todo: &'static str,
}

/// The Markdown table of `codes`: one row per code, its name, meaning and what to do.
pub fn docs_table<C>(codes: &[CodeDoc<C>]) -> String {
    let mut table = String::from("| code | meaning | what to do |\n|---|---|---|\n");
    for doc in codes {
        table.push_str(&format!(
            "| `{}` | {} | {} |\n",
            doc.name, doc.meaning, doc.todo
        ));
    }
    table
}

/// Declares a closed list of stable codes:
///
/// ```
/// nodetool_protocol::stable_codes! {
///     /// Why a thing failed.
///     pub enum ThingCode, table THING_CODES;
///     /// It was missing.
///     Missing = "thing-missing", "The thing is not there.", "Make the thing first.";
/// }
/// assert_eq!(ThingCode::Missing.as_str(), "thing-missing");
/// assert_eq!(ThingCode::parse("thing-missing"), Some(ThingCode::Missing));
/// assert_eq!(ThingCode::Missing.doc().todo, "Make the thing first.");
/// assert_eq!(THING_CODES.len(), 1);
/// ```
#[macro_export]
macro_rules! stable_codes {
    (
        $(#[$enum_attr:meta])*
        $vis:vis enum $name:ident, table $table:ident;
        $($(#[$attr:meta])* $variant:ident = $code:literal, $meaning:literal, $todo:literal;)*
    ) => {
        $(#[$enum_attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $($(#[$attr])* $variant,)*
        }

        /// Every code with its meaning and what to do, in declaration order.
        $vis const $table: &[$crate::codes::CodeDoc<$name>] = &[
            $($crate::codes::CodeDoc {
                code: $name::$variant,
                name: $code,
                meaning: $meaning,
                todo: $todo,
            },)*
        ];

        impl $name {
            /// The stable name, as documented.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            /// The code whose stable name is `name`.
            pub fn parse(name: &str) -> Option<$name> {
                match name {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// This code's documentation (the table is built from the same rows as the enum,
            /// so every code is in it).
            pub fn doc(self) -> &'static $crate::codes::CodeDoc<$name> {
                let found = $table.iter().find(|d| d.code == self);
                found.unwrap_or(&$table[0])
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::stable_codes! {
        /// Test codes.
        pub enum Sample, table SAMPLES;
        /// One.
        One = "sample-one", "The first.", "Do one.";
        /// Two.
        Two = "sample-two", "The second.", "Do two.";
    }

    #[test]
    fn one_row_gives_the_name_the_parse_the_doc_and_the_table() {
        assert_eq!(Sample::Two.as_str(), "sample-two");
        assert_eq!(Sample::Two.to_string(), "sample-two");
        assert_eq!(Sample::parse("sample-one"), Some(Sample::One));
        assert_eq!(Sample::parse("sample-three"), None);
        assert_eq!(Sample::Two.doc().meaning, "The second.");
        assert_eq!(
            super::docs_table(SAMPLES),
            "| code | meaning | what to do |\n|---|---|---|\n| `sample-one` | The first. | Do one. |\n| `sample-two` | The second. | Do two. |\n"
        );
    }
}
