//! Entries as kept in memory.
//!
//! A stored [`Entry`] is one packed byte buffer (plus its id and parent): the DN as given, the
//! normalized DN when it differs, the number of RDNs, and every attribute with its values as
//! the client sent them (returned verbatim) and, only where it differs, each value's
//! equality-normalized form (used for matching, duplicate detection and index keys), so matching
//! never re-normalizes stored data. Readers walk the buffer through [`AttrRef`] views.
//!
//! Packing is what makes millions of entries fit: the unpacked form (a `Vec` of attributes, each
//! with two `Vec`s of boxed values and a boxed DN parse) cost about 3.6 KB per reference entry,
//! nearly all of it allocation headers and pointers; packed it is one allocation of roughly the
//! size of its text. Writers edit the owned form ([`Attr`], from [`Entry::to_attrs`]) and pack
//! the result into a new entry.
//!
//! Buffer layout, "layout 2" (integers are LEB128 varints, written only by this module):
//!
//! ```text
//! entry := len dn | ndn | depth | count attrs | attr*
//! ndn   := 0 (same bytes as dn) | len+1 bytes
//! attr  := type | head | [len options] | [count] | body
//! head  := len(body) << 2 | 2 if options follow | 1 if a count follows (else one value)
//! body  := value* ; value := 2*len raw norm | 2*id+1 (interned pair `id`, see `intern`)
//! norm  := 0 (same as raw) | len+1 bytes
//! ```
//!
//! Layout 1 (snapshot formats 2 and 3) also kept the normalized RDNs after the DNs and wrote
//! every attribute as `type | len options | count | len body | body`; `convert_layout1` turns
//! it into this one. The RDNs (~40 bytes of a reference entry, a copy of the DN's content) are
//! parsed from the DN again when asked for (`Entry::ndn`, which no hot path uses), and a
//! single-valued attribute without options (nearly all of them) spends two bytes less.

use std::fmt;

use schema::{AttrId, NormDn, Schema, ValueError};

use crate::intern;

/// A (raw, normalized) value pair.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// A (raw, normalized) value pair, owned.
pub type OwnedPair = (Box<[u8]>, Box<[u8]>);

pub type EntryId = u32;

/// One attribute in owned, editable form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    pub ty: AttrId,
    /// Attribute options in lower case, each with its leading `;` (e.g. `;lang-en`), or empty.
    pub options: Box<str>,
    pub values: Vec<Box<[u8]>>,
    pub norm: Vec<Box<[u8]>>,
}

impl Attr {
    /// Builds an attribute from raw values, normalizing each with the type's equality rule.
    pub fn new(
        schema: &Schema,
        ty: AttrId,
        options: &str,
        values: Vec<Box<[u8]>>,
    ) -> Result<Attr, ValueError> {
        let mut norm = Vec::with_capacity(values.len());
        for v in &values {
            norm.push(schema.normalize_eq(ty, v)?.into_boxed_slice());
        }
        Ok(Attr {
            ty,
            options: options.into(),
            values,
            norm,
        })
    }

    /// Position of a value with the same normalized form.
    pub fn find(&self, norm: &[u8]) -> Option<usize> {
        self.norm.iter().position(|n| &**n == norm)
    }
}

/// A stored entry: immutable, shared between versions behind an `Arc`. (Not `PartialEq`: two
/// packings of the same content may differ, one holding a value the other interned.)
#[derive(Clone)]
pub struct Entry {
    pub id: EntryId,
    pub parent: Option<EntryId>,
    /// The number of RDNs (kept out of the buffer: it fits in the struct's padding, and
    /// recovery may sort all entries by it).
    depth: u32,
    packed: Box<[u8]>,
}

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len());
    out.extend_from_slice(b);
}

/// A cursor over a buffer this module wrote (so well formed: a malformed one is a bug here).
#[derive(Clone)]
struct Cur<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cur<'a> {
    #[inline]
    fn varint(&mut self) -> usize {
        let mut v = 0usize;
        let mut shift = 0;
        loop {
            let byte = self.b[self.i];
            self.i += 1;
            v |= usize::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }

    #[inline]
    fn take(&mut self, n: usize) -> &'a [u8] {
        let s = &self.b[self.i..self.i + n];
        self.i += n;
        s
    }

    #[inline]
    fn bytes(&mut self) -> &'a [u8] {
        let n = self.varint();
        self.take(n)
    }

    fn done(&self) -> bool {
        self.i >= self.b.len()
    }

    /// Moves past one value of an attribute's body.
    #[inline]
    fn skip_value(&mut self) {
        let x = self.varint();
        if x & 1 == 1 {
            return;
        }
        self.i += x >> 1;
        match self.varint() {
            0 => {}
            n => self.i += n - 1,
        }
    }
}

