//! `zip`: unzip and zip with the inflation cap (the `zip` crate).
//!
//! The module runs on the host on purpose: the inflation cap is the zip-bomb policy, and it has
//! to hold in code the guest cannot bypass. `unzip` reads every entry through a reader limited
//! to what is left of the cap, so a bomb is stopped after at most one byte past the cap has
//! been inflated, never after it has been materialized; a declared size already over what is
//! left is refused before inflating at all. Entries whose compressed data overlaps (so that,
//! together, they claim more than the archive holds) are refused too, which bounds the
//! decompressor's work by the input size even when it produces nothing.
//!
//! Entry names are only keys of the returned object: nothing here touches a filesystem, so names
//! are kept exactly as the archive spells them, `..` segments and absolute names included
//! (whatever the guest does with them, e.g. `workspace.writeBytes`, applies its own path rules).
//! Directory entries are skipped. The reader lists each name once (a name stored twice keeps
//! its last entry, as an object would).
//!
//! Names are decoded as `unzip` shows them on a UTF-8 system: the Info-ZIP Unicode Path extra
//! field (0x7075) when its checksum matches the stored name, else UTF-8 when the UTF-8 flag is
//! set or the stored bytes are valid UTF-8 (Info-ZIP's `zip` on Linux stores UTF-8 names
//! without the flag), and CP437 only for bytes that are not UTF-8.

use std::io::{Cursor, Read, Write};

use ::zip::write::SimpleFileOptions;
use ::zip::{CompressionMethod, ZipArchive, ZipWriter};
use nodetool_protocol::value::Value;

use crate::error::{HostError, HostErrorCode};
use crate::limits::require_bytes;

/// The most bytes one `unzip` may inflate, over all entries (50 MiB).
pub const MAX_UNZIP_TOTAL_BYTES: u64 = 50 * 1024 * 1024;

/// The most entries an archive may hold, for `unzip` and `zip` alike.
pub const MAX_ZIP_ENTRIES: usize = 10_000;

/// Why an archive could not be unpacked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum UnzipFailure {
    /// The bytes are not a ZIP archive (the reader's reason).
    NotZip(String),
    /// The central directory lists more than [`MAX_ZIP_ENTRIES`] entries.
    TooManyEntries(usize),
    /// The running total passed the cap; `inflated` is how many bytes had actually been
    /// inflated when it stopped (at most the cap plus one).
    TooLarge { inflated: u64 },
    /// One entry could not be read (encrypted, an unsupported method, corrupt data);
    /// `unsupported` when the reader says it is a variant it does not implement.
    Entry {
        name: String,
        reason: String,
        unsupported: bool,
    },
}

impl UnzipFailure {
    fn error(&self, cap: u64) -> HostError {
        const AT: &str = "zip.unzip";
        match self {
            UnzipFailure::NotZip(reason) => {
                HostError::malformed(format!("{AT}: not a ZIP archive ({reason})"))
            }
            UnzipFailure::TooManyEntries(n) => HostError::limit(format!(
                "{AT}: the archive has {n} entries, over the {MAX_ZIP_ENTRIES} entry limit"
            )),
            UnzipFailure::TooLarge { .. } => {
                HostError::limit(format!("{AT}: archive inflates past the {cap} byte limit"))
            }
            UnzipFailure::Entry {
                name,
                reason,
                unsupported,
            } => HostError::new(
                if *unsupported {
                    HostErrorCode::Unsupported
                } else {
                    HostErrorCode::MalformedInput
                },
                format!("{AT}: entry {name:?} could not be read ({reason})"),
            ),
        }
    }
}

