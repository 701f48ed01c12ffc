//! A small BER codec (X.690), restricted to what LDAP needs (RFC 4511 §5.1).
//!
//! Module map (all in this file, it is small):
//! - [`Reader`]: decodes from borrowed bytes. It never allocates: every value it returns is a
//!   sub-slice of the input, so decoding a PDU costs no heap traffic here. The reader is flat;
//!   callers that recurse (the LDAP filter decoder) track and limit their own nesting depth.
//! - [`Writer`]: one-pass encoder into a `Vec<u8>` with back-patched lengths.
//! - [`element_len`]: framing helper, the length of the first element once its header is known.
//! - [`Error`](enum@Error): what can be wrong with the bytes, worded for the person reading a log.
//! - [`tag`]: universal tag bytes used by LDAP.
//!
//! Deliberate restrictions: single-byte tags only (LDAP never uses high tag numbers), definite
//! lengths only (RFC 4511 §5.1 forbids the indefinite form), at most 4 length bytes (no LDAP PDU
//! comes near 4 GiB). Non-minimal lengths and integers are accepted, as X.690 BER allows.

use thiserror::Error;

/// Universal tag bytes (class universal, primitive unless noted).
pub mod tag {
    pub const BOOLEAN: u8 = 0x01;
    pub const INTEGER: u8 = 0x02;
    pub const OCTET_STRING: u8 = 0x04;
    pub const NULL: u8 = 0x05;
    pub const ENUMERATED: u8 = 0x0a;
    /// SEQUENCE / SEQUENCE OF (constructed).
    pub const SEQUENCE: u8 = 0x30;
    /// SET / SET OF (constructed).
    pub const SET: u8 = 0x31;
    /// Bit 6 of a tag byte: the element is constructed.
    pub const CONSTRUCTED: u8 = 0x20;
}

/// Largest number of length octets accepted in the long form.
pub const MAX_LENGTH_OCTETS: usize = 4;

/// Errors found while decoding BER.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    #[error("unexpected end of data: expected an element with tag 0x{expected:02x}")]
    UnexpectedEnd { expected: u8 },
    #[error("unexpected end of data: expected another element")]
    Empty,
    #[error(
        "truncated element: header announces {needed} content bytes but only {available} remain"
    )]
    Truncated { needed: usize, available: usize },
    #[error("truncated element header")]
    TruncatedHeader,
    #[error("indefinite length (0x80) is not allowed in LDAP (RFC 4511 §5.1)")]
    IndefiniteLength,
    #[error("length uses {0} octets; at most 4 are accepted")]
    LengthTooLong(usize),
    #[error("reserved length octet 0xff")]
    ReservedLength,
    #[error("multi-byte tag (first octet 0x{0:02x}) is not used by LDAP")]
    MultiByteTag(u8),
    #[error("wrong tag: expected 0x{expected:02x}, found 0x{found:02x}")]
    UnexpectedTag { expected: u8, found: u8 },
    #[error("INTEGER/ENUMERATED of {0} bytes: must be 1 to 8 bytes")]
    BadInteger(usize),
    #[error("BOOLEAN of {0} bytes: must be exactly 1 byte")]
    BadBoolean(usize),
    #[error("NULL with {0} content bytes: must be empty")]
    BadNull(usize),
    #[error("{0} unexpected trailing bytes after the last element")]
    TrailingBytes(usize),
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A parsed element header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub tag: u8,
    /// Bytes taken by tag and length.
    pub header_len: usize,
    /// Bytes of content announced by the length.
    pub content_len: usize,
}

impl Header {
    /// Header plus content; `None` if that overflows `usize`.
    pub fn total_len(&self) -> Option<usize> {
        self.header_len.checked_add(self.content_len)
    }
}