thread_local! {
    /// Buffers `Entry::new` packs into before making the entry's one allocation.
    static SCRATCH: std::cell::RefCell<(Vec<u8>, Vec<u8>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Appends the name part: the DN, the normalized DN where it differs, and the number of RDNs.
fn put_name(out: &mut Vec<u8>, dn: &str, norm: &str, depth: usize) {
    put_bytes(out, dn.as_bytes());
    if norm == dn {
        out.push(0);
    } else {
        put_varint(out, norm.len() + 1);
        out.extend_from_slice(norm.as_bytes());
    }
    put_varint(out, depth);
}

fn depth_of(ndn: &NormDn) -> u32 {
    u32::try_from(ndn.rdns.len()).unwrap_or(u32::MAX)
}

/// Bits of an attribute's `head` below the body length.
const HEAD_COUNT: usize = 1;
const HEAD_OPTIONS: usize = 2;

/// Appends an attribute's header and body (layout 2).
fn put_attr(out: &mut Vec<u8>, ty: AttrId, options: &[u8], count: usize, body: &[u8]) {
    put_varint(out, ty.0 as usize);
    let mut head = body.len() << 2;
    if !options.is_empty() {
        head |= HEAD_OPTIONS;
    }
    if count != 1 {
        head |= HEAD_COUNT;
    }
    put_varint(out, head);
    if !options.is_empty() {
        put_bytes(out, options);
    }
    if count != 1 {
        put_varint(out, count);
    }
    out.extend_from_slice(body);
}

/// Appends one attribute (`body`: scratch): type, options, and each (raw, normalized) value,
/// interned where the type's values are (or, with `intern_all`, wherever the table takes it).
fn pack_attr<'a>(
    out: &mut Vec<u8>,
    body: &mut Vec<u8>,
    ty: AttrId,
    options: &str,
    values: impl ExactSizeIterator<Item = Pair<'a>>,
    intern_all: bool,
) {
    let count = values.len();
    body.clear();
    let interned = intern_all || intern::is_interned_type(ty);
    for (raw, norm) in values {
        put_value(body, interned, raw, norm);
    }
    put_attr(out, ty, options.as_bytes(), count, body);
}

/// Appends one value to an attribute's body: interned where its type's values are and the
/// pair is in the table, else the raw bytes and the normalized form where it differs.
fn put_value(body: &mut Vec<u8>, interned: bool, raw: &[u8], norm: &[u8]) {
    if let Some(id) = interned.then(|| intern::intern(raw, norm)).flatten() {
        put_varint(body, 2 * id as usize + 1);
        return;
    }
    put_varint(body, 2 * raw.len());
    body.extend_from_slice(raw);
    if norm != raw {
        put_varint(body, norm.len() + 1);
        body.extend_from_slice(norm);
    } else {
        body.push(0);
    }
}

/// One attribute of an entry built by `Entry::with_parts`.
pub enum Part<'a> {
    /// A new or rewritten attribute.
    New(&'a Attr),
    /// An attribute of the entry being changed, kept as it is stored except for the values at
    /// positions `drop` (ascending, each once), which are left out, and the `(raw, normalized)`
    /// values `add`, which come after the others (each not held already). Its stored bytes
    /// are copied, not decoded: a group of 100,000 members gaining or losing one is a copy of
    /// its bytes, not 100,000 values unpacked and packed again. Nothing is kept when no value
    /// is left.
    Kept {
        attr: AttrRef<'a>,
        drop: &'a [usize],
        add: &'a [OwnedPair],
    },
}

/// Appends a `Part::Kept` attribute (`body`: scratch); false when it has no values left and
/// nothing was written.
fn pack_kept(
    out: &mut Vec<u8>,
    body: &mut Vec<u8>,
    attr: &AttrRef<'_>,
    drop: &[usize],
    add: &[OwnedPair],
) -> bool {
    let count = (attr.count + add.len()).saturating_sub(drop.len());
    if count == 0 {
        return false;
    }
    body.clear();
    let interned = intern::is_interned_type(attr.ty);
    if attr.table.is_some() {
        // Interned ids of another table (an entry read from a file, never one of a version):
        // the values are written afresh.
        let mut gone = drop.iter().peekable();
        for (i, (raw, norm)) in attr.pairs().enumerate() {
            if gone.next_if(|&&d| d == i).is_none() {
                put_value(body, interned, raw, norm);
            }
        }
    } else {
        copy_kept(body, attr.body, drop);
    }
    for (raw, norm) in add {
        put_value(body, interned, raw, norm);
    }
    put_attr(out, attr.ty, attr.options.as_bytes(), count, body);
    true
}

/// Appends the values of the stored attribute body `stored` but those at positions `drop`,
/// in runs between the dropped ones: only the values up to the last dropped one are walked
/// (to find where each starts); the rest is one copy.
fn copy_kept(body: &mut Vec<u8>, stored: &[u8], drop: &[usize]) {
    let mut c = Cur { b: stored, i: 0 };
    let mut run = 0;
    let mut at = 0;
    for &d in drop {
        while at < d && !c.done() {
            c.skip_value();
            at += 1;
        }
        body.extend_from_slice(&stored[run..c.i]);
        if !c.done() {
            c.skip_value();
            at += 1;
        }
        run = c.i;
    }
    body.extend_from_slice(&stored[run..]);
}

/// Writes the attribute count at `count_at`, where one byte was reserved for it.
fn put_count(out: &mut Vec<u8>, count_at: usize, count: usize) {
    if count >= 0x80 {
        let mut c = Vec::new();
        put_varint(&mut c, count);
        out.splice(count_at..=count_at, c);
    } else {
        out[count_at] = count as u8;
    }
}

/// Appends the attribute count and the attributes to `out` (`body`: scratch).
fn pack_attrs<'a>(
    out: &mut Vec<u8>,
    body: &mut Vec<u8>,
    attrs: impl IntoIterator<Item = &'a Attr>,
) {
    let count_at = out.len();
    out.push(0);
    let mut count = 0usize;
    for a in attrs {
        count += 1;
        pack_attrs_one(out, body, a);
    }
    put_count(out, count_at, count);
}

/// Appends one owned attribute (`body`: scratch).
fn pack_attrs_one(out: &mut Vec<u8>, body: &mut Vec<u8>, a: &Attr) {
    let pairs = a
        .values
        .iter()
        .enumerate()
        .map(|(i, raw)| (&**raw, a.norm.get(i).map_or(&**raw, |n| &**n)));
    pack_attr(out, body, a.ty, &a.options, pairs, false);
}

