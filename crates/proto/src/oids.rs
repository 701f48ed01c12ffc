//! Well-known object identifiers, as the dotted strings that travel in LDAPOIDs.

/// "Who am I?" extended operation (RFC 4532).
pub const WHO_AM_I: &str = "1.3.6.1.4.1.4203.1.11.3";
/// Password Modify extended operation (RFC 3062).
pub const PASSWORD_MODIFY: &str = "1.3.6.1.4.1.4203.1.11.1";
/// StartTLS extended operation (RFC 4511 §4.14).
pub const START_TLS: &str = "1.3.6.1.4.1.1466.20037";
/// Notice of Disconnection unsolicited notification (RFC 4511 §4.4.1).
pub const NOTICE_OF_DISCONNECTION: &str = "1.3.6.1.4.1.1466.20036";
/// Cancel extended operation (RFC 3909).
pub const CANCEL: &str = "1.3.6.1.1.8";
/// ManageDsaIT control (RFC 3296).
pub const MANAGE_DSA_IT: &str = "2.16.840.1.113730.3.4.2";
/// Simple Paged Results control (RFC 2696).
pub const PAGED_RESULTS: &str = "1.2.840.113556.1.4.319";
/// Server-side sort request / response controls (RFC 2891).
pub const SORT_REQUEST: &str = "1.2.840.113556.1.4.473";
pub const SORT_RESPONSE: &str = "1.2.840.113556.1.4.474";
/// Virtual list view request / response controls (draft-ietf-ldapext-ldapv3-vlv-09).
pub const VLV_REQUEST: &str = "2.16.840.1.113730.3.4.9";
pub const VLV_RESPONSE: &str = "2.16.840.1.113730.3.4.10";
/// Assertion control (RFC 4528).
pub const ASSERTION: &str = "1.3.6.1.1.12";
/// Pre-read / post-read controls (RFC 4527).
pub const PRE_READ: &str = "1.3.6.1.1.13.1";
pub const POST_READ: &str = "1.3.6.1.1.13.2";
/// Subtree Delete control.
pub const SUBTREE_DELETE: &str = "1.2.840.113556.1.4.805";
/// Permissive Modify control (Microsoft; OpenLDAP): adding a value that exists or deleting one
/// that does not is not an error.
pub const PERMISSIVE_MODIFY: &str = "1.2.840.113556.1.4.1413";
/// Relax Rules control (draft-zeilenga-ldap-relax; OpenLDAP's experimental arc, as slapd
/// accepts it): the administrator's add may carry server-kept attributes (entryUUID …).
pub const RELAX_RULES: &str = "1.3.6.1.4.1.4203.666.5.12";
/// Start Transaction extended operation (RFC 5805).
pub const TXN_START: &str = "1.3.6.1.1.21.1";
/// Transaction Specification control (RFC 5805).
pub const TXN_SPEC: &str = "1.3.6.1.1.21.2";
/// End Transaction extended operation (RFC 5805).
pub const TXN_END: &str = "1.3.6.1.1.21.3";
/// Proxied Authorization v2 control (RFC 4370).
pub const PROXIED_AUTHZ: &str = crate::controls::proxyauthz::OID;
/// Don't Use Copy control (RFC 6171).
pub const DONT_USE_COPY: &str = crate::controls::dontusecopy::OID;
/// Password Policy request and response control (draft-behera-ldap-password-policy-10).
pub const PASSWORD_POLICY: &str = crate::controls::ppolicy::OID;
/// Matched Values control (RFC 3876).
pub const MATCHED_VALUES: &str = crate::controls::matchedvalues::OID;
/// Dereference control (draft-masarati-ldap-deref).
pub const DEREF: &str = crate::controls::deref::OID;
/// Content Synchronization (syncrepl) request control (RFC 4533).
pub const SYNC_REQUEST: &str = crate::controls::sync::REQUEST_OID;
/// Sync State, Sync Done controls and the Sync Info Message (RFC 4533).
pub const SYNC_STATE: &str = crate::controls::sync::STATE_OID;
pub const SYNC_DONE: &str = crate::controls::sync::DONE_OID;
pub const SYNC_INFO: &str = crate::controls::sync::INFO_OID;
/// All Operational Attributes feature ("+", RFC 3673).
pub const FEATURE_ALL_OPERATIONAL: &str = "1.3.6.1.4.1.4203.1.5.1";
/// Absolute True and False filters feature (RFC 4526).
pub const FEATURE_ABSOLUTE_FILTERS: &str = "1.3.6.1.4.1.4203.1.5.3";
/// Modify-Increment feature (RFC 4525).
pub const FEATURE_MODIFY_INCREMENT: &str = "1.3.6.1.1.14";
/// Persistent Search request control and Entry Change Notification response control
/// (draft-ietf-ldapext-psearch-03).
pub const PERSISTENT_SEARCH: &str = crate::controls::psearch::OID;
pub const ENTRY_CHANGE_NOTIFICATION: &str = crate::controls::psearch::ECN_OID;
