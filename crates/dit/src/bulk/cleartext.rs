//! Smaller blocks where passwords must be hashed, so that hashing uses every core.
//!
//! A block is 2 MB of LDIF, about 7,000 reference entries: parsing and building them takes a
//! few milliseconds, but with clear-text passwords each entry also costs one hash with the
//! configured scheme (15 ms for the default Argon2id), i.e. minutes per block on one thread,
//! and a file of a few blocks would keep only a few cores busy. So the reading thread ends a
//! block after [`HASHED_PER_BLOCK`] records that carry a clear-text `userPassword`; the
//! building threads then take such blocks in turn and hash on every core.
//!
//! The scan only sizes blocks: a value counted as clear text here that is in fact hashed (or
//! the other way round) changes where a block ends, never what is imported.

/// Records with a clear-text password per block: a few hundred milliseconds of Argon2 work,
/// small enough to spread any file over all cores, large enough that handing blocks around
/// costs nothing in comparison.
pub(super) const HASHED_PER_BLOCK: usize = 32;

/// Where to end a block of `text` (whole records, as cut by the caller) so that it holds at
/// most `per_block` records with a clear-text password: the end of the blank line after the
/// record that holds the `per_block`-th one; `None` when the whole text may go.
pub(super) fn cut(text: &[u8], per_block: usize) -> Option<usize> {
    // This runs on the one reading thread, over every byte of the file: only lines that start
    // with `u` or `U` are looked at, found with two vectorized searches rather than line by
    // line.
    let mut starts: Vec<usize> = memchr::memmem::find_iter(text, b"\nu")
        .chain(memchr::memmem::find_iter(text, b"\nU"))
        .map(|i| i + 1)
        .collect();
    if matches!(text.first(), Some(b'u' | b'U')) {
        starts.push(0);
    }
    starts.sort_unstable();
    let mut seen = 0;
    // The end of the record whose password was counted last: its other lines do not count.
    let mut record_end = 0;
    for start in starts {
        if start < record_end {
            continue;
        }
        let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
        let line = &text[start..end];
        if !is_cleartext_password(line.strip_suffix(b"\r").unwrap_or(line)) {
            continue;
        }
        seen += 1;
        record_end = blank_line_end(text, end);
        if seen >= per_block {
            return (record_end < text.len()).then_some(record_end);
        }
    }
    None
}

/// Where the first blank line (`\n` or `\r\n` alone) after the line ending at `from` ends;
/// the text's length if there is none.
fn blank_line_end(text: &[u8], from: usize) -> usize {
    let rest = &text[from..];
    let lf = memchr::memmem::find(rest, b"\n\n").map(|i| from + i + 2);
    let crlf = memchr::memmem::find(rest, b"\n\r\n").map(|i| from + i + 3);
    match (lf, crlf) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b).unwrap_or(text.len()),
    }
}

/// `userPassword: secret` (no `{SCHEME}` prefix) or `userPassword:: <base64>` whose value
/// does not decode to `{` and a letter (base64 `e0`…`e3`). Attribute names are
/// case-insensitive; options (`userPassword;x:`) count too.
fn is_cleartext_password(line: &[u8]) -> bool {
    const NAME: &[u8] = b"userpassword";
    let Some(head) = line.get(..NAME.len()) else {
        return false;
    };
    if !head.eq_ignore_ascii_case(NAME) {
        return false;
    }
    let rest = &line[NAME.len()..];
    let Some(colon) = rest.iter().position(|&b| b == b':') else {
        return false;
    };
    if !matches!(rest.first(), Some(b':' | b';')) {
        return false;
    }
    let value = &rest[colon + 1..];
    match value.split_first() {
        Some((b':', b64)) => {
            let b64 = b64.trim_ascii_start();
            !(b64.first() == Some(&b'e') && matches!(b64.get(1), Some(b'0'..=b'3')))
        }
        // `userPassword:< file://…`: not looked into.
        Some((b'<', _)) => false,
        _ => !value.trim_ascii_start().starts_with(b"{"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: usize, pw: &str) -> String {
        format!("dn: uid=u{i},dc=x\nobjectClass: account\nuid: u{i}\n{pw}\n\n")
    }

    /// `cut` as it was written first, line by line: the searches must find the same ends.
    fn cut_by_lines(text: &[u8], per_block: usize) -> Option<usize> {
        let mut seen = 0;
        let mut in_counted_record = false;
        let mut at = 0;
        for line in text.split_inclusive(|&b| b == b'\n') {
            at += line.len();
            let content = line.strip_suffix(b"\n").unwrap_or(line);
            let content = content.strip_suffix(b"\r").unwrap_or(content);
            if content.is_empty() {
                if in_counted_record && seen >= per_block {
                    return (at < text.len()).then_some(at);
                }
                in_counted_record = false;
                continue;
            }
            if !in_counted_record && is_cleartext_password(content) {
                in_counted_record = true;
                seen += 1;
            }
        }
        None
    }

    proptest::proptest! {
        #[test]
        fn same_ends_as_line_by_line(
            parts in proptest::collection::vec(0usize..9, 0..40),
            per_block in 1usize..4,
        ) {
            const PIECES: [&str; 9] = [
                "dn: uid=a,dc=x\n",
                "userPassword: secret\n",
                "userPassword: {SSHA}abcd\n",
                "USERPASSWORD:: c2VjcmV0\r\n",
                "uid: u\n",
                "\n",
                "\r\n",
                "cn: x\n\n",
                "userPassword: s",
            ];
            let text: String = parts.iter().map(|&i| PIECES[i]).collect();
            proptest::prop_assert_eq!(
                cut(text.as_bytes(), per_block),
                cut_by_lines(text.as_bytes(), per_block)
            );
        }
    }

    #[test]
    fn ends_a_block_after_enough_cleartext_records() {
        let text: String = (0..10).map(|i| record(i, "userPassword: secret")).collect();
        let one = record(0, "userPassword: secret").len();
        assert_eq!(cut(text.as_bytes(), 3), Some(3 * one));
        assert_eq!(cut(text.as_bytes(), 10), None, "the whole text");
        assert_eq!(cut(text.as_bytes(), 100), None);
    }

    #[test]
    fn hashed_values_do_not_count() {
        let text: String = (0..10)
            .map(|i| match i % 3 {
                0 => record(i, "userPassword: {SSHA}abcd"),
                // base64 of "{ARGON2}..."
                1 => record(i, "userPassword:: e0FSR09OMn0kYXJnb24yaWQ="),
                _ => record(i, "description: x"),
            })
            .collect();
        assert_eq!(cut(text.as_bytes(), 1), None);
    }

    #[test]
    fn recognises_the_forms_of_a_cleartext_value() {
        for line in [
            "userPassword: secret",
            "USERPASSWORD:secret",
            "userPassword;x-opt: secret",
            "userPassword:: c2VjcmV0",
        ] {
            assert!(is_cleartext_password(line.as_bytes()), "{line}");
        }
        for line in [
            "userPassword: {ARGON2}$argon2id$",
            "userPassword:: e1NTSEF9eHl6",
            "userPasswordX: secret",
            "uid: userPassword: x",
            "userPassword:< file:///tmp/x",
        ] {
            assert!(!is_cleartext_password(line.as_bytes()), "{line}");
        }
    }
}
