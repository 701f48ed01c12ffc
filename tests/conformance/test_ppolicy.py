"""Password policy (draft-behera-ldap-password-policy-10 as OpenLDAP 2.5's ppolicy overlay).

Both servers run the policy overlay with the default policy cn=default,ou=ppolicy,<suffix>
and the accountLocked error enabled (slapd: scripts/slapd-reference.sh; Linden:
scripts/run-conformance-linden.sh). Each test makes its own policy entries and accounts in a
fresh OU; accounts name their policy with pwdPolicySubentry, so the rest of the suite runs
under no policy. The one test of the default policy creates it and removes it again.
"""
import re
import time
import uuid

import ldap
import ldap.modlist
import pytest
from ldap.controls.ppolicy import PasswordPolicyControl

from conftest import LDAP_URL, SUFFIX, bind_as, connect, delete_subtree, ou, person_attrs

PPOLICY_OID = "1.3.6.1.4.1.42.2.27.8.5.1"
PPOLICY_BASE = "ou=ppolicy," + SUFFIX
DEFAULT_POLICY = "cn=default," + PPOLICY_BASE

# The draft's error values.
PASSWORD_EXPIRED, ACCOUNT_LOCKED, CHANGE_AFTER_RESET, MOD_NOT_ALLOWED = 0, 1, 2, 3
MUST_SUPPLY_OLD, TOO_SHORT, TOO_YOUNG, IN_HISTORY, TOO_LONG = 4, 6, 7, 8, 9


class Area:
    def __init__(self, admin, base):
        self.admin = admin
        self.base = base

    def policy(self, name, **settings):
        dn = "cn=%s,%s" % (name, self.base)
        self.admin.add_s(dn, policy_attrs(name, settings))
        return dn

    def account(self, policy=None, password="Initial-pw-1"):
        uid = "pp" + uuid.uuid4().hex[:10]
        dn = "uid=%s,%s" % (uid, self.base)
        extra = {"pwdPolicySubentry": [policy.encode()]} if policy else None
        self.admin.add_s(dn, ldap.modlist.addModlist(
            person_attrs(uid, password=password, extra=extra)))
        return dn


def policy_attrs(name, settings):
    attrs = {"objectClass": [b"organizationalRole", b"pwdPolicy"], "cn": [name.encode()],
             "pwdAttribute": [b"userPassword"]}
    for k, v in settings.items():
        if isinstance(v, bool):
            v = "TRUE" if v else "FALSE"
        attrs[k] = [str(v).encode()]
    return ldap.modlist.addModlist(attrs)


@pytest.fixture
def area(admin_session):
    try:
        admin_session.add_s(PPOLICY_BASE, ou("ppolicy"))
    except ldap.ALREADY_EXISTS:
        pass
    tag = "a" + uuid.uuid4().hex[:10]
    base = "ou=%s,%s" % (tag, PPOLICY_BASE)
    admin_session.add_s(base, ou(tag))
    yield Area(admin_session, base)
    delete_subtree(admin_session, base)


def ppolicy_of(ctrls):
    """The password policy response control among `ctrls`, decoded."""
    found = [c for c in ctrls or [] if c.controlType == PPOLICY_OID]
    assert len(found) == 1, ctrls
    return found[0]


def bind_pp(dn, pw):
    """A simple bind with the password policy request control: (error or None, control)."""
    conn = connect()
    try:
        msgid = conn.simple_bind(dn, pw, serverctrls=[PasswordPolicyControl()])
        _, _, _, ctrls = conn.result3(msgid, resp_ctrl_classes={
            PPOLICY_OID: PasswordPolicyControl})
        return None, ppolicy_of(ctrls), conn
    except ldap.LDAPError as e:
        return e, ppolicy_of(e.args[0].get("ctrls") and decode_ctrls(e.args[0]["ctrls"])), conn


def decode_ctrls(raw):
    out = []
    for oid, crit, value in raw:
        if oid == PPOLICY_OID:
            c = PasswordPolicyControl(criticality=crit)
            c.decodeControlValue(value)
            out.append(c)
    return out


def modify_pp(conn, dn, mods):
    """A modify with the request control: (error or None, decoded response control or None)."""
    try:
        msgid = conn.modify_ext(dn, mods, serverctrls=[PasswordPolicyControl()])
        _, _, _, ctrls = conn.result3(msgid, resp_ctrl_classes={
            PPOLICY_OID: PasswordPolicyControl})
        found = [c for c in ctrls or [] if c.controlType == PPOLICY_OID]
        return None, (found[0] if found else None)
    except ldap.LDAPError as e:
        found = decode_ctrls(e.args[0].get("ctrls") or [])
        return e, (found[0] if found else None)