/// Packs an entry from borrowed pieces, for a builder that has its values as slices (a bulk
/// import) rather than as `Attr`s: `start`, `attr` for each attribute, `finish`. The buffers
/// are kept for the next entry.
#[derive(Default)]
pub struct Packer {
    out: Vec<u8>,
    body: Vec<u8>,
    count_at: usize,
    count: usize,
    depth: u32,
}

impl Packer {
    /// Starts an entry: its DN as given, its normalized DN, and its number of RDNs.
    pub fn start(&mut self, dn: &str, norm: &str, depth: usize) {
        self.out.clear();
        put_name(&mut self.out, dn, norm, depth);
        self.count_at = self.out.len();
        self.out.push(0);
        self.count = 0;
        self.depth = u32::try_from(depth).unwrap_or(u32::MAX);
    }

    /// Adds an attribute with its (raw, normalized) values; `options` as in `Attr::options`.
    pub fn attr<'a>(
        &mut self,
        ty: AttrId,
        options: &str,
        values: impl ExactSizeIterator<Item = Pair<'a>>,
    ) {
        pack_attr(&mut self.out, &mut self.body, ty, options, values, false);
        self.count += 1;
    }

    /// `attr` for values that the caller knows recur on many entries (a bulk load's one time
    /// stamp and entryCSN): they are interned whatever their type, while the table has room.
    pub fn attr_interned<'a>(
        &mut self,
        ty: AttrId,
        options: &str,
        values: impl ExactSizeIterator<Item = Pair<'a>>,
    ) {
        pack_attr(&mut self.out, &mut self.body, ty, options, values, true);
        self.count += 1;
    }

    /// Appends attributes packed beforehand (`PackedAttrs`), as they are.
    pub fn append(&mut self, attrs: &PackedAttrs) {
        self.out.extend_from_slice(&attrs.bytes);
        self.count += attrs.count;
    }

    /// The packed entry.
    pub fn finish(&mut self, id: EntryId, parent: Option<EntryId>) -> Entry {
        put_count(&mut self.out, self.count_at, self.count);
        Entry {
            id,
            parent,
            depth: self.depth,
            packed: Box::from(&self.out[..]),
        }
    }
}

/// Attributes packed once and appended to many entries (`Packer::append`): a bulk load packs
/// the attributes that are the same on thousands of entries (its stamps, a run of entries'
/// objectClass values) once, instead of looking up their interned ids entry after entry.
/// The bytes are what `Packer::attr` would write: interned ids are the process's for good.
#[derive(Default, Clone)]
pub struct PackedAttrs {
    bytes: Vec<u8>,
    count: usize,
}

impl PackedAttrs {
    /// Adds an attribute, as `Packer::attr` (`interned`: as `Packer::attr_interned`).
    pub fn push<'a>(
        &mut self,
        ty: AttrId,
        options: &str,
        values: impl ExactSizeIterator<Item = Pair<'a>>,
        interned: bool,
    ) {
        let mut body = Vec::new();
        pack_attr(&mut self.bytes, &mut body, ty, options, values, interned);
        self.count += 1;
    }
}

fn str_of(b: &[u8]) -> &str {
    // Attribute options are nearly always empty: no call to check them.
    if b.is_empty() {
        return "";
    }
    // Only `Entry::new` writes these bytes, from `&str`s.
    std::str::from_utf8(b).unwrap_or_default()
}

