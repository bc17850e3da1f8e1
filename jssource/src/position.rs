//! Source positions: the 1-based line and column (in characters) of a byte offset, the way
//! every diagnostic of the sandbox names a place in JavaScript source.

/// 1-based line and column (in characters) of a byte offset; an offset past the end, or one
/// inside a character (which no parser produces), answers as the end does, never a panic.
pub fn position(source: &str, offset: u32) -> (u32, u32) {
    let offset = (offset as usize).min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

/// 1-based lines and columns (in characters) of increasing byte offsets of one source, found
/// by walking it once (a [`position`] per offset from the start is quadratic in a source of
/// many imports).
pub struct Positions<'a> {
    source: &'a str,
    at: usize,
    line: u32,
    column: u32,
}

impl<'a> Positions<'a> {
    /// A walker at the start of `source`.
    pub fn new(source: &'a str) -> Positions<'a> {
        Positions {
            source,
            at: 0,
            line: 1,
            column: 1,
        }
    }

    /// The position of `offset`; an offset before the last one (or inside a character) is
    /// found from the start.
    pub fn at(&mut self, offset: u32) -> (u32, u32) {
        let offset = (offset as usize).min(self.source.len());
        let Some(between) = self.source.get(self.at.min(offset)..offset) else {
            return position(self.source, offset as u32);
        };
        if offset < self.at {
            *self = Positions::new(self.source);
            return self.at(offset as u32);
        }
        for c in between.chars() {
            if c == '\n' {
                self.line = self.line.saturating_add(1);
                self.column = 1;
            } else {
                self.column = self.column.saturating_add(1);
            }
        }
        self.at = offset;
        (self.line, self.column)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_characters() {
        let source = "a\nbé\n\nimport x from 'y';\n  z";
        assert_eq!(position(source, 0), (1, 1));
        assert_eq!(position(source, 2), (2, 1));
        // 'é' is two bytes and one column.
        assert_eq!(position(source, 5), (2, 3));
        // Inside a character, or past the end: the end, never a panic.
        assert_eq!(position(source, 4), (5, 4));
        assert_eq!(
            position(source, 10_000),
            position(source, source.len() as u32)
        );
    }

    #[test]
    fn positions_in_one_pass_agree_with_positions_from_the_start() {
        let source = "a\nbé\n\nimport x from 'y';\n  z";
        let mut positions = Positions::new(source);
        for offset in [0u32, 1, 2, 3, 5, 6, 7, 20, 26, 3, 40] {
            assert_eq!(
                positions.at(offset),
                position(source, offset),
                "offset {offset}"
            );
        }
    }
}