def get(conn, dn, attrs):
    r = conn.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", attrs)
    return {k.lower(): v for k, v in r[0][1].items()}


def test_the_control_is_in_supported_control(anon):
    r = anon.search_s("", ldap.SCOPE_BASE, "(objectClass=*)", ["supportedControl"])
    assert PPOLICY_OID.encode() in r[0][1]["supportedControl"]


def test_lockout_after_max_failures_with_account_locked(area, admin):
    pol = area.policy("lock", pwdMaxFailure=3, pwdLockout=True, pwdLockoutDuration=0)
    dn = area.account(pol)
    for i in range(3):
        err, ctrl, _ = bind_pp(dn, "wrong-%d" % i)
        assert isinstance(err, ldap.INVALID_CREDENTIALS)
        assert ctrl.error is None
    got = get(admin, dn, ["pwdFailureTime", "pwdAccountLockedTime"])
    assert len(got["pwdfailuretime"]) == 3
    assert re.match(rb"^\d{14}\.\d{6}Z$", got["pwdfailuretime"][0])
    assert re.match(rb"^\d{14}Z$", got["pwdaccountlockedtime"][0])
    # The right password no longer works: invalidCredentials, accountLocked.
    err, ctrl, _ = bind_pp(dn, "Initial-pw-1")
    assert isinstance(err, ldap.INVALID_CREDENTIALS)
    assert ctrl.error == ACCOUNT_LOCKED
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        bind_as(dn, "Initial-pw-1")
    # The administrator unlocks it; the failures go with the lock.
    admin.modify_s(dn, [(ldap.MOD_DELETE, "pwdAccountLockedTime", None)])
    assert "pwdfailuretime" not in get(admin, dn, ["pwdFailureTime"])
    err, ctrl, conn = bind_pp(dn, "Initial-pw-1")
    assert err is None and ctrl.error is None
    assert conn.whoami_s() == "dn:" + dn


def test_success_clears_failures_and_no_policy_records_none(area, admin):
    pol = area.policy("count", pwdMaxFailure=5, pwdLockout=True)
    dn = area.account(pol)
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        bind_as(dn, "wrong")
    assert len(get(admin, dn, ["pwdFailureTime"])["pwdfailuretime"]) == 1
    bind_as(dn, "Initial-pw-1").unbind_s()
    assert "pwdfailuretime" not in get(admin, dn, ["pwdFailureTime"])
    # Without a policy, failures are not recorded.
    plain = area.account()
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        bind_as(plain, "wrong")
    assert "pwdfailuretime" not in get(admin, plain, ["pwdFailureTime"])


def test_expiry_warning(area):
    pol = area.policy("warn", pwdMaxAge=100000, pwdExpireWarning=200000)
    dn = area.account(pol)
    err, ctrl, _ = bind_pp(dn, "Initial-pw-1")
    assert err is None
    assert ctrl.error is None and ctrl.graceAuthNsRemaining is None
    assert 99000 < ctrl.timeBeforeExpiration <= 100000


def test_grace_logins_then_expired(area, admin):
    pol = area.policy("grace", pwdMaxAge=1, pwdGraceAuthNLimit=2)
    dn = area.account(pol)
    changed = get(admin, dn, ["pwdChangedTime"])["pwdchangedtime"][0].decode()
    changed_at = time.mktime(time.strptime(changed, "%Y%m%d%H%M%SZ")) - time.timezone
    # Expired once more than pwdMaxAge whole seconds have passed since pwdChangedTime (a
    # condition on the clock, not on the order of events).
    for _ in range(100):
        if time.time() >= changed_at + 2.2:
            break
        time.sleep(0.1)
    err, ctrl, _ = bind_pp(dn, "Initial-pw-1")
    assert err is None and ctrl.graceAuthNsRemaining == 1
    err, ctrl, _ = bind_pp(dn, "Initial-pw-1")
    assert err is None and ctrl.graceAuthNsRemaining == 0
    assert len(get(admin, dn, ["pwdGraceUseTime"])["pwdgraceusetime"]) == 2
    err, ctrl, _ = bind_pp(dn, "Initial-pw-1")
    assert isinstance(err, ldap.INVALID_CREDENTIALS)
    assert ctrl.error == PASSWORD_EXPIRED