impl Entry {
    /// Packs an entry.
    pub fn new<'a>(
        id: EntryId,
        parent: Option<EntryId>,
        dn: &str,
        ndn: &NormDn,
        attrs: impl IntoIterator<Item = &'a Attr>,
    ) -> Entry {
        SCRATCH.with_borrow_mut(|(out, part)| {
            out.clear();
            put_name(out, dn, &ndn.norm, ndn.rdns.len());
            pack_attrs(out, part, attrs);
            Entry {
                id,
                parent,
                depth: depth_of(ndn),
                // One allocation of exactly the right size (the scratch buffers are reused).
                packed: Box::from(&out[..]),
            }
        })
    }

    /// This entry with other attributes (same id, DN and parent).
    pub fn with_attrs<'a>(&self, attrs: impl IntoIterator<Item = &'a Attr>) -> Entry {
        self.repacked(|out, part| pack_attrs(out, part, attrs))
    }

    /// This entry with the attributes `parts` (same id, DN and parent): `with_attrs` where
    /// some attributes are kept from this entry as they are stored, with a few values left
    /// out or added (`Part::Kept`).
    pub fn with_parts(&self, parts: &[Part<'_>]) -> Entry {
        self.repacked(|out, part| {
            let count_at = out.len();
            out.push(0);
            let mut count = 0usize;
            for p in parts {
                let packed = match p {
                    Part::New(a) => {
                        pack_attrs_one(out, part, a);
                        true
                    }
                    Part::Kept { attr, drop, add } => pack_kept(out, part, attr, drop, add),
                };
                count += usize::from(packed);
            }
            put_count(out, count_at, count);
        })
    }

    /// This entry (same id, DN and parent) with the attribute part `attrs` writes after the
    /// name part, which is copied as it is (`attrs` gets the buffer and a scratch buffer).
    fn repacked(&self, attrs: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>)) -> Entry {
        let name = &self.packed[..self.name_end()];
        SCRATCH.with_borrow_mut(|(out, part)| {
            out.clear();
            out.extend_from_slice(name);
            attrs(out, part);
            Entry {
                id: self.id,
                parent: self.parent,
                depth: self.depth,
                packed: Box::from(&out[..]),
            }
        })
    }

    /// This entry under another name and parent, attributes unchanged (copied as they are).
    pub fn renamed(&self, dn: &str, ndn: &NormDn, parent: Option<EntryId>) -> Entry {
        let attrs = &self.packed[self.name_end()..];
        SCRATCH.with_borrow_mut(|(out, _)| {
            out.clear();
            put_name(out, dn, &ndn.norm, ndn.rdns.len());
            out.extend_from_slice(attrs);
            Entry {
                id: self.id,
                parent,
                depth: depth_of(ndn),
                packed: Box::from(&out[..]),
            }
        })
    }

    /// The packed bytes (the snapshot stores them as they are).
    pub fn packed(&self) -> &[u8] {
        &self.packed
    }

    /// An entry from packed bytes read back from disk, checked to be well formed with
    /// attribute ids below `attr_count` and interned ids below `interned.len()`, so that no
    /// accessor can fail on it. `layout` is the packed layout of the bytes (1 or 2, see the
    /// module's notes); layout 1 is converted. Interned ids are those of `interned` (the
    /// file's table): when `same_ids`, they are this process's ids too and the bytes are taken
    /// as they are; otherwise the entry is packed afresh. Whether the attribute ids and
    /// normalized forms are those of the schema in force is the caller's business (the
    /// snapshot records a schema fingerprint; see also `attrs_in`).
    pub fn from_packed(
        id: EntryId,
        parent: Option<EntryId>,
        packed: &[u8],
        layout: u8,
        attr_count: usize,
        interned: &[Pair<'_>],
        same_ids: bool,
    ) -> Result<Entry, String> {
        let converted;
        let packed = match layout {
            1 => {
                converted = convert_layout1(packed, attr_count)?;
                &converted[..]
            }
            2 => packed,
            n => return Err(format!("packed layout {n} is unknown")),
        };
        let depth = check_packed(packed, attr_count, interned.len())?;
        let e = Entry {
            id,
            parent,
            depth: u32::try_from(depth).unwrap_or(u32::MAX),
            packed: packed.into(),
        };
        if same_ids {
            return Ok(e);
        }
        let attrs: Vec<Attr> = e.attrs_in(Some(interned)).map(|a| a.to_attr()).collect();
        Ok(e.with_attrs(&attrs))
    }

    fn cur(&self) -> Cur<'_> {
        Cur {
            b: &self.packed,
            i: 0,
        }
    }

    /// The DN in the form the client gave it (RFC 4514 string).
    pub fn dn(&self) -> &str {
        str_of(self.dn_bytes())
    }

    /// `dn` as bytes, for encoders and comparisons that need no `str` (and so no UTF-8 check
    /// on every call).
    pub fn dn_bytes(&self) -> &[u8] {
        self.cur().bytes()
    }

    /// The normalized DN string (`NormDn::norm`).
    pub fn ndn_str(&self) -> &str {
        str_of(self.ndn_bytes())
    }

    /// `ndn_str` as bytes.
    pub fn ndn_bytes(&self) -> &[u8] {
        let mut c = self.cur();
        let dn = c.bytes();
        match c.varint() {
            0 => dn,
            n => c.take(n - 1),
        }
    }

    /// A cursor past the DN and the normalized DN (at the depth).
    fn after_dns(&self) -> Cur<'_> {
        let mut c = self.cur();
        c.bytes();
        match c.varint() {
            0 => {}
            n => {
                c.take(n - 1);
            }
        }
        c
    }

    /// Where the name part (DN, normalized DN, depth) ends and the attributes begin.
    fn name_end(&self) -> usize {
        let mut c = self.after_dns();
        c.varint();
        c.i
    }

    /// The number of RDNs of the DN.
    pub fn depth(&self) -> usize {
        self.depth as usize
    }

    /// The normalized DN with its RDNs, parsed and normalized again from the DN with `schema`
    /// (the schema of the version holding the entry): the RDNs are not kept, being a copy of
    /// the DN's content. Allocates and costs a parse; comparisons should use `ndn_str`.
    pub fn ndn(&self, schema: &Schema) -> NormDn {
        match schema::Dn::parse(self.dn()).and_then(|d| d.normalize(schema)) {
            Ok(n) => n,
            // The DN was normalized with this schema (or one it extends) when the entry was
            // made, so this is not reached; the normalized DN is still right without RDNs.
            Err(_) => NormDn {
                norm: self.ndn_str().to_string(),
                rdns: Vec::new(),
            },
        }
    }

    /// The attributes, in stored order.
    pub fn attrs(&self) -> Attrs<'_> {
        self.attrs_in(None)
    }

    /// The attributes, with interned values looked up in `table` (`None`: this process's).
    pub fn attrs_in<'a>(&'a self, table: Option<&'a [Pair<'a>]>) -> Attrs<'a> {
        let mut c = Cur {
            b: &self.packed,
            i: self.name_end(),
        };
        let left = c.varint();
        Attrs { c, left, table }
    }

    /// The attribute of exactly this type and no options.
    pub fn attr(&self, ty: AttrId) -> Option<AttrRef<'_>> {
        self.attrs().find(|a| a.ty == ty && a.options.is_empty())
    }

    /// All attributes of this type or a subtype, with any options.
    pub fn attrs_of<'a>(
        &'a self,
        schema: &'a Schema,
        ty: AttrId,
    ) -> impl Iterator<Item = AttrRef<'a>> + 'a {
        self.attrs().filter(move |a| schema.is_subtype(a.ty, ty))
    }

    /// Whether the entry holds a value (by normalized form) of exactly this type (any options).
    pub fn has_value(&self, ty: AttrId, norm: &[u8]) -> bool {
        self.attrs().any(|a| a.ty == ty && a.find(norm).is_some())
    }

    /// The attributes in owned, editable form.
    pub fn to_attrs(&self) -> Vec<Attr> {
        self.attrs().map(|a| a.to_attr()).collect()
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("id", &self.id)
            .field("parent", &self.parent)
            .field("dn", &self.dn())
            .field("attrs", &self.to_attrs())
            .finish()
    }
}

