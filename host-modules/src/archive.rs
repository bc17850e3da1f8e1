//! A ZIP container read under the hostile-input rules, for the modules whose formats are archives
//! of parts (docx, pptx, epub): read a part by name, never the whole archive at once.
//!
//! The rules are `zip.unzip`'s: at most [`ArchiveLimits::max_entries`] entries; entries whose
//! compressed data overlaps (so that, together, they claim more than the archive holds) are
//! refused when the archive is opened, which bounds the decompressor's work by the input size;
//! and every part read is charged to one inflation budget for the whole call, read through a
//! reader limited to what is left of it, so a bomb stops one byte past the budget and is never
//! materialized. A part read twice is charged twice.
//!
//! Part names are keys, never paths: nothing here touches a filesystem.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use ::zip::ZipArchive;

/// The bounds of one archive read. No `Default`: each format says what it allows.
#[derive(Debug, Clone, Copy)]
pub struct ArchiveLimits {
    /// Entries the central directory may list.
    pub max_entries: usize,
    /// Bytes all the parts read from the archive may inflate to, together.
    pub max_inflated: u64,
}

/// Why an archive, or one of its parts, could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveError {
    /// The bytes are not a ZIP archive (the reader's reason).
    NotZip(String),
    /// The central directory lists more entries than allowed.
    TooManyEntries { entries: usize, limit: usize },
    /// The entries claim more compressed data than the archive holds: they overlap.
    Overlapping,
    /// The parts read so far inflate past the budget.
    TooLarge { limit: u64 },
    /// One part could not be read (encrypted, an unsupported method, corrupt data).
    Entry { name: String, reason: String },
}

impl ArchiveError {
    /// The reason in words, completing `<id>.<export>: `.
    pub fn message(&self) -> String {
        match self {
            ArchiveError::NotZip(reason) => format!("not a ZIP archive ({reason})"),
            ArchiveError::TooManyEntries { entries, limit } => {
                format!("the archive has {entries} entries, over the {limit} entry limit")
            }
            ArchiveError::Overlapping => {
                "the archive's entries claim more compressed data than it holds; entries that overlap are refused".into()
            }
            ArchiveError::TooLarge { limit } => {
                format!("the archive inflates past the {limit} byte limit")
            }
            ArchiveError::Entry { name, reason } => {
                format!("part {name:?} could not be read ({reason})")
            }
        }
    }
}

/// An opened archive and what is left of its inflation budget.
pub struct SafeArchive<'a> {
    zip: ZipArchive<Cursor<&'a [u8]>>,
    /// File entry name -> index (a name stored twice keeps its last entry).
    index: HashMap<String, usize>,
    remaining: u64,
    limit: u64,
}

