//! The recent records of the audit log (`audit_log` as a file), read from the file's end for
//! the console's audit page: newest first, a page at a time, paged back by byte offset.
//!
//! A record is a comment line (when, who, from where) and an LDIF change record ended by an
//! empty line (`crate::audit`); LDIF never has an empty line inside a record (values with line
//! breaks are base64), so records are split on "\n\n". The file is read backwards in chunks of
//! `CHUNK` bytes until a page's records are found, and never more than `MAX_PAGE_BYTES` for one
//! page: memory is bounded whatever the file's size. A record still being written (the file
//! does not end with an empty line yet) is left for the next look. After logrotate moved the
//! file, the page shows what the new file holds; an offset of the old file that is not a
//! record's start in the new one is answered from the new file's end.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Bytes read from the file at a time, backwards.
const CHUNK: usize = 64 * 1024;
/// Bytes one page reads from the file at most.
pub const MAX_PAGE_BYTES: usize = 4 * 1024 * 1024;
/// Bytes of one record shown at most (a record with large values is cut, and says so).
pub const MAX_RECORD_SHOWN: usize = 16 * 1024;

/// One page of records.
#[derive(Debug, Default)]
pub struct Page {
    /// The records, newest first: where each starts in the file, and its text (cut at
    /// `MAX_RECORD_SHOWN`, with how many bytes were left out).
    pub records: Vec<(u64, String, usize)>,
    /// Where the oldest record shown starts, when older ones remain: the `before` of the next
    /// page.
    pub older: Option<u64>,
    /// The file's size when it was read.
    pub size: u64,
    /// The `before` asked for was not a record's start in the file as it is now (it was
    /// rotated): the page starts from the end instead.
    pub restarted: bool,
    /// A record larger than `MAX_PAGE_BYTES` stopped the page before it was full.
    pub too_large: bool,
}

/// Up to `n` records ending before byte `before` (the file's end when `None`), newest first.
pub fn read_page(path: &Path, before: Option<u64>, n: usize) -> std::io::Result<Page> {
    let mut f = std::fs::File::open(path)?;
    let size = f.metadata()?.len();
    let mut page = Page {
        size,
        ..Page::default()
    };
    let end = match before {
        Some(b) if b <= size && at_record_start(&mut f, b)? => b,
        Some(_) => {
            page.restarted = true;
            size
        }
        None => size,
    };
    // Bytes [pos, end) of the file.
    let mut buf: Vec<u8> = Vec::new();
    let mut pos = end;
    // The end of the complete records in `buf`: from the file's end, up to its last empty
    // line (a record being written waits); from a record's start, all of it.
    let complete = |buf: &[u8]| {
        if end == size {
            find_last(buf, b"\n\n").map_or(0, |i| i + 2)
        } else {
            buf.len()
        }
    };
    loop {
        let starts = record_starts(&buf, pos == 0, complete(&buf));
        if starts.len() >= n || pos == 0 {
            break;
        }
        if buf.len() >= MAX_PAGE_BYTES {
            page.too_large = true;
            break;
        }
        let take = (CHUNK as u64)
            .min(pos)
            .min((MAX_PAGE_BYTES - buf.len()) as u64) as usize;
        pos -= take as u64;
        let mut chunk = vec![0u8; take];
        f.seek(SeekFrom::Start(pos))?;
        f.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&buf);
        buf = chunk;
    }
    let limit = complete(&buf);
    let starts = record_starts(&buf, pos == 0, limit);
    // Newest first: the record from each start to the next (or to the complete end).
    let mut bounds: Vec<(usize, usize)> = starts
        .iter()
        .zip(starts.iter().skip(1).copied().chain(std::iter::once(limit)))
        .map(|(&a, b)| (a, b))
        .collect();
    bounds.reverse();
    for &(a, b) in bounds.iter().take(n) {
        let text = &buf[a..b];
        let shown = text.len().min(MAX_RECORD_SHOWN);
        page.records.push((
            pos + a as u64,
            String::from_utf8_lossy(&text[..shown])
                .trim_end()
                .to_string(),
            text.len() - shown,
        ));
    }
    if let Some(&(start, _, _)) = page.records.last() {
        if start > 0 {
            page.older = Some(start);
        }
    }
    Ok(page)
}