/// Parses the header at the start of `buf`. `Ok(None)` when `buf` ends inside the header.
pub fn parse_header(buf: &[u8]) -> Result<Option<Header>> {
    let (tag, rest) = match buf.split_first() {
        Some((&t, rest)) => (t, rest),
        None => return Ok(None),
    };
    if tag & 0x1f == 0x1f {
        return Err(Error::MultiByteTag(tag));
    }
    let (first, rest) = match rest.split_first() {
        Some((&b, rest)) => (b, rest),
        None => return Ok(None),
    };
    if first < 0x80 {
        return Ok(Some(Header {
            tag,
            header_len: 2,
            content_len: usize::from(first),
        }));
    }
    if first == 0x80 {
        return Err(Error::IndefiniteLength);
    }
    if first == 0xff {
        return Err(Error::ReservedLength);
    }
    let n = usize::from(first & 0x7f);
    if n > MAX_LENGTH_OCTETS {
        return Err(Error::LengthTooLong(n));
    }
    let Some(bytes) = rest.get(..n) else {
        return Ok(None);
    };
    let mut len: u64 = 0;
    for &b in bytes {
        len = (len << 8) | u64::from(b);
    }
    let content_len = usize::try_from(len).map_err(|_| Error::LengthTooLong(n))?;
    Ok(Some(Header {
        tag,
        header_len: 2 + n,
        content_len,
    }))
}

/// Total length (header + content) of the first element in `buf`, as soon as its header is
/// complete (the content need not have arrived). `Ok(None)` means more bytes are needed.
pub fn element_len(buf: &[u8]) -> Result<Option<usize>> {
    match parse_header(buf)? {
        None => Ok(None),
        Some(h) => h
            .total_len()
            .map(Some)
            .ok_or(Error::LengthTooLong(h.header_len - 2)),
    }
}

/// Decodes elements one after another from a borrowed buffer. Never allocates.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The bytes not consumed yet.
    pub fn remaining(&self) -> &'a [u8] {
        self.buf
    }

    /// Tag of the next element, if any.
    pub fn peek_tag(&self) -> Option<u8> {
        self.buf.first().copied()
    }

    /// Reads the next element, returning its tag and contents.
    pub fn read_element(&mut self) -> Result<(u8, &'a [u8])> {
        let h = parse_header(self.buf)?.ok_or(if self.buf.is_empty() {
            Error::Empty
        } else {
            Error::TruncatedHeader
        })?;
        let body = self.buf.get(h.header_len..).unwrap_or_default();
        let contents = body.get(..h.content_len).ok_or(Error::Truncated {
            needed: h.content_len,
            available: body.len(),
        })?;
        self.buf = body.get(h.content_len..).unwrap_or_default();
        Ok((h.tag, contents))
    }

    /// Reads the next element, which must carry `tag`, and returns its contents.
    pub fn read_tagged(&mut self, tag: u8) -> Result<&'a [u8]> {
        match self.peek_tag() {
            None => Err(Error::UnexpectedEnd { expected: tag }),
            Some(t) if t != tag => Err(Error::UnexpectedTag {
                expected: tag,
                found: t,
            }),
            Some(_) => Ok(self.read_element()?.1),
        }
    }

    /// Reads the next element if it carries `tag`; `Ok(None)` if the next tag differs or the
    /// reader is empty (for OPTIONAL components).
    pub fn read_optional(&mut self, tag: u8) -> Result<Option<&'a [u8]>> {
        if self.peek_tag() == Some(tag) {
            self.read_tagged(tag).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A reader over the contents of the next element (a constructed one, with `tag`).
    pub fn sub(&mut self, tag: u8) -> Result<Reader<'a>> {
        self.read_tagged(tag).map(Reader::new)
    }

    /// An INTEGER (or any integer-shaped element) carrying `tag`.
    pub fn read_integer(&mut self, tag: u8) -> Result<i64> {
        decode_integer(self.read_tagged(tag)?)
    }

    /// An ENUMERATED with the universal tag.
    pub fn read_enumerated(&mut self) -> Result<i64> {
        self.read_integer(tag::ENUMERATED)
    }

    /// A BOOLEAN carrying `tag`; any non-zero byte is true (BER, not DER).
    pub fn read_bool(&mut self, tag: u8) -> Result<bool> {
        match self.read_tagged(tag)? {
            [b] => Ok(*b != 0),
            other => Err(Error::BadBoolean(other.len())),
        }
    }

    /// An OCTET STRING (or any primitive) carrying `tag`.
    pub fn read_octets(&mut self, tag: u8) -> Result<&'a [u8]> {
        self.read_tagged(tag)
    }

    /// A NULL carrying `tag`.
    pub fn read_null(&mut self, tag: u8) -> Result<()> {
        match self.read_tagged(tag)? {
            [] => Ok(()),
            other => Err(Error::BadNull(other.len())),
        }
    }

    /// Succeeds only when every byte has been consumed.
    pub fn finish(self) -> Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Error::TrailingBytes(self.buf.len()))
        }
    }
}