def test_quality_refuses_short_and_long_passwords(area):
    pol = area.policy("quality", pwdCheckQuality=1, pwdMinLength=8, pwdMaxLength=16)
    dn = area.account(pol)
    conn = bind_as(dn, "Initial-pw-1")
    err, ctrl = modify_pp(conn, dn, [(ldap.MOD_REPLACE, "userPassword", [b"short"])])
    assert isinstance(err, ldap.CONSTRAINT_VIOLATION)
    assert ctrl.error == TOO_SHORT
    assert "Password fails quality checking policy" in err.args[0].get("info", "")
    err, ctrl = modify_pp(conn, dn, [(ldap.MOD_REPLACE, "userPassword",
                                      [b"far-too-long-a-password"])])
    assert isinstance(err, ldap.CONSTRAINT_VIOLATION)
    assert ctrl.error == TOO_LONG
    err, ctrl = modify_pp(conn, dn, [(ldap.MOD_REPLACE, "userPassword", [b"Good-pw-22"])])
    assert err is None
    bind_as(dn, "Good-pw-22").unbind_s()


def test_history_refuses_reuse(area, admin):
    pol = area.policy("history", pwdInHistory=2)
    dn = area.account(pol)
    conn = bind_as(dn, "Initial-pw-1")
    conn.modify_s(dn, [(ldap.MOD_REPLACE, "userPassword", [b"Second-pw-2"])])
    hist = get(admin, dn, ["pwdHistory"])["pwdhistory"]
    assert len(hist) == 1
    assert re.match(rb"^\d{14}Z#1\.3\.6\.1\.4\.1\.1466\.115\.121\.1\.40#\d+#\{", hist[0])
    conn = bind_as(dn, "Second-pw-2")
    err, ctrl = modify_pp(conn, dn, [(ldap.MOD_REPLACE, "userPassword", [b"Initial-pw-1"])])
    assert isinstance(err, ldap.CONSTRAINT_VIOLATION)
    assert ctrl.error == IN_HISTORY
    assert "Password is in history of old passwords" in err.args[0].get("info", "")
    err, ctrl = modify_pp(conn, dn, [(ldap.MOD_REPLACE, "userPassword", [b"Second-pw-2"])])
    assert isinstance(err, ldap.CONSTRAINT_VIOLATION)
    assert ctrl.error == IN_HISTORY
    conn.modify_s(dn, [(ldap.MOD_REPLACE, "userPassword", [b"Third-pw-3"])])
    assert len(get(admin, dn, ["pwdHistory"])["pwdhistory"]) == 2


def test_min_age_refuses_a_young_password(area):
    pol = area.policy("young", pwdMinAge=3600)
    dn = area.account(pol)
    conn = bind_as(dn, "Initial-pw-1")
    err, ctrl = modify_pp(conn, dn, [(ldap.MOD_REPLACE, "userPassword", [b"Second-pw-2"])])
    assert isinstance(err, ldap.CONSTRAINT_VIOLATION)
    assert ctrl.error == TOO_YOUNG
    assert "Password is too young to change" in err.args[0].get("info", "")


def test_must_change_after_admin_reset(area, admin):
    pol = area.policy("reset", pwdMustChange=True)
    dn = area.account(pol)
    admin.modify_s(dn, [(ldap.MOD_REPLACE, "userPassword", [b"Reset-by-admin-1"])])
    assert get(admin, dn, ["pwdReset"])["pwdreset"] == [b"TRUE"]
    err, ctrl, conn = bind_pp(dn, "Reset-by-admin-1")
    assert err is None
    assert ctrl.error == CHANGE_AFTER_RESET
    # Anything but changing the password is refused until it is changed.
    with pytest.raises(ldap.INSUFFICIENT_ACCESS) as e:
        conn.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["cn"])
    assert "Operations are restricted" in e.value.args[0].get("info", "")
    err, ctrl = modify_pp(conn, dn, [(ldap.MOD_REPLACE, "description", [b"x"])])
    assert isinstance(err, ldap.INSUFFICIENT_ACCESS)
    assert ctrl.error == CHANGE_AFTER_RESET
    conn.modify_s(dn, [(ldap.MOD_REPLACE, "userPassword", [b"Chosen-by-me-2"])])
    assert conn.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", ["cn"])
    assert "pwdreset" not in get(admin, dn, ["pwdReset"])


def test_safe_modify_needs_the_old_password(area):
    pol = area.policy("safe", pwdSafeModify=True)
    dn = area.account(pol)
    conn = bind_as(dn, "Initial-pw-1")
    err, ctrl = modify_pp(conn, dn, [(ldap.MOD_REPLACE, "userPassword", [b"Second-pw-2"])])
    assert isinstance(err, ldap.INSUFFICIENT_ACCESS)
    assert ctrl.error == MUST_SUPPLY_OLD
    err, ctrl = modify_pp(conn, dn, [(ldap.MOD_DELETE, "userPassword", [b"not-the-old-one"]),
                                     (ldap.MOD_ADD, "userPassword", [b"Second-pw-2"])])
    assert isinstance(err, ldap.UNWILLING_TO_PERFORM)
    assert ctrl.error == MUST_SUPPLY_OLD
    conn.modify_s(dn, [(ldap.MOD_DELETE, "userPassword", [b"Initial-pw-1"]),
                       (ldap.MOD_ADD, "userPassword", [b"Second-pw-2"])])
    bind_as(dn, "Second-pw-2").unbind_s()
    with pytest.raises(ldap.INVALID_CREDENTIALS):
        bind_as(dn, "Initial-pw-1")


