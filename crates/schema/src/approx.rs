//! Approximate matching (`~=`), as slapd answers it for the string types.
//!
//! slapd gives the caseIgnore/caseExact string rules (and their IA5 kin) an approximate rule
//! that compares words by how they sound: every word of the assertion must sound like a word of
//! the value, in the same order, other words of the value in between allowed. So
//! `(cn~=alise archer)` finds "Alice Archer", `(cn~=archer)` does too, `(cn~=archer alice)` does
//! not. How a word sounds is its metaphone code (Lawrence Philips, 1990), at most four
//! characters, with the rules as slapd applies them (including their oddities, such as a `B`
//! that counts only as a word's last letter), so that both servers find the same entries.
//!
//! Before coding, text is reduced to ASCII as slapd does: accented Latin letters lose their
//! accents (`é` → `e`), other non-ASCII characters are dropped.

/// Longest code of a word.
const CODE_LEN: usize = 4;
/// Letters of a word that are looked at; the rest are ignored.
const MAX_LETTERS: usize = 31;

/// An approximate assertion: the codes of its words, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approx {
    codes: Vec<String>,
}

impl Approx {
    /// The assertion of `(attr~=value)`. An assertion without words matches nothing.
    pub fn new(assertion: &[u8]) -> Approx {
        let text = to_ascii(assertion);
        let codes = text
            .split(' ')
            .filter(|w| !w.is_empty())
            .map(|w| metaphone(w.as_bytes()))
            .collect();
        Approx { codes }
    }

    /// Whether `value` sounds like the assertion: each assertion word, in turn, sounds like one
    /// of the value's words after the one the previous assertion word matched.
    pub fn matches(&self, value: &[u8]) -> bool {
        if self.codes.is_empty() {
            return false;
        }
        let text = to_ascii(value);
        let mut words = text.split(' ').map(|w| metaphone(w.as_bytes()));
        self.codes
            .iter()
            .all(|code| words.by_ref().any(|w| w == *code))
    }
}

/// The text with accents taken off Latin letters and every other non-ASCII character dropped.
fn to_ascii(v: &[u8]) -> String {
    let s = String::from_utf8_lossy(v);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else if let Some(base) = latin_base(c) {
            out.push_str(base);
        }
    }
    out
}

/// The ASCII letters a Latin-1 letter decomposes to (compatibility decomposition, marks
/// dropped); `None` for characters without an ASCII base.
fn latin_base(c: char) -> Option<&'static str> {
    Some(match c {
        'À'..='Å' => "A",
        'Ç' => "C",
        'È'..='Ë' => "E",
        'Ì'..='Ï' => "I",
        'Ñ' => "N",
        'Ò'..='Ö' => "O",
        'Ù'..='Ü' => "U",
        'Ý' => "Y",
        'à'..='å' => "a",
        'ç' => "c",
        'è'..='ë' => "e",
        'ì'..='ï' => "i",
        'ñ' => "n",
        'ò'..='ö' => "o",
        'ù'..='ü' => "u",
        'ý' | 'ÿ' => "y",
        _ => return None,
    })
}

fn is_vowel(c: u8) -> bool {
    matches!(c, b'A' | b'E' | b'I' | b'O' | b'U')
}

/// Letters coded as themselves.
fn is_kept(c: u8) -> bool {
    matches!(c, b'F' | b'J' | b'L' | b'M' | b'N' | b'R')
}

/// Letters after which an `H` is silent.
fn softens_h(c: u8) -> bool {
    matches!(c, b'C' | b'G' | b'P' | b'S' | b'T')
}

/// Vowels that make a `C` or `G` soft.
fn is_front_vowel(c: u8) -> bool {
    matches!(c, b'E' | b'I' | b'Y')
}

/// Letters that, three places before a `GH`, keep it from sounding as `F`.
fn blocks_gh(c: u8) -> bool {
    matches!(c, b'B' | b'D' | b'H')
}