/// Decodes two's-complement contents of 1..=8 bytes.
pub fn decode_integer(contents: &[u8]) -> Result<i64> {
    let Some(&first) = contents.first() else {
        return Err(Error::BadInteger(0));
    };
    if contents.len() > 8 {
        return Err(Error::BadInteger(contents.len()));
    }
    let mut v: i64 = if first & 0x80 != 0 { -1 } else { 0 };
    for &b in contents {
        v = (v << 8) | i64::from(b);
    }
    Ok(v)
}

/// A reserved length slot, returned by [`Writer::start`] and consumed by [`Writer::end`].
#[must_use = "every started element must be ended"]
#[derive(Debug)]
pub struct Mark {
    len_pos: usize,
    /// Length bytes reserved: 1 (`start`) or 3 (`start_large`).
    reserved: usize,
}

/// One-pass encoder appending to a `Vec<u8>`.
///
/// Length strategy: `start` reserves a single length byte. Most LDAP elements are shorter than
/// 128 bytes, so the common case patches that byte in place. Longer elements shift their content
/// right by the 1..=4 extra bytes with `copy_within` (a memmove, no allocation beyond `Vec`
/// growth). A fixed-width reservation would avoid the move but make every small element 4 bytes
/// longer and non-canonical; exact-byte compatibility with other LDAP implementations wins.
/// Elements known to be usually long (a search entry and its attribute list) use
/// `start_large`, which reserves the three bytes of a 128..=65535-byte length: those end
/// without a move, and the length is still written in its shortest form.
#[derive(Debug)]
pub struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Writer<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Writer { out }
    }

    /// Writes `tag` and reserves the length; call [`Writer::end`] after the contents.
    pub fn start(&mut self, tag: u8) -> Mark {
        self.out.push(tag);
        self.out.push(0);
        Mark {
            len_pos: self.out.len() - 1,
            reserved: 1,
        }
    }

    /// `start` for an element that is usually 128..=65535 bytes long: three length bytes are
    /// reserved, so `end` only moves the contents when the element turns out shorter or longer.
    pub fn start_large(&mut self, tag: u8) -> Mark {
        self.out.extend_from_slice(&[tag, 0, 0, 0]);
        Mark {
            len_pos: self.out.len() - 3,
            reserved: 3,
        }
    }

    /// Patches the length reserved by `mark` to cover everything written since, in its
    /// shortest form (moving the contents if that is not the reserved size).
    pub fn end(&mut self, mark: Mark) {
        let content_start = mark.len_pos + mark.reserved;
        let len = self.out.len().saturating_sub(content_start);
        if len < 0x80 && mark.reserved == 1 {
            if let Some(b) = self.out.get_mut(mark.len_pos) {
                *b = len as u8;
            }
            return;
        }
        let mut octets = [0u8; 9];
        let n = if len < 0x80 {
            octets[0] = len as u8;
            1
        } else {
            let be = (len as u64).to_be_bytes();
            let skip = be.iter().take_while(|&&b| b == 0).count();
            octets[0] = 0x80 | (8 - skip) as u8;
            octets[1..=8 - skip].copy_from_slice(&be[skip..]);
            9 - skip
        };
        let old_end = self.out.len();
        if n > mark.reserved {
            self.out.resize(old_end + n - mark.reserved, 0);
            self.out
                .copy_within(content_start..old_end, mark.len_pos + n);
        } else if n < mark.reserved {
            self.out
                .copy_within(content_start..old_end, mark.len_pos + n);
            self.out.truncate(old_end - (mark.reserved - n));
        }
        if let Some(slot) = self.out.get_mut(mark.len_pos..mark.len_pos + n) {
            slot.copy_from_slice(&octets[..n]);
        }
    }

    /// Writes a primitive element whose contents are `bytes`.
    pub fn write_octets(&mut self, tag: u8, bytes: &[u8]) {
        self.out.push(tag);
        write_length(self.out, bytes.len());
        self.out.extend_from_slice(bytes);
    }

    /// Writes an integer in minimal two's complement.
    pub fn write_integer(&mut self, tag: u8, v: i64) {
        let be = v.to_be_bytes();
        let mut start = 0;
        // Drop leading bytes that only repeat the sign of the next byte.
        while start < 7 {
            let (b, next) = (be[start], be[start + 1]);
            if (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
                start += 1;
            } else {
                break;
            }
        }
        self.write_octets(tag, &be[start..]);
    }

    /// Writes an ENUMERATED with the universal tag.
    pub fn write_enumerated(&mut self, v: i64) {
        self.write_integer(tag::ENUMERATED, v);
    }

    /// Writes a BOOLEAN as 0xff / 0x00 (the DER form, which every decoder accepts).
    pub fn write_bool(&mut self, tag: u8, v: bool) {
        self.write_octets(tag, &[if v { 0xff } else { 0x00 }]);
    }

    /// Writes an empty element (NULL or a NULL-shaped context tag).
    pub fn write_null(&mut self, tag: u8) {
        self.write_octets(tag, &[]);
    }

    /// Appends pre-encoded bytes verbatim.
    pub fn write_raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    /// The underlying buffer.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        self.out
    }
}