/// Inflates every file entry of `bytes`, in archive order, stopping as soon as the total would
/// pass `cap`.
fn inflate(bytes: &[u8], cap: u64) -> Result<Vec<(String, Vec<u8>)>, UnzipFailure> {
    let mut archive =
        ZipArchive::new(Cursor::new(bytes)).map_err(|e| UnzipFailure::NotZip(e.to_string()))?;
    if archive.len() > MAX_ZIP_ENTRIES {
        return Err(UnzipFailure::TooManyEntries(archive.len()));
    }
    let mut entries: Vec<(String, Vec<u8>)> = Vec::with_capacity(archive.len());
    let (mut total, mut compressed) = (0u64, 0u64);
    for index in 0..archive.len() {
        let listed = archive
            .name_for_index(index)
            .unwrap_or_default()
            .to_string();
        let entry_error = |name: &str, reason: String, unsupported: bool| UnzipFailure::Entry {
            name: name.to_string(),
            reason,
            unsupported,
        };
        let entry = archive.by_index(index).map_err(|e| {
            let unsupported = matches!(e, ::zip::result::ZipError::UnsupportedArchive(_));
            entry_error(&listed, e.to_string(), unsupported)
        })?;
        // The reader has already put a valid Unicode Path field in place of the stored name
        // (and set the flag); a name stored without the flag it decoded as CP437, which is
        // only right when the bytes are not UTF-8.
        let name = match std::str::from_utf8(entry.name_raw()) {
            Ok(utf8) => utf8.to_string(),
            Err(_) => listed,
        };
        let entry_error = |reason: String| entry_error(&name, reason, false);
        if entry.is_dir() {
            continue;
        }
        // Entries of a well-formed archive hold disjoint data, so together they claim at most the
        // archive's length. Entries that share data could make the decompressor go over the
        // same bytes once per entry; bounding the claim bounds that work, output or not.
        compressed = compressed.saturating_add(entry.compressed_size());
        if compressed > bytes.len() as u64 {
            return Err(UnzipFailure::NotZip(format!(
                "its entries claim more compressed data than the archive's {} bytes; entries that overlap are refused",
                bytes.len()
            )));
        }
        // `total <= cap` holds at the top of every iteration.
        let remaining = cap - total;
        let declared = entry.size();
        if declared > remaining {
            return Err(UnzipFailure::TooLarge { inflated: total });
        }
        // The declared size is only a capacity hint (at most what is left of the cap); the
        // limited reader is what bounds the work when the header lies.
        let mut data = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
        entry
            .take(remaining + 1)
            .read_to_end(&mut data)
            .map_err(|e| entry_error(e.to_string()))?;
        total += data.len() as u64;
        if total > cap {
            return Err(UnzipFailure::TooLarge { inflated: total });
        }
        data.shrink_to_fit();
        entries.push((name, data));
    }
    Ok(entries)
}

/// `unzip(bytes)` -> `{path: Uint8Array}` for every file entry (directories skipped), at most
/// [`MAX_UNZIP_TOTAL_BYTES`] inflated in all. A ZIP inside the archive comes back as bytes: one
/// level only.
pub fn unzip(args: &[Value]) -> Result<Value, HostError> {
    let bytes = require_bytes("zip.unzip", args.first(), "bytes")?;
    match inflate(bytes, MAX_UNZIP_TOTAL_BYTES) {
        Ok(entries) => Ok(Value::Object(
            entries
                .into_iter()
                .map(|(name, data)| (name, Value::Bytes(data)))
                .collect(),
        )),
        Err(failure) => Err(failure.error(MAX_UNZIP_TOTAL_BYTES)),
    }
}

