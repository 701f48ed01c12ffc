//! Entries as kept in memory.
//!
//! A stored [`Entry`] is one packed byte buffer (plus its id and parent): the DN as given, the
//! normalized DN when it differs, the normalized RDN sequence, and every attribute with its
//! values as the client sent them (returned verbatim) and, only where it differs, each value's
//! equality-normalized form (used for matching, duplicate detection and index keys), so matching
//! never re-normalizes stored data. Readers walk the buffer through [`AttrRef`] views.
//!
//! Packing is what makes millions of entries fit: the unpacked form (a `Vec` of attributes, each
//! with two `Vec`s of boxed values and a boxed DN parse) cost about 3.6 KB per reference entry,
//! nearly all of it allocation headers and pointers; packed it is one allocation of roughly the
//! size of its text. Writers edit the owned form ([`Attr`], from [`Entry::to_attrs`]) and pack
//! the result into a new entry.
//!
//! Buffer layout (integers are LEB128 varints, written only by [`Entry::new`]):
//!
//! ```text
//! entry := len dn | ndn | len rdns rdns | count attrs | attr*
//! ndn   := 0 (same bytes as dn) | len+1 bytes
//! rdns  := count rdn* ; rdn := count (type len value)*
//! attr  := type | len options | count values | len body | body
//! body  := value* ; value := 2*len raw norm | 2*id+1 (interned pair `id`, see `intern`)
//! norm  := 0 (same as raw) | len+1 bytes
//! ```

use std::fmt;

use schema::{AttrId, NormDn, Schema, ValueError};

use crate::intern;

/// A (raw, normalized) value pair.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

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
}

thread_local! {
    /// Buffers `Entry::new` packs into before making the entry's one allocation.
    static SCRATCH: std::cell::RefCell<(Vec<u8>, Vec<u8>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Appends the name part to `out`: the DN, the normalized DN where it differs, the normalized
/// RDNs (`part`: scratch).
fn pack_name(out: &mut Vec<u8>, part: &mut Vec<u8>, dn: &str, ndn: &NormDn) {
    part.clear();
    for rdn in &ndn.rdns {
        put_rdn(part, rdn.iter().map(|(ty, v)| (*ty, &v[..])));
    }
    put_name(out, dn, &ndn.norm, ndn.rdns.len(), part);
}

/// Appends one normalized RDN (its AVAs' types and raw values) in the packed form of the name
/// part's RDN list; `Packer::start` takes such RDNs back to back.
pub fn put_rdn<'a>(out: &mut Vec<u8>, avas: impl ExactSizeIterator<Item = (AttrId, &'a [u8])>) {
    put_varint(out, avas.len());
    for (ty, v) in avas {
        put_varint(out, ty.0 as usize);
        put_bytes(out, v);
    }
}

/// Appends the name part: the DN, the normalized DN where it differs, and `count` RDNs
/// written by `put_rdn` (`rdns`).
fn put_name(out: &mut Vec<u8>, dn: &str, norm: &str, count: usize, rdns: &[u8]) {
    put_bytes(out, dn.as_bytes());
    if norm == dn {
        out.push(0);
    } else {
        put_varint(out, norm.len() + 1);
        out.extend_from_slice(norm.as_bytes());
    }
    put_varint(out, varint_len(count) + rdns.len());
    put_varint(out, count);
    out.extend_from_slice(rdns);
}

/// The bytes `put_varint` writes for `v`.
fn varint_len(v: usize) -> usize {
    (usize::BITS - v.leading_zeros()).max(1).div_ceil(7) as usize
}