/// The attributes of an entry (cloned, it goes on from where it is).
#[derive(Clone)]
pub struct Attrs<'a> {
    c: Cur<'a>,
    left: usize,
    table: Option<&'a [Pair<'a>]>,
}

impl<'a> Iterator for Attrs<'a> {
    type Item = AttrRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<AttrRef<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let ty = AttrId(self.c.varint() as u32);
        let head = self.c.varint();
        let options = if head & HEAD_OPTIONS != 0 {
            str_of(self.c.bytes())
        } else {
            ""
        };
        let count = if head & HEAD_COUNT != 0 {
            self.c.varint()
        } else {
            1
        };
        let body = self.c.take(head >> 2);
        Some(AttrRef {
            ty,
            options,
            count,
            body,
            table: self.table,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Attrs<'_> {}

/// Whether two attributes' options are the same. Empty options (nearly every attribute's)
/// are compared without calling `memcmp`: an empty `&str` points at no memory, and glibc's
/// AVX-512 `memcmp` does a masked load there whose suppressed fault costs about a microsecond
/// (found in the log's patch encoder; it was 15 % of the writer's time in a durable modify,
/// through `Version::changed_keys` and `dit::modify`).
#[inline]
pub fn same_options(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

/// One attribute of a stored entry.
#[derive(Clone, Copy)]
pub struct AttrRef<'a> {
    pub ty: AttrId,
    /// As `Attr::options`.
    pub options: &'a str,
    count: usize,
    body: &'a [u8],
    table: Option<&'a [Pair<'a>]>,
}

impl<'a> AttrRef<'a> {
    /// The number of values.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Each value with its normalized form.
    pub fn pairs(&self) -> Pairs<'a> {
        Pairs {
            c: Cur { b: self.body, i: 0 },
            table: self.table,
        }
    }

    /// The values as the client sent them.
    pub fn values(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.pairs().map(|p| p.0)
    }

    /// The equality-normalized form of each value.
    pub fn norm(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.pairs().map(|p| p.1)
    }

    /// The first value.
    pub fn first(&self) -> Option<&'a [u8]> {
        self.values().next()
    }

    /// Position of a value with the same normalized form.
    pub fn find(&self, norm: &[u8]) -> Option<usize> {
        self.norm().position(|n| n == norm)
    }

    /// Whether `other` holds the same values stored the same way (bytes compared; a value
    /// interned in one and inline in the other compares unequal, so only `true` is certain).
    pub(crate) fn same_stored(&self, other: &AttrRef<'_>) -> bool {
        self.count == other.count && self.body == other.body
    }

    /// This attribute in owned, editable form.
    pub fn to_attr(&self) -> Attr {
        let (values, norm) = self
            .pairs()
            .map(|(v, n)| (Box::from(v), Box::from(n)))
            .unzip();
        Attr {
            ty: self.ty,
            options: self.options.into(),
            values,
            norm,
        }
    }
}

impl fmt::Debug for AttrRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.to_attr().fmt(f)
    }
}

/// The (raw, normalized) value pairs of an attribute (cloned, it goes on from where it is).
#[derive(Clone)]
pub struct Pairs<'a> {
    c: Cur<'a>,
    table: Option<&'a [Pair<'a>]>,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a [u8], &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        if self.c.done() {
            return None;
        }
        let x = self.c.varint();
        if x & 1 == 1 {
            let id = x >> 1;
            // Checked when the entry was made or read, so the fallback is never taken.
            let pair = match self.table {
                None => u32::try_from(id).ok().and_then(intern::get),
                Some(t) => t.get(id).copied(),
            };
            return Some(pair.unwrap_or((&[], &[])));
        }
        let raw = self.c.take(x >> 1);
        let norm = match self.c.varint() {
            0 => raw,
            n => self.c.take(n - 1),
        };
        Some((raw, norm))
    }
}

/// Checks the DN and normalized DN at the start of a packed entry (both layouts).
fn check_dns(r: &mut Check<'_>) -> Result<(), String> {
    let dn = r.bytes("DN")?;
    std::str::from_utf8(dn).map_err(|_| "DN is not UTF-8".to_string())?;
    match r.varint("normalized DN")? {
        0 => {}
        n => {
            let b = r.take(n - 1, "normalized DN")?;
            std::str::from_utf8(b).map_err(|_| "normalized DN is not UTF-8".to_string())?;
        }
    }
    Ok(())
}

/// Checks an attribute's values (`body`): `count` of them, interned ids below `interned`.
fn check_body(body: &[u8], count: usize, interned: usize) -> Result<(), String> {
    let mut v = Check { b: body, i: 0 };
    let mut seen = 0;
    while v.i < body.len() {
        let x = v.varint("value")?;
        seen += 1;
        if x & 1 == 1 {
            if x >> 1 >= interned {
                return Err(format!("interned value {} is not in the table", x >> 1));
            }
            continue;
        }
        v.take(x >> 1, "value")?;
        match v.varint("normalized value")? {
            0 => {}
            n => {
                v.take(n - 1, "normalized value")?;
            }
        }
    }
    if seen != count {
        return Err(format!("attribute holds {seen} values, not {count}"));
    }
    Ok(())
}