/// `zip(files)` -> a deflated archive as bytes. `files` is an object of name -> Uint8Array or
/// string (strings are UTF-8 encoded), at most [`MAX_ZIP_ENTRIES`] entries and
/// [`MAX_UNZIP_TOTAL_BYTES`] in all, so whatever `zip` builds `unzip` can read back. Entries keep
/// the object's order and a fixed timestamp (1980-01-01), so equal input gives equal bytes.
pub fn zip(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "zip.zip";
    let Some(Value::Object(members)) = args.first() else {
        return Err(HostError::invalid(format!(
            "{AT}: files must be an object of name -> Uint8Array or string"
        )));
    };
    if members.len() > MAX_ZIP_ENTRIES {
        return Err(HostError::limit(format!(
            "{AT}: {} entries exceeds the {MAX_ZIP_ENTRIES} entry limit",
            members.len()
        )));
    }
    // Every entry is checked, and the total bounded, before any compression work.
    let mut entries: Vec<(&str, &[u8])> = Vec::with_capacity(members.len());
    let mut total: u64 = 0;
    for (name, value) in members {
        let data: &[u8] = match value {
            Value::Bytes(b) => b,
            Value::String(s) => s.as_bytes(),
            _ => {
                return Err(HostError::invalid(format!(
                    "{AT}: entry {name:?} must be a Uint8Array or string"
                )));
            }
        };
        total = total.saturating_add(data.len() as u64);
        if total > MAX_UNZIP_TOTAL_BYTES {
            return Err(HostError::limit(format!(
                "{AT}: entries exceed the {MAX_UNZIP_TOTAL_BYTES} byte limit"
            )));
        }
        entries.push((name, data));
    }
    let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data) in entries {
        // Writing to memory fails only on a bug.
        let failed = |e: &dyn std::fmt::Display| {
            HostError::new(
                HostErrorCode::Internal,
                format!("{AT}: entry {name:?} could not be written ({e})"),
            )
        };
        writer.start_file(name, options).map_err(|e| failed(&e))?;
        writer.write_all(data).map_err(|e| failed(&e))?;
    }
    let archive = writer.finish().map_err(|e| {
        HostError::new(
            HostErrorCode::Internal,
            format!("{AT}: the archive could not be finished ({e})"),
        )
    })?;
    Ok(Value::Bytes(archive.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ocr::tests::crc32;

    const MIB: usize = 1024 * 1024;
    const LIMIT: &str = "zip.unzip: archive inflates past the 52428800 byte limit";

    fn object(members: Vec<(&str, Value)>) -> Value {
        Value::Object(
            members
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    fn bytes_of(v: Result<Value, HostError>) -> Vec<u8> {
        match v {
            Ok(Value::Bytes(b)) => b,
            other => panic!("expected bytes, got {other:?}"),
        }
    }

    /// An archive of `count` entries of `size` zero bytes each, deflated. The entry is
    /// compressed once and raw-copied under new names, so building it is cheap.
    fn bomb(count: usize, size: usize) -> Vec<u8> {
        let options = SimpleFileOptions::default().compression_method(CompressionMethod::Deflated);
        let mut one = ZipWriter::new(Cursor::new(Vec::new()));
        one.start_file("zeros", options)
            .unwrap_or_else(|e| panic!("{e}"));
        one.write_all(&vec![0; size])
            .unwrap_or_else(|e| panic!("{e}"));
        let mut source = one.finish_into_readable().unwrap_or_else(|e| panic!("{e}"));
        let mut out = ZipWriter::new(Cursor::new(Vec::new()));
        for i in 0..count {
            let file = source.by_index_raw(0).unwrap_or_else(|e| panic!("{e}"));
            out.raw_copy_file_rename(file, format!("zeros-{i:03}.bin"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        out.finish().unwrap_or_else(|e| panic!("{e}")).into_inner()
    }

    /// Rewrites every declared uncompressed size (local headers and central directory) to 0,
    /// as a hostile archive would, so only the limited reader stands between it and the memory.
    fn lie_about_sizes(mut archive: Vec<u8>) -> Vec<u8> {
        let mut i = 0;
        while i + 46 <= archive.len() {
            let field = match archive[i..i + 4] {
                [0x50, 0x4b, 0x03, 0x04] => Some(i + 22),
                [0x50, 0x4b, 0x01, 0x02] => Some(i + 24),
                _ => None,
            };
            if let Some(at) = field {
                archive[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
            }
            i += 1;
        }
        archive
    }

    #[test]
    fn round_trip() {
        let files = object(vec![
            ("hello.txt", Value::String("héllo, wörld\n".into())),
            ("data/raw.bin", Value::Bytes(vec![0, 1, 2, 255])),
            ("empty", Value::Bytes(vec![])),
            // Names are keys, never paths: kept exactly as given.
            ("../up.txt", Value::String("up".into())),
            ("/abs.txt", Value::String("abs".into())),
            ("__proto__", Value::String("key".into())),
        ]);
        let archive = bytes_of(zip(std::slice::from_ref(&files)));
        assert_eq!(&archive[..4], b"PK\x03\x04");
        // Deterministic: equal input, equal bytes.
        assert_eq!(bytes_of(zip(std::slice::from_ref(&files))), archive);
        let back = unzip(&[Value::Bytes(archive)]);
        let want = object(vec![
            (
                "hello.txt",
                Value::Bytes("héllo, wörld\n".as_bytes().to_vec()),
            ),
            ("data/raw.bin", Value::Bytes(vec![0, 1, 2, 255])),
            ("empty", Value::Bytes(vec![])),
            ("../up.txt", Value::Bytes(b"up".to_vec())),
            ("/abs.txt", Value::Bytes(b"abs".to_vec())),
            ("__proto__", Value::Bytes(b"key".to_vec())),
        ]);
        assert_eq!(back, Ok(want));
        // Deflated, not stored.
        let text = "the same line again\n".repeat(1000);
        let packed = bytes_of(zip(&[object(vec![("t.txt", Value::String(text.clone()))])]));
        assert!(packed.len() < text.len() / 10, "{} bytes", packed.len());
        assert_eq!(
            unzip(&[Value::Bytes(packed)]),
            Ok(object(vec![("t.txt", Value::Bytes(text.into_bytes()))]))
        );
        assert_eq!(
            bytes_of(zip(&[Value::Object(vec![])])).len(),
            22,
            "an empty archive is its end record"
        );
    }

    /// An archive of one stored entry whose name bytes are `stored` with no UTF-8 flag (as
    /// Info-ZIP writes it on Linux), with a Unicode Path field of `unicode` when given. Built by
    /// hand: the zip crate's writer refuses to write that field itself.
    fn archive_named(stored: &[u8], unicode: Option<(&str, u32)>) -> Vec<u8> {
        let data = b"hi";
        let mut extra = Vec::new();
        if let Some((name, crc)) = unicode {
            extra.extend_from_slice(&0x7075u16.to_le_bytes());
            extra.extend_from_slice(&(5 + name.len() as u16).to_le_bytes());
            extra.push(1);
            extra.extend_from_slice(&crc.to_le_bytes());
            extra.extend_from_slice(name.as_bytes());
        }
        let u16s = |out: &mut Vec<u8>, values: &[u16]| {
            for v in values {
                out.extend_from_slice(&v.to_le_bytes());
            }
        };
        let (name_len, extra_len, size) =
            (stored.len() as u16, extra.len() as u16, data.len() as u32);
        let crc = crc32(data);
        let mut out = 0x0403_4b50u32.to_le_bytes().to_vec();
        u16s(&mut out, &[20, 0, 0, 0, 0x21]);
        for v in [crc, size, size] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        u16s(&mut out, &[name_len, extra_len]);
        out.extend_from_slice(stored);
        out.extend_from_slice(&extra);
        out.extend_from_slice(data);
        let central = out.len() as u32;
        out.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        u16s(&mut out, &[0x031e, 20, 0, 0, 0, 0x21]);
        for v in [crc, size, size] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        u16s(&mut out, &[name_len, extra_len, 0, 0, 0]);
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(stored);
        out.extend_from_slice(&extra);
        let central_len = out.len() as u32 - central;
        out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
        u16s(&mut out, &[0, 0, 1, 1]);
        out.extend_from_slice(&central_len.to_le_bytes());
        out.extend_from_slice(&central.to_le_bytes());
        u16s(&mut out, &[0]);
        out
    }

    fn names(bytes: Vec<u8>) -> Vec<String> {
        match unzip(&[Value::Bytes(bytes)]) {
            Ok(Value::Object(members)) => members.into_iter().map(|(k, _)| k).collect(),
            other => panic!("unzip: {other:?}"),
        }
    }

    #[test]
    fn names_are_decoded_as_unzip_shows_them() {
        let utf8 = "ünïcødé/fïle.txt";
        // Info-ZIP on Linux: UTF-8 bytes, no flag (decoded as CP437 this read ├╝n├»c├╕d├⌐).
        assert_eq!(names(archive_named(utf8.as_bytes(), None)), [utf8]);
        // The same with its Unicode Path field.
        let field = Some((utf8, crc32(utf8.as_bytes())));
        assert_eq!(names(archive_named(utf8.as_bytes(), field)), [utf8]);
        // A CP437 name (0x81 is ü there) with a Unicode Path field: the field wins.
        let cp437 = b"\x81ber.txt";
        let field = Some(("über.txt", crc32(cp437)));
        assert_eq!(names(archive_named(cp437, field)), ["über.txt"]);
        // Without the field, bytes that are not UTF-8 are CP437.
        assert_eq!(names(archive_named(cp437, None)), ["über.txt"]);
        assert_eq!(names(archive_named(b"\x82t\x82.txt", None)), ["été.txt"]);
        // A field whose checksum is not the stored name's is not believed.
        let stale = Some(("other.txt", 0x1234_5678));
        let out = unzip(&[Value::Bytes(archive_named(cp437, stale))]);
        assert!(
            matches!(&out, Ok(Value::Object(m)) if m[0].0 == "über.txt")
                || matches!(&out, Err(e) if e.message().starts_with("zip.unzip: ")),
            "{out:?}"
        );
    }

    #[test]
    fn the_bomb_is_stopped_at_the_cap() {
        let archive = bomb(120, MIB);
        assert!(
            archive.len() < 200 * 1024,
            "deflated zeros are small: {} bytes",
            archive.len()
        );
        let cap = MAX_UNZIP_TOTAL_BYTES;
        // Honest headers: refused on the first entry whose declared size does not fit, after
        // exactly the 50 entries that do.
        assert_eq!(
            inflate(&archive, cap),
            Err(UnzipFailure::TooLarge { inflated: cap })
        );
        assert_eq!(
            unzip(&[Value::Bytes(archive.clone())]).err(),
            Some(HostError::limit(LIMIT))
        );
        // Lying headers: the limited reader stops one byte past the cap.
        let liar = lie_about_sizes(archive);
        assert_eq!(
            inflate(&liar, cap),
            Err(UnzipFailure::TooLarge { inflated: cap + 1 })
        );
        assert_eq!(
            unzip(&[Value::Bytes(liar)]).err(),
            Some(HostError::limit(LIMIT))
        );
    }

    #[test]
    fn one_lying_entry_is_never_materialized() {
        // A single 4 MiB entry declaring 0 bytes, against a 1 MiB cap: the reader stops inside
        // the entry, and only the cap plus one byte was ever inflated.
        let liar = lie_about_sizes(bomb(1, 4 * MIB));
        let cap = MIB as u64;
        assert_eq!(
            inflate(&liar, cap),
            Err(UnzipFailure::TooLarge { inflated: cap + 1 })
        );
        // Under a cap it fits, the entry inflates whole: the header is only a hint, the cap is
        // the bound.
        let sizes = inflate(&liar, 8 * cap)
            .map(|entries| entries.iter().map(|(_, d)| d.len()).collect::<Vec<_>>());
        assert_eq!(sizes, Ok(vec![4 * MIB]));
        // Exactly at the cap is allowed.
        let exact = bomb(2, MIB);
        let sizes = inflate(&exact, 2 * cap)
            .map(|entries| entries.iter().map(|(_, d)| d.len()).collect::<Vec<_>>());
        assert_eq!(sizes, Ok(vec![MIB, MIB]));
        assert_eq!(
            inflate(&exact, 2 * cap - 1),
            Err(UnzipFailure::TooLarge { inflated: cap })
        );
    }

    #[test]
    fn entries_sharing_their_data_are_refused() {
        // One 64 KiB stored entry, then 199 empty ones rewritten to point at its data: each
        // would inflate the same 64 KiB again.
        let options = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
        let mut w = ZipWriter::new(Cursor::new(Vec::new()));
        let mut seed = 1u32;
        let noise: Vec<u8> = (0..64 * 1024)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (seed >> 16) as u8
            })
            .collect();
        w.start_file("big", options)
            .unwrap_or_else(|e| panic!("{e}"));
        w.write_all(&noise).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..199 {
            w.start_file(format!("e{i:03}"), options)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let mut archive = w.finish().unwrap_or_else(|e| panic!("{e}")).into_inner();
        assert_eq!(
            inflate(&archive, MAX_UNZIP_TOTAL_BYTES).map(|e| e.len()),
            Ok(200)
        );

        // Walk the central directory from the end record and aim every later entry at the
        // first one's data (CRC and both sizes copied, local header offset 0).
        let u32_at =
            |b: &[u8], at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let u16_at = |b: &[u8], at: usize| usize::from(u16::from_le_bytes([b[at], b[at + 1]]));
        let eocd = archive.len() - 22;
        let mut at = u32_at(&archive, eocd + 16) as usize;
        let first: Vec<u8> = archive[at + 16..at + 28].to_vec();
        for record in 0..200 {
            assert_eq!(&archive[at..at + 4], b"PK\x01\x02");
            let next = at
                + 46
                + u16_at(&archive, at + 28)
                + u16_at(&archive, at + 30)
                + u16_at(&archive, at + 32);
            if record > 0 {
                archive[at + 16..at + 28].copy_from_slice(&first);
                archive[at + 42..at + 46].copy_from_slice(&0u32.to_le_bytes());
            }
            at = next;
        }
        let e = unzip(&[Value::Bytes(archive)])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(
            e.starts_with("zip.unzip: not a ZIP archive (its entries claim more compressed data than the archive's ")
                && e.ends_with(" bytes; entries that overlap are refused)"),
            "{e}"
        );
    }

    #[test]
    fn a_nested_zip_unzips_one_level() {
        let inner = bomb(120, MIB);
        let outer = bytes_of(zip(&[object(vec![
            ("inner.zip", Value::Bytes(inner.clone())),
            ("note.txt", Value::String("a bomb inside".into())),
        ])]));
        let out = unzip(&[Value::Bytes(outer)]);
        assert_eq!(
            out,
            Ok(object(vec![
                ("inner.zip", Value::Bytes(inner.clone())),
                ("note.txt", Value::Bytes(b"a bomb inside".to_vec()))
            ]))
        );
        // Unzipping the inner archive in turn meets the same cap.
        assert_eq!(
            unzip(&[Value::Bytes(inner)]).err(),
            Some(HostError::limit(LIMIT))
        );
    }

    #[test]
    fn directories_are_skipped() {
        let options = SimpleFileOptions::default();
        let mut w = ZipWriter::new(Cursor::new(Vec::new()));
        w.add_directory("dir/", options)
            .unwrap_or_else(|e| panic!("{e}"));
        w.start_file("dir/a.txt", options)
            .unwrap_or_else(|e| panic!("{e}"));
        w.write_all(b"a").unwrap_or_else(|e| panic!("{e}"));
        let archive = w.finish().unwrap_or_else(|e| panic!("{e}")).into_inner();
        assert_eq!(
            unzip(&[Value::Bytes(archive)]),
            Ok(object(vec![("dir/a.txt", Value::Bytes(b"a".to_vec()))]))
        );
    }

    #[test]
    fn entry_count_is_capped() {
        let options = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
        let mut w = ZipWriter::new(Cursor::new(Vec::new()));
        for i in 0..=MAX_ZIP_ENTRIES {
            w.start_file(format!("{i}"), options)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let archive = w.finish().unwrap_or_else(|e| panic!("{e}")).into_inner();
        assert_eq!(
            unzip(&[Value::Bytes(archive)]),
            Err(HostError::limit(
                "zip.unzip: the archive has 10001 entries, over the 10000 entry limit"
            ))
        );
        let many = Value::Object(
            (0..=MAX_ZIP_ENTRIES)
                .map(|i| (i.to_string(), Value::String(String::new())))
                .collect(),
        );
        assert_eq!(
            zip(&[many]),
            Err(HostError::limit(
                "zip.zip: 10001 entries exceeds the 10000 entry limit"
            ))
        );
    }

    #[test]
    fn garbage_and_bad_arguments() {
        for garbage in [&b"not a zip at all"[..], b"", b"PK\x05\x06"] {
            let e = unzip(&[Value::Bytes(garbage.to_vec())])
                .err()
                .map(|e| (e.code(), e.into_message()));
            let Some((HostErrorCode::MalformedInput, e)) = e else {
                panic!("{e:?}")
            };
            assert!(
                e.starts_with("zip.unzip: not a ZIP archive (") && e.ends_with(')'),
                "{e}"
            );
        }
        assert_eq!(
            unzip(&[Value::String("PK".into())]),
            Err(HostError::invalid(
                "zip.unzip: bytes must be a Uint8Array (e.g. from workspace.readBytes or response.bytes())"
            ))
        );
        assert_eq!(
            unzip(&[]),
            Err(HostError::invalid(
                "zip.unzip: bytes must be a Uint8Array (e.g. from workspace.readBytes or response.bytes())"
            ))
        );
        assert_eq!(
            unzip(&[Value::Bytes(vec![0; 10 * MIB + 1])]),
            Err(HostError::new(
                HostErrorCode::InputTooLarge,
                "zip.unzip: input exceeds the 10485760 byte limit"
            ))
        );

        // A corrupted entry names itself.
        let mut archive = bytes_of(zip(&[object(vec![(
            "a.txt",
            Value::String("hello hello hello".repeat(50)),
        )])]));
        archive[40] ^= 0xff;
        let e = unzip(&[Value::Bytes(archive)])
            .err()
            .map(HostError::into_message)
            .unwrap_or_default();
        assert!(
            e.starts_with("zip.unzip: entry \"a.txt\" could not be read ("),
            "{e}"
        );

        let files_message = "zip.zip: files must be an object of name -> Uint8Array or string";
        for bad in [
            Value::Array(vec![]),
            Value::String("x".into()),
            Value::Null,
            Value::Bytes(vec![]),
        ] {
            assert_eq!(zip(&[bad]), Err(HostError::invalid(files_message)));
        }
        assert_eq!(zip(&[]), Err(HostError::invalid(files_message)));
        assert_eq!(
            zip(&[object(vec![
                ("ok", Value::String("x".into())),
                ("n", Value::Number(1.0))
            ])]),
            Err(HostError::invalid(
                "zip.zip: entry \"n\" must be a Uint8Array or string"
            ))
        );
        assert_eq!(
            zip(&[object(vec![("nested", object(vec![]))])]),
            Err(HostError::invalid(
                "zip.zip: entry \"nested\" must be a Uint8Array or string"
            ))
        );
        let half = || Value::Bytes(vec![0; 25 * MIB]);
        assert!(zip(&[object(vec![("a", half()), ("b", half())])]).is_ok());
        assert_eq!(
            zip(&[object(vec![
                ("a", half()),
                ("b", half()),
                ("c", Value::String("x".into()))
            ])])
            .err(),
            Some(HostError::limit(
                "zip.zip: entries exceed the 52428800 byte limit"
            ))
        );
    }
}