impl<'a> SafeArchive<'a> {
    /// Opens `bytes`, checking the entry count and that no entries overlap, before any part
    /// is inflated.
    pub fn open(bytes: &'a [u8], limits: ArchiveLimits) -> Result<SafeArchive<'a>, ArchiveError> {
        let mut zip =
            ZipArchive::new(Cursor::new(bytes)).map_err(|e| ArchiveError::NotZip(e.to_string()))?;
        if zip.len() > limits.max_entries {
            return Err(ArchiveError::TooManyEntries {
                entries: zip.len(),
                limit: limits.max_entries,
            });
        }
        let mut index = HashMap::with_capacity(zip.len());
        let mut compressed = 0u64;
        for i in 0..zip.len() {
            let name = zip.name_for_index(i).unwrap_or_default().to_string();
            let entry = zip.by_index_raw(i).map_err(|e| ArchiveError::Entry {
                name,
                reason: e.to_string(),
            })?;
            if entry.is_dir() {
                continue;
            }
            compressed = compressed.saturating_add(entry.compressed_size());
            if compressed > bytes.len() as u64 {
                return Err(ArchiveError::Overlapping);
            }
            let name = entry.name().to_string();
            drop(entry);
            index.insert(name, i);
        }
        Ok(SafeArchive {
            zip,
            index,
            remaining: limits.max_inflated,
            limit: limits.max_inflated,
        })
    }

    /// The inflated bytes of part `name`, or `None` when there is no such part; charged to the
    /// budget.
    pub fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ArchiveError> {
        let Some(&i) = self.index.get(name) else {
            return Ok(None);
        };
        let entry_error = |reason: String| ArchiveError::Entry {
            name: name.to_string(),
            reason,
        };
        let entry = self
            .zip
            .by_index(i)
            .map_err(|e| entry_error(e.to_string()))?;
        if entry.size() > self.remaining {
            return Err(ArchiveError::TooLarge { limit: self.limit });
        }
        // The declared size is only a capacity hint; the limited reader bounds the work.
        let mut data = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
        entry
            .take(self.remaining + 1)
            .read_to_end(&mut data)
            .map_err(|e| entry_error(e.to_string()))?;
        let read = data.len() as u64;
        if read > self.remaining {
            return Err(ArchiveError::TooLarge { limit: self.limit });
        }
        self.remaining -= read;
        Ok(Some(data))
    }

    /// Part `name` as text: UTF-8 (a BOM dropped) or UTF-16 with its BOM; other bytes are
    /// replaced, never refused.
    pub fn read_text(&mut self, name: &str) -> Result<Option<String>, ArchiveError> {
        Ok(self.read(name)?.map(|bytes| decode_text(&bytes)))
    }
}

/// XML and XHTML parts as text: UTF-8 (a BOM dropped) or UTF-16 with its BOM.
pub fn decode_text(bytes: &[u8]) -> String {
    let utf16 = |le: bool, body: &[u8]| {
        let units: Vec<u16> = body
            .chunks_exact(2)
            .map(|p| {
                if le {
                    u16::from_le_bytes([p[0], p[1]])
                } else {
                    u16::from_be_bytes([p[0], p[1]])
                }
            })
            .collect();
        String::from_utf16_lossy(&units)
    };
    match bytes {
        [0xef, 0xbb, 0xbf, rest @ ..] => String::from_utf8_lossy(rest).into_owned(),
        [0xff, 0xfe, rest @ ..] => utf16(true, rest),
        [0xfe, 0xff, rest @ ..] => utf16(false, rest),
        _ => String::from_utf8_lossy(bytes).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::zip::write::SimpleFileOptions;
    use ::zip::{CompressionMethod, ZipWriter};
    use std::io::Write;

    const LIMITS: ArchiveLimits = ArchiveLimits {
        max_entries: 100,
        max_inflated: 1024 * 1024,
    };

    fn archive(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
        let mut w = ZipWriter::new(Cursor::new(Vec::new()));
        for (name, data) in entries {
            w.start_file(*name, options)
                .unwrap_or_else(|e| panic!("{e}"));
            w.write_all(data).unwrap_or_else(|e| panic!("{e}"));
        }
        w.finish().unwrap_or_else(|e| panic!("{e}")).into_inner()
    }

    #[test]
    fn reads_parts_by_name_and_charges_the_budget() {
        let bytes = archive(&[("a.xml", b"<a/>"), ("b.bin", &[0u8; 600 * 1024])]);
        let mut a = SafeArchive::open(&bytes, LIMITS).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(a.read_text("a.xml"), Ok(Some("<a/>".into())));
        assert_eq!(a.read("missing"), Ok(None));
        assert_eq!(
            a.read("b.bin").map(|d| d.map(|d| d.len())),
            Ok(Some(600 * 1024))
        );
        // A second read of the same part is charged again, and passes the budget.
        assert_eq!(
            a.read("b.bin"),
            Err(ArchiveError::TooLarge { limit: 1024 * 1024 })
        );
    }

    #[test]
    fn a_lying_header_is_stopped_one_byte_past_the_budget() {
        let mut bytes = archive(&[("zeros", &vec![0u8; 4 * 1024 * 1024])]);
        // Rewrite every declared uncompressed size to 0.
        let mut i = 0;
        while i + 30 <= bytes.len() {
            let at = match bytes[i..i + 4] {
                [0x50, 0x4b, 0x03, 0x04] => Some(i + 22),
                [0x50, 0x4b, 0x01, 0x02] => Some(i + 24),
                _ => None,
            };
            if let Some(at) = at {
                bytes[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
            }
            i += 1;
        }
        let mut a = SafeArchive::open(&bytes, LIMITS).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            a.read("zeros"),
            Err(ArchiveError::TooLarge { limit: 1024 * 1024 })
        );
    }

    #[test]
    fn entry_count_overlap_and_garbage_are_refused() {
        let many: Vec<(String, Vec<u8>)> = (0..101).map(|i| (i.to_string(), vec![])).collect();
        let refs: Vec<(&str, &[u8])> = many
            .iter()
            .map(|(n, d)| (n.as_str(), d.as_slice()))
            .collect();
        assert_eq!(
            SafeArchive::open(&archive(&refs), LIMITS).err(),
            Some(ArchiveError::TooManyEntries {
                entries: 101,
                limit: 100
            })
        );
        assert!(matches!(
            SafeArchive::open(b"not a zip", LIMITS).err(),
            Some(ArchiveError::NotZip(_))
        ));
        // Two entries whose central records both point at the first one's data.
        let mut bytes = archive(&[("a", &[7u8; 5000]), ("b", b"")]);
        let eocd = bytes.len() - 22;
        let u32_at = |b: &[u8], at: usize| {
            u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
        };
        let u16_at = |b: &[u8], at: usize| usize::from(u16::from_le_bytes([b[at], b[at + 1]]));
        let first = u32_at(&bytes, eocd + 16);
        let sizes: Vec<u8> = bytes[first + 16..first + 28].to_vec();
        let second = first + 46 + u16_at(&bytes, first + 28);
        // Claim a compressed size as large as the archive itself for the second record.
        bytes[second + 16..second + 28].copy_from_slice(&sizes);
        let len = bytes.len() as u32;
        bytes[second + 20..second + 24].copy_from_slice(&len.to_le_bytes());
        assert_eq!(
            SafeArchive::open(&bytes, LIMITS).err(),
            Some(ArchiveError::Overlapping)
        );
    }

    #[test]
    fn text_decoding() {
        assert_eq!(decode_text(b"\xef\xbb\xbf<a/>"), "<a/>");
        assert_eq!(decode_text(b"\xff\xfe<\0a\0/\0>\0"), "<a/>");
        assert_eq!(decode_text(b"\xfe\xff\0<\0a\0/\0>"), "<a/>");
        assert_eq!(decode_text(b"\xff"), "\u{fffd}");
    }
}