/// Checks that `packed` is a well-formed entry buffer (layout 2) whose attribute ids are
/// below `attr_count` and interned ids below `interned` (so that reading it can never fail);
/// returns the number of RDNs.
fn check_packed(packed: &[u8], attr_count: usize, interned: usize) -> Result<usize, String> {
    let mut r = Check { b: packed, i: 0 };
    check_dns(&mut r)?;
    let depth = r.varint("depth")?;
    let n = r.varint("attribute count")?;
    for _ in 0..n {
        r.attr_type(attr_count)?;
        let head = r.varint("attribute header")?;
        if head & HEAD_OPTIONS != 0 {
            let o = r.bytes("options")?;
            std::str::from_utf8(o).map_err(|_| "options are not UTF-8".to_string())?;
        }
        let count = if head & HEAD_COUNT != 0 {
            r.varint("value count")?
        } else {
            1
        };
        let body = r.take(head >> 2, "values")?;
        check_body(body, count, interned)?;
    }
    if r.i != packed.len() {
        return Err("entry has trailing bytes".into());
    }
    Ok(depth)
}

/// A packed entry of layout 1 (snapshot formats 2 and 3) in layout 2: the RDN block becomes
/// its count, each attribute header is written anew, the values are copied as they are.
/// Checks the framing as it goes (the values are left to `check_packed`).
fn convert_layout1(packed: &[u8], attr_count: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(packed.len());
    let mut r = Check { b: packed, i: 0 };
    check_dns(&mut r)?;
    out.extend_from_slice(&packed[..r.i]);
    let block = r.bytes("RDNs")?;
    let mut q = Check { b: block, i: 0 };
    let depth = q.varint("RDN count")?;
    for _ in 0..depth {
        for _ in 0..q.varint("AVA count")? {
            q.attr_type(attr_count)?;
            q.bytes("RDN value")?;
        }
    }
    if q.i != block.len() {
        return Err("RDN block has trailing bytes".into());
    }
    put_varint(&mut out, depth);
    let n = r.varint("attribute count")?;
    put_varint(&mut out, n);
    for _ in 0..n {
        let ty = r.attr_type(attr_count)?;
        let options = r.bytes("options")?;
        let count = r.varint("value count")?;
        let body = r.bytes("values")?;
        put_attr(&mut out, AttrId(ty as u32), options, count, body);
    }
    if r.i != packed.len() {
        return Err("entry has trailing bytes".into());
    }
    Ok(out)
}

