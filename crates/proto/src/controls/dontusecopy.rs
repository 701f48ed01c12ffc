//! Don't Use Copy (RFC 6171), OID 1.3.6.1.1.22: the client wants the answer from an original,
//! not a copy. The control has no value and must be critical.

use crate::DecodeErrorKind;

pub const OID: &str = "1.3.6.1.1.22";

/// Checks a dontUseCopy control: no value (an empty value is still a value), critical.
pub fn check(critical: bool, value: Option<&[u8]>) -> Result<(), DecodeErrorKind> {
    if value.is_some() {
        return Err(DecodeErrorKind::Invalid(
            "dontUseCopy control value not absent",
        ));
    }
    if !critical {
        return Err(DecodeErrorKind::Invalid(
            "dontUseCopy criticality of FALSE not allowed",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_critical_control_without_value_is_valid() {
        assert!(check(true, None).is_ok());
        assert!(check(false, None).is_err());
        assert!(check(true, Some(b"")).is_err());
        assert!(check(true, Some(&[0x30, 0x00])).is_err());
    }
}