fn depth_of(ndn: &NormDn) -> u32 {
    u32::try_from(ndn.rdns.len()).unwrap_or(u32::MAX)
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
    put_varint(out, ty.0 as usize);
    put_bytes(out, options.as_bytes());
    put_varint(out, values.len());
    body.clear();
    let interned = intern_all || intern::is_interned_type(ty);
    for (raw, norm) in values {
        if let Some(id) = interned.then(|| intern::intern(raw, norm)).flatten() {
            put_varint(body, 2 * id as usize + 1);
            continue;
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
    put_bytes(out, body);
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
        let pairs = a
            .values
            .iter()
            .enumerate()
            .map(|(i, raw)| (&**raw, a.norm.get(i).map_or(&**raw, |n| &**n)));
        pack_attr(out, body, a.ty, &a.options, pairs, false);
    }
    put_count(out, count_at, count);
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
    /// Starts an entry: its DN as given, its normalized DN, and its `depth` normalized RDNs
    /// (`rdns`, as `put_rdn` writes them, most specific first).
    pub fn start(&mut self, dn: &str, norm: &str, depth: usize, rdns: &[u8]) {
        self.out.clear();
        put_name(&mut self.out, dn, norm, depth, rdns);
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

/// The normalized RDN sequence of a DN, as `NormDn::rdns`.
type Rdns = Vec<Vec<(AttrId, Vec<u8>)>>;

fn str_of(b: &[u8]) -> &str {
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
            pack_name(out, part, dn, ndn);
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
        // The name part (DN, normalized DN, RDNs) is copied as it is.
        let name = &self.packed[..self.name_end()];
        SCRATCH.with_borrow_mut(|(out, part)| {
            out.clear();
            out.extend_from_slice(name);
            pack_attrs(out, part, attrs);
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
        SCRATCH.with_borrow_mut(|(out, part)| {
            out.clear();
            pack_name(out, part, dn, ndn);
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
    /// accessor can fail on it. Interned ids are those of `interned` (the file's table): when
    /// `same_ids`, they are this process's ids too and the bytes are taken as they are;
    /// otherwise the entry is packed afresh. Whether the attribute ids and normalized forms
    /// are those of the schema in force is the caller's business (the snapshot records a
    /// schema fingerprint; see also `attrs_in`).
    pub fn from_packed(
        id: EntryId,
        parent: Option<EntryId>,
        packed: &[u8],
        attr_count: usize,
        interned: &[Pair<'_>],
        same_ids: bool,
    ) -> Result<Entry, String> {
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
        str_of(self.cur().bytes())
    }

    /// The normalized DN string (`NormDn::norm`).
    pub fn ndn_str(&self) -> &str {
        let mut c = self.cur();
        let dn = c.bytes();
        match c.varint() {
            0 => str_of(dn),
            n => str_of(c.take(n - 1)),
        }
    }

    /// A cursor past the DN and the normalized DN (at the RDN block).
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

    fn rdn_block(&self) -> Cur<'_> {
        let mut c = self.after_dns();
        Cur { b: c.bytes(), i: 0 }
    }

    /// Where the name part (DN, normalized DN, RDNs) ends and the attributes begin.
    fn name_end(&self) -> usize {
        let mut c = self.after_dns();
        c.bytes();
        c.i
    }

    /// The number of RDNs of the DN.
    pub fn depth(&self) -> usize {
        self.depth as usize
    }

    /// The normalized DN with its RDNs (allocates; comparisons should use `ndn_str`).
    pub fn ndn(&self) -> NormDn {
        let mut c = self.rdn_block();
        let n = c.varint();
        let mut rdns: Rdns = Vec::with_capacity(n);
        for _ in 0..n {
            let k = c.varint();
            let mut rdn = Vec::with_capacity(k);
            for _ in 0..k {
                let ty = AttrId(c.varint() as u32);
                rdn.push((ty, c.bytes().to_vec()));
            }
            rdns.push(rdn);
        }
        NormDn {
            norm: self.ndn_str().to_string(),
            rdns,
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

/// The attributes of an entry.
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
        let options = str_of(self.c.bytes());
        let count = self.c.varint();
        let body = self.c.bytes();
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

/// The (raw, normalized) value pairs of an attribute.
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

/// Checks that `packed` is a well-formed entry buffer whose attribute ids are below
/// `attr_count` and interned ids below `interned` (so that reading it can never fail);
/// returns the number of RDNs.
fn check_packed(packed: &[u8], attr_count: usize, interned: usize) -> Result<usize, String> {
    let mut r = Check { b: packed, i: 0 };
    let dn = r.bytes("DN")?;
    std::str::from_utf8(dn).map_err(|_| "DN is not UTF-8".to_string())?;
    match r.varint("normalized DN")? {
        0 => {}
        n => {
            let b = r.take(n - 1, "normalized DN")?;
            std::str::from_utf8(b).map_err(|_| "normalized DN is not UTF-8".to_string())?;
        }
    }
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
    let n = r.varint("attribute count")?;
    for _ in 0..n {
        r.attr_type(attr_count)?;
        let o = r.bytes("options")?;
        std::str::from_utf8(o).map_err(|_| "options are not UTF-8".to_string())?;
        let count = r.varint("value count")?;
        let body = r.bytes("values")?;
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
    }
    if r.i != packed.len() {
        return Err("entry has trailing bytes".into());
    }
    Ok(depth)
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
    fn attr_type(&mut self, attr_count: usize) -> Result<(), String> {
        let ty = self.varint("attribute type")?;
        if ty >= attr_count {
            return Err(format!("attribute type {ty} is not in the schema"));
        }
        Ok(())
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

    /// Reads packed bytes of this process (no interned values of another table).
    fn unpack(packed: &[u8], attr_count: usize) -> Result<Entry, String> {
        let table: Vec<Pair<'static>> = (0..intern::len()).filter_map(intern::get).collect();
        Entry::from_packed(1, None, packed, attr_count, &table, true)
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
        let swapped = Entry::from_packed(9, None, e.packed(), 4001, &file, false).expect("ok");
        assert_eq!(
            swapped.to_attrs()[0].values,
            [Box::from(&b"Interned-Y"[..]), Box::from(&b"Interned-X"[..])]
        );
        // A number outside the file's table is refused.
        assert!(Entry::from_packed(9, None, e.packed(), 4001, &[], false).is_err());
    }

    fn ndn(norm: &str, rdns: Rdns) -> NormDn {
        NormDn {
            norm: norm.into(),
            rdns,
        }
    }

    #[test]
    fn packs_and_reads_back() {
        let attrs = vec![
            attr(3, "", &[(b"Top", b"top"), (b"person", b"person")]),
            attr(7, ";lang-en", &[(b"A  B", b"a b")]),
            attr(9, "", &[(&[0, 0xff, 0x80], &[0, 0xff, 0x80])]),
        ];
        let n = ndn(
            "cn=a b,dc=x",
            vec![
                vec![(AttrId(7), b"a b".to_vec())],
                vec![(AttrId(2), b"x".to_vec())],
            ],
        );
        let e = Entry::new(5, Some(1), "CN=A  B,DC=x", &n, &attrs);
        assert_eq!((e.id, e.parent), (5, Some(1)));
        assert_eq!(e.dn(), "CN=A  B,DC=x");
        assert_eq!(e.ndn_str(), "cn=a b,dc=x");
        assert_eq!(e.ndn().rdns, n.rdns);
        assert_eq!(e.depth(), 2);
        assert_eq!(e.to_attrs(), attrs);
        assert_eq!(e.attrs().len(), 3);
        let fewer = e.with_attrs(&attrs[1..]);
        assert_eq!((fewer.id, fewer.parent, fewer.depth()), (5, Some(1), 2));
        assert_eq!((fewer.dn(), fewer.ndn_str()), (e.dn(), e.ndn_str()));
        assert_eq!(fewer.ndn().rdns, n.rdns);
        assert_eq!(fewer.to_attrs(), &attrs[1..]);
        let m = ndn(
            "cn=a b,ou=y",
            vec![
                vec![(AttrId(7), b"a b".to_vec())],
                vec![(AttrId(4), b"y".to_vec())],
            ],
        );
        let moved = e.renamed("CN=A  B,OU=Y", &m, Some(8));
        assert_eq!((moved.id, moved.parent, moved.depth()), (5, Some(8), 2));
        assert_eq!(
            (moved.dn(), moved.ndn_str()),
            ("CN=A  B,OU=Y", "cn=a b,ou=y")
        );
        assert_eq!(moved.ndn().rdns, m.rdns);
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

        #[test]
        fn checking_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(e) = unpack(&bytes, 50) {
                // Whatever passes the check reads without panicking.
                let _ = (e.dn(), e.ndn(), e.to_attrs());
            }
        }
    }
}