def test_password_modify_under_safe_modify(area):
    pol = area.policy("safe-exop", pwdSafeModify=True)
    dn = area.account(pol)
    conn = bind_as(dn, "Initial-pw-1")
    msgid = conn.passwd(dn, None, "Second-pw-2", serverctrls=[PasswordPolicyControl()])
    with pytest.raises(ldap.INSUFFICIENT_ACCESS) as e:
        conn.result3(msgid)
    ctrls = decode_ctrls(e.value.args[0].get("ctrls") or [])
    assert ctrls and ctrls[0].error == MUST_SUPPLY_OLD
    conn.passwd_s(dn, "Initial-pw-1", "Second-pw-2")
    bind_as(dn, "Second-pw-2").unbind_s()


def test_user_change_not_allowed(area, admin):
    pol = area.policy("nochange", pwdAllowUserChange=False)
    dn = area.account(pol)
    conn = bind_as(dn, "Initial-pw-1")
    err, ctrl = modify_pp(conn, dn, [(ldap.MOD_REPLACE, "userPassword", [b"Second-pw-2"])])
    assert isinstance(err, ldap.INSUFFICIENT_ACCESS)
    assert ctrl.error == MOD_NOT_ALLOWED
    # The administrator still may.
    admin.modify_s(dn, [(ldap.MOD_REPLACE, "userPassword", [b"Second-pw-2"])])


def test_pwd_changed_time_after_a_change(area, admin):
    dn = area.account()
    assert "pwdchangedtime" not in get(admin, dn, ["pwdChangedTime"])
    conn = bind_as(dn, "Initial-pw-1")
    conn.modify_s(dn, [(ldap.MOD_REPLACE, "userPassword", [b"Second-pw-2"])])
    got = get(admin, dn, ["pwdChangedTime"])["pwdchangedtime"][0]
    assert re.match(rb"^\d{14}Z$", got)
    assert abs(time.mktime(time.strptime(got.decode(), "%Y%m%d%H%M%SZ")) - time.timezone
               - time.time()) < 120


def test_default_policy_applies_without_subentry(area, admin):
    admin.add_s(DEFAULT_POLICY, policy_attrs("default", {"pwdMinAge": 3600}))
    try:
        dn = area.account()
        assert "pwdchangedtime" in get(admin, dn, ["pwdChangedTime"])
        conn = bind_as(dn, "Initial-pw-1")
        err, ctrl = modify_pp(conn, dn, [(ldap.MOD_REPLACE, "userPassword", [b"Second-pw-2"])])
        assert isinstance(err, ldap.CONSTRAINT_VIOLATION)
        assert ctrl.error == TOO_YOUNG
    finally:
        admin.delete_s(DEFAULT_POLICY)


def test_one_password_value_only(area, admin):
    dn = area.account()
    conn = bind_as(dn, "Initial-pw-1")
    with pytest.raises(ldap.CONSTRAINT_VIOLATION) as e:
        conn.modify_s(dn, [(ldap.MOD_REPLACE, "userPassword", [b"One-pw-111", b"Two-pw-222"])])
    assert "only allows one password value" in e.value.args[0].get("info", "")


def test_add_checks_quality_for_users_and_one_value_for_all(area, admin, alice):
    pol = area.policy("addq", pwdCheckQuality=2, pwdMinLength=8)
    uid = "pp" + uuid.uuid4().hex[:10]
    dn = "uid=%s,%s" % (uid, area.base)
    attrs = person_attrs(uid, password="short", extra={"pwdPolicySubentry": [pol.encode()]})
    # The policy answers before access control does (slapd's overlay runs first).
    msgid = alice.add_ext(dn, ldap.modlist.addModlist(attrs),
                          serverctrls=[PasswordPolicyControl()])
    with pytest.raises(ldap.CONSTRAINT_VIOLATION) as e:
        alice.result3(msgid)
    ctrls = decode_ctrls(e.value.args[0].get("ctrls") or [])
    assert ctrls and ctrls[0].error == TOO_SHORT
    attrs["userPassword"] = [b"First-pw-111", b"Second-pw-222"]
    with pytest.raises(ldap.CONSTRAINT_VIOLATION):
        admin.add_s(dn, ldap.modlist.addModlist(attrs))
    # The administrator's short password is not checked.
    attrs["userPassword"] = [b"short"]
    admin.add_s(dn, ldap.modlist.addModlist(attrs))