/// Whether byte `at` of the file starts a record: its start, or just after an empty line.
fn at_record_start(f: &mut std::fs::File, at: u64) -> std::io::Result<bool> {
    if at == 0 {
        return Ok(true);
    }
    if at < 2 {
        return Ok(false);
    }
    let mut two = [0u8; 2];
    f.seek(SeekFrom::Start(at - 2))?;
    f.read_exact(&mut two)?;
    Ok(&two == b"\n\n")
}

/// Where records start in `buf[..limit]`: after each "\n\n", and at 0 when `buf` begins the file.
fn record_starts(buf: &[u8], from_file_start: bool, limit: usize) -> Vec<usize> {
    let mut out = Vec::new();
    if from_file_start && limit > 0 {
        out.push(0);
    }
    let mut i = 0;
    while i + 2 <= limit {
        if &buf[i..i + 2] == b"\n\n" {
            let s = i + 2;
            if s < limit && buf[s] != b'\n' {
                out.push(s);
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    out
}

fn find_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "test code")]
mod tests {
    use super::*;
    use std::io::Write;

    fn record(i: usize) -> String {
        format!("# 2026-11-28T10:00:00Z conn=1 client=127.0.0.1:1 by=\"cn=admin\"\ndn: uid=u{i},dc=example,dc=com\nchangetype: modify\nreplace: description\ndescription: v{i}\n-\n\n")
    }

    fn file_of(n: usize, tail: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for i in 0..n {
            f.write_all(record(i).as_bytes()).unwrap();
        }
        f.write_all(tail.as_bytes()).unwrap();
        f.flush().unwrap();
        f
    }

    fn uids(p: &Page) -> Vec<String> {
        p.records
            .iter()
            .map(|(_, t, _)| {
                let dn = t.lines().nth(1).unwrap();
                dn.trim_start_matches("dn: uid=")
                    .split(',')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn newest_first_paged_back_to_the_start() {
        let f = file_of(7, "");
        let p = read_page(f.path(), None, 3).unwrap();
        assert_eq!(uids(&p), ["u6", "u5", "u4"]);
        let p = read_page(f.path(), p.older, 3).unwrap();
        assert_eq!(uids(&p), ["u3", "u2", "u1"]);
        let p = read_page(f.path(), p.older, 3).unwrap();
        assert_eq!(uids(&p), ["u0"]);
        assert_eq!(p.older, None);
        assert!(!p.restarted);
    }

    #[test]
    fn a_record_being_written_waits_and_an_empty_file_has_none() {
        let f = file_of(2, "# 2026 conn=1\ndn: uid=half");
        assert_eq!(uids(&read_page(f.path(), None, 5).unwrap()), ["u1", "u0"]);
        let e = file_of(0, "");
        let p = read_page(e.path(), None, 5).unwrap();
        assert!(p.records.is_empty() && p.older.is_none());
    }

    #[test]
    fn a_large_file_is_read_from_its_end_only() {
        // Far more than a page may read: the newest records come back all the same.
        let f = file_of(60_000, "");
        assert!(f.as_file().metadata().unwrap().len() > MAX_PAGE_BYTES as u64);
        let p = read_page(f.path(), None, 2).unwrap();
        assert_eq!(uids(&p), ["u59999", "u59998"]);
        assert!(!p.too_large);
    }

    #[test]
    fn an_offset_of_a_rotated_file_restarts_from_the_end() {
        let f = file_of(5, "");
        let old = read_page(f.path(), None, 2).unwrap().older.unwrap();
        // logrotate: the file is now a new one, shorter.
        let g = file_of(1, "");
        let p = read_page(g.path(), Some(old), 2).unwrap();
        assert!(p.restarted);
        assert_eq!(uids(&p), ["u0"]);
        // An offset inside a record of the new file.
        let p = read_page(f.path(), Some(old + 3), 2).unwrap();
        assert!(p.restarted);
        assert_eq!(uids(&p), ["u4", "u3"]);
    }
}