struct Check<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Check<'a> {
    #[inline]
    fn varint(&mut self, what: &str) -> Result<usize, String> {
        // Nearly every length and count fits in one byte.
        if let Some(&b) = self.b.get(self.i) {
            if b < 0x80 {
                self.i += 1;
                return Ok(usize::from(b));
            }
        }
        let mut v = 0usize;
        for shift in (0..35).step_by(7) {
            let byte = *self
                .b
                .get(self.i)
                .ok_or_else(|| format!("{what}: truncated"))?;
            self.i += 1;
            v |= usize::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("{what}: varint too long"))
    }

    #[inline]
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if n > self.b.len() - self.i {
            // (`i` never passes the end: every advance is checked here.)
            return Err(format!("{what}: length {n} runs past the entry"));
        }
        let s = &self.b[self.i..self.i + n];
        self.i += n;
        Ok(s)
    }

    #[inline]
    fn bytes(&mut self, what: &str) -> Result<&'a [u8], String> {
        let n = self.varint(what)?;
        self.take(n, what)
    }

    #[inline]
    fn attr_type(&mut self, attr_count: usize) -> Result<usize, String> {
        let ty = self.varint("attribute type")?;
        if ty >= attr_count {
            return Err(format!("attribute type {ty} is not in the schema"));
        }
        Ok(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn attr(ty: u32, options: &str, values: &[(&[u8], &[u8])]) -> Attr {
        Attr {
            ty: AttrId(ty),
            options: options.into(),
            values: values.iter().map(|v| Box::from(v.0)).collect(),
            norm: values.iter().map(|v| Box::from(v.1)).collect(),
        }
    }

    /// The normalized RDN sequence of a DN, as `NormDn::rdns`.
    type Rdns = Vec<Vec<(AttrId, Vec<u8>)>>;

    /// Reads packed bytes of this process (no interned values of another table).
    fn unpack(packed: &[u8], attr_count: usize) -> Result<Entry, String> {
        let table: Vec<Pair<'static>> = (0..intern::len()).filter_map(intern::get).collect();
        Entry::from_packed(1, None, packed, 2, attr_count, &table, true)
    }

    /// An entry packed in layout 1 (snapshot formats 2 and 3), as it was written then.
    fn pack_layout1(dn: &str, ndn: &NormDn, attrs: &[Attr]) -> Vec<u8> {
        let mut out = Vec::new();
        put_bytes(&mut out, dn.as_bytes());
        if ndn.norm == dn {
            out.push(0);
        } else {
            put_varint(&mut out, ndn.norm.len() + 1);
            out.extend_from_slice(ndn.norm.as_bytes());
        }
        let mut rdns = Vec::new();
        put_varint(&mut rdns, ndn.rdns.len());
        for rdn in &ndn.rdns {
            put_varint(&mut rdns, rdn.len());
            for (ty, v) in rdn {
                put_varint(&mut rdns, ty.0 as usize);
                put_bytes(&mut rdns, v);
            }
        }
        put_bytes(&mut out, &rdns);
        put_varint(&mut out, attrs.len());
        for a in attrs {
            put_varint(&mut out, a.ty.0 as usize);
            put_bytes(&mut out, a.options.as_bytes());
            put_varint(&mut out, a.values.len());
            let mut body = Vec::new();
            for (raw, norm) in a.values.iter().zip(&a.norm) {
                put_varint(&mut body, 2 * raw.len());
                body.extend_from_slice(raw);
                if norm == raw {
                    body.push(0);
                } else {
                    put_varint(&mut body, norm.len() + 1);
                    body.extend_from_slice(norm);
                }
            }
            put_bytes(&mut out, &body);
        }
        out
    }

    #[test]
    fn interned_values_read_the_same_and_renumber() {
        // A type id no other test uses, so that interning it changes nothing elsewhere.
        let ty = 4000;
        intern::set_types([AttrId(ty)]);
        let attrs = vec![attr(
            ty,
            "",
            &[
                (b"Interned-X", b"interned-x"),
                (b"Interned-Y", b"Interned-Y"),
            ],
        )];
        let e = Entry::new(9, None, "x=y", &ndn("x=y", vec![]), &attrs);
        assert!(
            e.packed().len() < 20,
            "values stored by number: {:?}",
            e.packed()
        );
        assert_eq!(e.to_attrs(), attrs);
        assert!(e.has_value(AttrId(ty), b"interned-x"));
        assert!(unpack(e.packed(), 4001).is_ok());
        // Read with a file table that numbers the pairs differently: packed afresh.
        let x = intern::intern(b"Interned-X", b"interned-x").expect("interned");
        let y = intern::intern(b"Interned-Y", b"Interned-Y").expect("interned");
        let mut file: Vec<Pair<'static>> = vec![(b"", b""); x.max(y) as usize + 1];
        file[x as usize] = (b"Interned-Y", b"Interned-Y");
        file[y as usize] = (b"Interned-X", b"interned-x");
        let swapped = Entry::from_packed(9, None, e.packed(), 2, 4001, &file, false).expect("ok");
        assert_eq!(
            swapped.to_attrs()[0].values,
            [Box::from(&b"Interned-Y"[..]), Box::from(&b"Interned-X"[..])]
        );
        // A number outside the file's table is refused.
        assert!(Entry::from_packed(9, None, e.packed(), 2, 4001, &[], false).is_err());
    }

    fn ndn(norm: &str, rdns: Rdns) -> NormDn {
        NormDn {
            norm: norm.into(),
            rdns,
        }
    }

    fn parsed(schema: &Schema, dn: &str) -> NormDn {
        schema::Dn::parse(dn)
            .and_then(|d| d.normalize(schema))
            .expect("dn")
    }

    #[test]
    fn packs_and_reads_back() {
        let schema = Schema::builtin();
        let attrs = vec![
            attr(3, "", &[(b"Top", b"top"), (b"person", b"person")]),
            attr(7, ";lang-en", &[(b"A  B", b"a b")]),
            attr(9, "", &[(&[0, 0xff, 0x80], &[0, 0xff, 0x80])]),
        ];
        let n = parsed(&schema, "CN=A  B,DC=x");
        let e = Entry::new(5, Some(1), "CN=A  B,DC=x", &n, &attrs);
        assert_eq!((e.id, e.parent), (5, Some(1)));
        assert_eq!(e.dn(), "CN=A  B,DC=x");
        assert_eq!(e.ndn_str(), "cn=a b,dc=x");
        assert_eq!(e.ndn(&schema), n);
        assert_eq!(e.depth(), 2);
        assert_eq!(e.to_attrs(), attrs);
        assert_eq!(e.attrs().len(), 3);
        let fewer = e.with_attrs(&attrs[1..]);
        assert_eq!((fewer.id, fewer.parent, fewer.depth()), (5, Some(1), 2));
        assert_eq!((fewer.dn(), fewer.ndn_str()), (e.dn(), e.ndn_str()));
        assert_eq!(fewer.ndn(&schema), n);
        assert_eq!(fewer.to_attrs(), &attrs[1..]);
        let m = parsed(&schema, "CN=A  B,OU=Y");
        let moved = e.renamed("CN=A  B,OU=Y", &m, Some(8));
        assert_eq!((moved.id, moved.parent, moved.depth()), (5, Some(8), 2));
        assert_eq!(
            (moved.dn(), moved.ndn_str()),
            ("CN=A  B,OU=Y", "cn=a b,ou=y")
        );
        assert_eq!(moved.ndn(&schema), m);
        assert_eq!(moved.to_attrs(), attrs);
        let oc = e.attr(AttrId(3)).expect("type 3");
        assert_eq!(oc.len(), 2);
        assert_eq!(oc.first(), Some(&b"Top"[..]));
        assert_eq!(oc.find(b"person"), Some(1));
        assert!(e.attr(AttrId(7)).is_none(), "only with options");
        assert!(e.has_value(AttrId(7), b"a b"));
        assert!(!e.has_value(AttrId(7), b"A  B"));
        // A DN that is its own normalized form is stored once.
        let same = Entry::new(6, None, "dc=x", &ndn("dc=x", vec![]), &[]);
        assert_eq!(same.ndn_str(), "dc=x");
        assert_eq!(same.attrs().count(), 0);
        assert!(unpack(same.packed(), 0).is_ok());
        // A single value without options: type, header (body length and flags), body.
        let one = Entry::new(6, None, "dc=x", &ndn("dc=x", vec![]), &attrs[2..]);
        // (After "dc=x", the normalized DN being the same, and a depth of 0.)
        assert_eq!(&one.packed()[7..], &[1, 9, 5 << 2, 6, 0, 0xff, 0x80, 0][..]);
    }

    #[test]
    fn layout_1_is_converted() {
        let schema = Schema::builtin();
        let attrs = vec![
            attr(3, "", &[(b"Top", b"top"), (b"person", b"person")]),
            attr(7, ";lang-en", &[(b"A  B", b"a b")]),
            attr(9, "", &[(b"x", b"x")]),
            attr(11, "", &[]),
        ];
        let types = schema.attr_count();
        for dn in ["CN=A  B,DC=x", "dc=x", ""] {
            let n = parsed(&schema, dn);
            let old = pack_layout1(dn, &n, &attrs);
            let e = Entry::from_packed(4, Some(2), &old, 1, types, &[], true).expect("layout 1");
            let want = Entry::new(4, Some(2), dn, &n, &attrs);
            assert_eq!(e.packed(), want.packed(), "{dn}");
            assert_eq!((e.depth(), e.ndn(&schema)), (n.rdns.len(), n));
            // Damage in the old framing is refused, not converted.
            for cut in 0..old.len() {
                assert!(
                    Entry::from_packed(4, None, &old[..cut], 1, types, &[], true).is_err(),
                    "{dn}: cut at {cut}"
                );
            }
            assert!(Entry::from_packed(4, None, &old, 1, 11, &[], true).is_err());
        }
        assert!(Entry::from_packed(4, None, &[], 3, types, &[], true).is_err());
    }

    #[test]
    fn damaged_packed_entries_are_refused_without_panicking() {
        let attrs = vec![attr(1, "", &[(b"Ab", b"ab"), (b"c", b"c")])];
        let e = Entry::new(
            1,
            None,
            "x=Ab",
            &ndn("x=ab", vec![vec![(AttrId(1), b"ab".to_vec())]]),
            &attrs,
        );
        let p = e.packed();
        assert!(unpack(p, 2).is_ok());
        assert!(unpack(p, 1).is_err(), "type id 1 out of range");
        for cut in 0..p.len() {
            assert!(unpack(&p[..cut], 2).is_err(), "cut at {cut}");
        }
        let mut longer = p.to_vec();
        longer.push(0);
        assert!(unpack(&longer, 2).is_err());
    }

    fn any_attr() -> impl Strategy<Value = Attr> {
        let value = (
            proptest::collection::vec(any::<u8>(), 0..200),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
        );
        (
            0u32..300,
            "(;[a-z]{1,5}){0,2}",
            proptest::collection::vec(value, 1..4),
        )
            .prop_map(|(ty, options, values)| Attr {
                ty: AttrId(ty),
                options: options.into(),
                norm: values
                    .iter()
                    .map(|(raw, n)| Box::from(n.as_deref().unwrap_or(raw)))
                    .collect(),
                values: values.into_iter().map(|(raw, _)| raw.into()).collect(),
            })
    }

    proptest! {
        #[test]
        fn any_entry_round_trips(
            dn in "[ -~]{0,300}",
            norm in proptest::option::of("[ -~]{0,40}"),
            attrs in proptest::collection::vec(any_attr(), 0..140),
        ) {
            let n = ndn(norm.as_deref().unwrap_or(&dn), vec![vec![(AttrId(299), b"v".to_vec())]]);
            let e = Entry::new(1, None, &dn, &n, &attrs);
            prop_assert_eq!(e.dn(), dn.as_str());
            prop_assert_eq!(e.ndn_str(), n.norm.as_str());
            prop_assert_eq!(e.to_attrs(), attrs);
            prop_assert!(unpack(e.packed(), 300).is_ok());
        }

        /// `ndn` parses the stored DN again: for any DN a client may give, in the form the
        /// server stores it (`Dn::pretty`), that gives the DN the entry was made with.
        #[test]
        fn the_normalized_dn_is_parsed_back(
            rdns in proptest::collection::vec(
                proptest::collection::vec(
                    (prop_oneof![
                        Just("cn"), Just("CN"), Just("2.5.4.3"), Just("ou"), Just("dc"),
                        Just("uid"), Just("o"), Just("l"), Just("telephoneNumber"),
                        Just("mail"), Just("sn"), Just("description"),
                    ], "[ -~\u{e9}\u{4e2d}]{1,12}"),
                    1..3),
                1..5),
        ) {
            let schema = Schema::builtin();
            let mut text = String::new();
            for (i, rdn) in rdns.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                for (j, (ty, v)) in rdn.iter().enumerate() {
                    if j > 0 {
                        text.push('+');
                    }
                    text.push_str(ty);
                    text.push('=');
                    for (k, c) in v.chars().enumerate() {
                        let edge = (k == 0 && (c == ' ' || c == '#'))
                            || (k + 1 == v.chars().count() && c == ' ');
                        if edge || ",+\"\\<>;=".contains(c) {
                            text.push('\\');
                        }
                        text.push(c);
                    }
                }
            }
            let Ok(dn) = schema::Dn::parse(&text) else {
                return Err(TestCaseError::reject("not a DN"));
            };
            let Ok(n) = dn.normalize(&schema) else {
                return Err(TestCaseError::reject("does not normalize"));
            };
            let stored = dn.pretty(&schema);
            let e = Entry::new(1, None, &stored, &n, &[]);
            prop_assert_eq!(e.ndn(&schema), n);
            prop_assert_eq!(e.depth(), rdns.len());
        }

        #[test]
        fn checking_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(e) = unpack(&bytes, 50) {
                // Whatever passes the check reads without panicking.
                let _ = (e.dn(), e.ndn(&Schema::builtin()), e.to_attrs());
            }
        }
    }
}