/// Where a word ends: at a character that is not ASCII, a space, punctuation, a digit or NUL.
fn ends_word(b: u8) -> bool {
    !b.is_ascii()
        || b.is_ascii_whitespace()
        || b == 0x0b
        || b.is_ascii_punctuation()
        || b.is_ascii_digit()
        || b == 0
}

/// The upper-case letters of a word, from its start to its first word end, with the
/// position of the first letter to code and a look-up that answers 0 outside of the
/// letters (before `start`, or past the end).
struct Word {
    letters: Vec<u8>,
    start: usize,
}

impl Word {
    fn new(word: &[u8]) -> Word {
        let mut letters = Vec::with_capacity(MAX_LETTERS);
        for &b in word {
            if ends_word(b) || letters.len() == MAX_LETTERS {
                break;
            }
            if b.is_ascii_alphabetic() {
                letters.push(b.to_ascii_uppercase());
            }
        }
        let mut w = Word { letters, start: 0 };
        // Silent or changed first letters: PN, KN, GN, AE, WR keep the second; WH is W; an
        // initial X sounds as S.
        match (w.at(0), w.at(1)) {
            (b'P' | b'K' | b'G', b'N') | (b'A', b'E') | (b'W', b'R') => w.start = 1,
            (b'W', b'H') => {
                w.letters[1] = b'W';
                w.start = 1;
            }
            (b'X', _) => w.letters[0] = b'S',
            _ => {}
        }
        w
    }

    /// The letter at `i`, or 0.
    fn at(&self, i: isize) -> u8 {
        if i < self.start as isize {
            return 0;
        }
        usize::try_from(i)
            .ok()
            .and_then(|i| self.letters.get(i))
            .copied()
            .unwrap_or(0)
    }
}