/// Appends a definite length in its shortest form.
pub fn write_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let be = (len as u64).to_be_bytes();
        let skip = be.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (8 - skip) as u8);
        out.extend_from_slice(&be[skip..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn integers_minimal() {
        let cases: &[(i64, &[u8])] = &[
            (0, &[0x02, 1, 0]),
            (127, &[0x02, 1, 0x7f]),
            (128, &[0x02, 2, 0, 0x80]),
            (-1, &[0x02, 1, 0xff]),
            (-128, &[0x02, 1, 0x80]),
            (-129, &[0x02, 2, 0xff, 0x7f]),
            (256, &[0x02, 2, 1, 0]),
        ];
        for (v, enc) in cases {
            let mut out = Vec::new();
            Writer::new(&mut out).write_integer(0x02, *v);
            assert_eq!(&out[..], *enc, "encoding {v}");
            assert_eq!(Reader::new(enc).read_integer(0x02), Ok(*v));
        }
    }

    #[test]
    fn long_lengths_patch() {
        for len in [0usize, 1, 127, 128, 255, 256, 70000] {
            let mut out = Vec::new();
            let mut w = Writer::new(&mut out);
            let m = w.start(0x30);
            w.write_raw(&vec![7u8; len]);
            w.end(m);
            let mut expect = vec![0x30];
            write_length(&mut expect, len);
            expect.extend(vec![7u8; len]);
            assert_eq!(out, expect);
            assert_eq!(element_len(&out), Ok(Some(out.len())));
            let mut r = Reader::new(&out);
            let inner = r.read_tagged(0x30).map(<[u8]>::len);
            assert_eq!(inner, Ok(len));
            assert_eq!(r.finish(), Ok(()));
        }
    }

    /// Writes `sizes` as nested elements (the first outermost), each opened with `start` or
    /// `start_large` as `large` says, with a filler before each inner one.
    fn nested(sizes: &[usize], large: &[bool]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        let mut marks = Vec::new();
        for (i, n) in sizes.iter().enumerate() {
            marks.push(if large[i] {
                w.start_large(0x30)
            } else {
                w.start(0x30)
            });
            w.write_raw(&vec![i as u8; *n]);
        }
        while let Some(m) = marks.pop() {
            w.end(m);
        }
        out
    }

    #[test]
    fn large_start_writes_the_same_bytes() {
        for len in [0usize, 1, 127, 128, 255, 256, 65535, 65536, 70000] {
            let small = nested(&[len], &[false]);
            assert_eq!(nested(&[len], &[true]), small, "length {len}");
        }
    }

    proptest! {
        #[test]
        fn large_and_small_starts_agree_when_nested(
            sizes in proptest::collection::vec(0usize..300, 1..4),
            large in proptest::collection::vec(any::<bool>(), 4),
        ) {
            let small = nested(&sizes, &[false; 4]);
            prop_assert_eq!(nested(&sizes, &large), small);
        }
    }

    #[test]
    fn nested_patch() {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        let outer = w.start(0x30);
        let inner = w.start(0x31);
        w.write_octets(0x04, &[1u8; 200]);
        w.end(inner);
        w.write_bool(0x01, true);
        w.end(outer);
        let mut r = Reader::new(&out);
        let mut s = r.sub(0x30).expect("outer");
        let mut s2 = s.sub(0x31).expect("inner");
        assert_eq!(s2.read_octets(0x04).map(<[u8]>::len), Ok(200));
        assert_eq!(s2.finish(), Ok(()));
        assert_eq!(s.read_bool(0x01), Ok(true));
        assert_eq!(s.finish(), Ok(()));
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn malformed() {
        assert_eq!(element_len(&[]), Ok(None));
        assert_eq!(element_len(&[0x30]), Ok(None));
        assert_eq!(element_len(&[0x30, 0x82, 0x01]), Ok(None));
        assert_eq!(element_len(&[0x30, 0x82, 0x01, 0x00]), Ok(Some(260)));
        assert_eq!(element_len(&[0x30, 0x80]), Err(Error::IndefiniteLength));
        assert_eq!(
            element_len(&[0x30, 0x85, 1, 1, 1, 1, 1]),
            Err(Error::LengthTooLong(5))
        );
        assert_eq!(element_len(&[0x30, 0xff]), Err(Error::ReservedLength));
        assert_eq!(element_len(&[0x1f, 0x01]), Err(Error::MultiByteTag(0x1f)));
        let mut r = Reader::new(&[0x04, 0x05, 1, 2]);
        assert_eq!(
            r.read_octets(0x04),
            Err(Error::Truncated {
                needed: 5,
                available: 2
            })
        );
        assert_eq!(
            Reader::new(&[0x04, 0x00]).read_integer(0x02),
            Err(Error::UnexpectedTag {
                expected: 0x02,
                found: 0x04
            })
        );
        assert_eq!(
            Reader::new(&[0x02, 0x00]).read_integer(0x02),
            Err(Error::BadInteger(0))
        );
        assert_eq!(
            Reader::new(&[0x02, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1]).read_integer(0x02),
            Err(Error::BadInteger(9))
        );
        assert_eq!(
            Reader::new(&[0x01, 0x02, 0, 0]).read_bool(0x01),
            Err(Error::BadBoolean(2))
        );
        assert_eq!(
            Reader::new(&[]).read_integer(0x02),
            Err(Error::UnexpectedEnd { expected: 2 })
        );
        assert_eq!(Reader::new(&[]).read_element(), Err(Error::Empty));
        assert_eq!(
            Reader::new(&[0x04]).read_element(),
            Err(Error::TruncatedHeader)
        );
        let mut r = Reader::new(&[0x05, 0x00, 0xaa]);
        assert_eq!(r.read_null(0x05), Ok(()));
        assert_eq!(r.finish(), Err(Error::TrailingBytes(1)));
    }

    proptest! {
        #[test]
        fn integer_roundtrip(v in any::<i64>()) {
            let mut out = Vec::new();
            Writer::new(&mut out).write_integer(0x02, v);
            prop_assert_eq!(Reader::new(&out).read_integer(0x02), Ok(v));
        }

        #[test]
        fn reader_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut r = Reader::new(&bytes);
            while !r.is_empty() {
                if r.read_element().is_err() { break; }
            }
            let _ = element_len(&bytes);
        }
    }
}