/// The metaphone code of the first word of `word`, at most `CODE_LEN` characters (`0` stands
/// for "th"); empty when it has no letters.
pub fn metaphone(word: &[u8]) -> String {
    let w = Word::new(word);
    let mut code = String::with_capacity(CODE_LEN + 1);
    if w.letters.is_empty() {
        return code;
    }
    let end = w.letters.len() as isize;
    let first = w.start as isize;
    // An X codes as KS; the S takes the place of the letter after it.
    let mut pending_s = false;
    let mut i = first;
    while i <= end && code.len() < CODE_LEN {
        let cur = i;
        i += 1;
        let at = |k: isize| w.at(cur + k);
        let (prev, c, next, next2) = (at(-1), at(0), at(1), at(2));
        if pending_s {
            pending_s = false;
            code.push('S');
            continue;
        }
        // A doubled letter counts once, except C.
        if prev == c && c != b'C' {
            continue;
        }
        if is_kept(c) || (cur == first && is_vowel(c)) {
            code.push(char::from(c));
            continue;
        }
        let out: Option<char> = match c {
            b'B' => (cur == end - 1 && prev != b'M').then_some('B'),
            b'C' => {
                if prev == b'S' && is_front_vowel(next) {
                    None // SCE, SCI, SCY: silent
                } else if next == b'I' && next2 == b'A' {
                    Some('X')
                } else if is_front_vowel(next) {
                    Some('S')
                } else if next == b'H' {
                    let hard = (cur == first && !is_vowel(next2)) || prev == b'S';
                    Some(if hard { 'K' } else { 'X' })
                } else {
                    Some('K')
                }
            }
            b'D' => Some(if next == b'G' && is_front_vowel(next2) {
                'J'
            } else {
                'T'
            }),
            b'G' => {
                let sounded = (next != b'J' || is_vowel(next2))
                    && (next != b'N' || (cur + 1 < end && (next2 != b'E' || at(3) != b'D')))
                    && (prev != b'D' || !is_front_vowel(next));
                if sounded {
                    Some(if is_front_vowel(next) && next2 != b'G' {
                        'G'
                    } else {
                        'K'
                    })
                } else if next == b'H' && !blocks_gh(at(-3)) && at(-4) != b'H' {
                    Some('F')
                } else {
                    None
                }
            }
            b'H' => (!softens_h(prev) && (!is_vowel(prev) || is_vowel(next))).then_some('H'),
            b'K' => (prev != b'C').then_some('K'),
            b'P' => Some(if next == b'H' { 'F' } else { 'P' }),
            b'Q' => Some('K'),
            b'S' => {
                let sh = next == b'H' || (next == b'I' && matches!(next2, b'O' | b'A'));
                Some(if sh { 'X' } else { 'S' })
            }
            b'T' => {
                if next == b'I' && matches!(next2, b'O' | b'A') {
                    Some('X')
                } else if next == b'H' {
                    Some('0')
                } else if next == b'C' && next2 == b'H' {
                    None
                } else {
                    Some('T')
                }
            }
            b'V' => Some('F'),
            b'W' | b'Y' => is_vowel(next).then_some(char::from(c)),
            b'X' => {
                if cur == first {
                    Some('S')
                } else {
                    pending_s = true;
                    Some('K')
                }
            }
            b'Z' => Some('S'),
            _ => None,
        };
        if let Some(o) = out {
            code.push(o);
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(w: &str) -> String {
        metaphone(w.as_bytes())
    }

    #[test]
    fn codes_of_common_names() {
        assert_eq!(m("Alice"), "ALS");
        assert_eq!(m("alise"), "ALS");
        assert_eq!(m("Archer"), "ARXR");
        assert_eq!(m("arsher"), "ARXR");
        assert_eq!(m("Arker"), "ARKR");
        assert_eq!(m("Thomas"), "0MS");
        assert_eq!(m("Knight"), "NKT");
        assert_eq!(m("Wright"), "RKT");
        assert_eq!(m("Philips"), "FLPS");
        assert_eq!(m("Xavier"), "SFR");
        assert_eq!(m("Smith"), "SM0");
        assert_eq!(m("Schmidt"), "SKMT");
        assert_eq!(m("White"), "WT");
        assert_eq!(m("Aebersold"), "ERSL");
    }

    #[test]
    fn codes_keep_slapds_oddities() {
        // B only as the last letter, and not after M.
        assert_eq!(m("Robert"), "RRT");
        assert_eq!(m("Bob"), "B");
        assert_eq!(m("Lamb"), "LM");
        // The S of an X takes the next letter's place.
        assert_eq!(m("Baxter"), "KSR");
        assert_eq!(m("Axe"), "AKS");
        // Doubled letters count once; C does not.
        assert_eq!(m("Lloyd"), "LT");
        assert_eq!(m("Acca"), "AKK");
    }

    #[test]
    fn a_word_ends_at_its_first_break() {
        assert_eq!(m("o'brien"), "O");
        assert_eq!(m("user.1"), "USR");
        assert_eq!(m("42"), "");
        assert_eq!(m(""), "");
        assert_eq!(m("Ab\u{e9}c"), "AB");
    }

    #[test]
    fn at_most_four_characters_from_thirty_one_letters() {
        assert_eq!(m("Mississippi"), "MSSP");
        let long = "a".repeat(100);
        assert_eq!(m(&long), "A");
    }

    #[test]
    fn words_match_in_order() {
        let a = Approx::new(b"alise archer");
        assert!(a.matches(b"alice archer"));
        assert!(a.matches(b"alice b archer"));
        assert!(!a.matches(b"archer alice"));
        assert!(!a.matches(b"alice"));
        assert!(Approx::new(b"archer").matches(b"alice archer"));
        assert!(Approx::new(b"  archer  ").matches(b"alice archer"));
        assert!(!Approx::new(b"bob").matches(b"alice archer"));
        assert!(!Approx::new(b"   ").matches(b"alice archer"));
        assert!(!Approx::new(b"alice alice").matches(b"alice archer"));
        assert!(Approx::new(b"jos\xc3\xa9").matches(b"jose"));
    }
}
