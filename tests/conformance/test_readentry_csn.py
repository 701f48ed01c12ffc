"""The pre-read and post-read controls (RFC 4527), as python-ldap's ldap.controls.readentry
sends and decodes them, and the entryCSN stamp in OpenLDAP's form; checked against slapd 2.5."""
import re

import ldap
import ldap.modlist
import pytest
from ldap.controls.readentry import PostReadControl, PreReadControl

from conftest import ADMIN_DN, bind_as, norm_dn, person_attrs
from helpers import ci, get_entry

# YYYYmmddHHMMSS.ffffffZ#count#sid#mod, all hex but the time (OpenLDAP's CSN form).
CSN = re.compile(r"^\d{14}\.\d{6}Z#[0-9a-f]{6}#[0-9a-f]{3}#000000$")


def read_controls(rctls):
    """{controlType: decoded control} of a result's response controls."""
    return {c.controlType: c for c in rctls}


def pre_of(rctls):
    ctl = read_controls(rctls).get(PreReadControl.controlType)
    assert ctl is not None, "the result carries a pre-read control"
    return ctl


def post_of(rctls):
    ctl = read_controls(rctls).get(PostReadControl.controlType)
    assert ctl is not None, "the result carries a post-read control"
    return ctl


def modify(conn, dn, mods, ctrls):
    _, _, _, rctls = conn.result3(conn.modify_ext(dn, mods, serverctrls=ctrls))
    return rctls


@pytest.fixture
def scratch(tree, admin_session):
    """A fresh person under ou=scratch (no password); deleted afterwards if still there."""
    uid = tree.unique("r")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    admin_session.add_s(dn, ldap.modlist.addModlist(person_attrs(uid)))
    state = {"dn": dn}
    yield dn, uid, state
    try:
        admin_session.delete_s(state["dn"])
    except ldap.NO_SUCH_OBJECT:
        pass


# ---- pre-read -------------------------------------------------------------------------------


def test_preread_on_modify_returns_the_entry_before(admin, scratch):
    dn, uid, _ = scratch
    rctls = modify(admin, dn, [(ldap.MOD_REPLACE, "sn", [b"After"])],
                   [PreReadControl(True, ["sn", "cn"])])
    pre = pre_of(rctls)
    assert norm_dn(pre.dn) == norm_dn(dn)
    e = ci(pre.entry)
    assert e == {"sn": ["Tester"], "cn": ["%s Tester" % uid]}
    assert get_entry(admin, dn, ["sn"])["sn"] == ["After"]


def test_preread_on_delete_returns_the_deleted_entry(admin, scratch):
    dn, uid, _ = scratch
    _, _, _, rctls = admin.result3(admin.delete_ext(dn, serverctrls=[PreReadControl(True, ["*"])]))
    pre = pre_of(rctls)
    assert norm_dn(pre.dn) == norm_dn(dn)
    e = ci(pre.entry)
    assert e["uid"] == [uid]
    assert e["mail"] == ["%s@example.com" % uid]
    assert "entrycsn" not in e, "'*' selects no operational attribute"
    with pytest.raises(ldap.NO_SUCH_OBJECT):
        get_entry(admin, dn)


def test_preread_on_modrdn_returns_the_old_name(admin, tree, scratch):
    dn, uid, state = scratch
    new = tree.unique("n")
    _, _, _, rctls = admin.result3(admin.rename(dn, "uid=" + new, delold=1,
                                                serverctrls=[PreReadControl(True, ["uid"])]))
    state["dn"] = "uid=%s,%s" % (new, tree.scratch)
    pre = pre_of(rctls)
    assert norm_dn(pre.dn) == norm_dn(dn)
    assert ci(pre.entry) == {"uid": [uid]}


def test_preread_on_add_non_critical_is_ignored(admin, tree):
    uid = tree.unique("a")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    _, _, _, rctls = admin.result3(admin.add_ext(
        dn, ldap.modlist.addModlist(person_attrs(uid)), serverctrls=[PreReadControl(False, ["*"])]))
    try:
        assert PreReadControl.controlType not in read_controls(rctls)
        assert get_entry(admin, dn, ["uid"])["uid"] == [uid]
    finally:
        admin.delete_s(dn)


def test_preread_on_add_critical_is_unavailable_critical_extension(admin, tree):
    uid = tree.unique("a")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    with pytest.raises(ldap.UNAVAILABLE_CRITICAL_EXTENSION):
        admin.add_ext_s(dn, ldap.modlist.addModlist(person_attrs(uid)),
                        serverctrls=[PreReadControl(True, ["*"])])
    with pytest.raises(ldap.NO_SUCH_OBJECT):
        get_entry(admin, dn)


# ---- post-read ------------------------------------------------------------------------------


def test_postread_on_add_returns_the_new_entry(admin, tree):
    uid = tree.unique("a")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    _, _, _, rctls = admin.result3(admin.add_ext(
        dn, ldap.modlist.addModlist(person_attrs(uid)),
        serverctrls=[PostReadControl(True, ["uid", "mail", "entryCSN", "creatorsName",
                                            "createTimestamp"])]))
    try:
        post = post_of(rctls)
        assert norm_dn(post.dn) == norm_dn(dn)
        e = ci(post.entry)
        assert e["uid"] == [uid]
        assert e["mail"] == ["%s@example.com" % uid]
        assert norm_dn(e["creatorsname"][0]) == norm_dn(ADMIN_DN)
        assert CSN.match(e["entrycsn"][0]), e["entrycsn"]
        stored = get_entry(admin, dn, ["entryCSN", "createTimestamp"])
        assert stored["entrycsn"] == e["entrycsn"]
        assert stored["createtimestamp"] == e["createtimestamp"]
    finally:
        admin.delete_s(dn)


def test_postread_on_modify_user_and_operational(admin, scratch):
    dn, uid, _ = scratch
    rctls = modify(admin, dn, [(ldap.MOD_REPLACE, "description", [b"changed"])],
                   [PostReadControl(True, ["*", "+"])])
    e = ci(post_of(rctls).entry)
    assert e["description"] == ["changed"]
    assert e["uid"] == [uid]
    for op_attr in ("entrycsn", "modifytimestamp", "modifiersname", "createtimestamp",
                    "entryuuid"):
        assert op_attr in e, op_attr
    assert norm_dn(e["modifiersname"][0]) == norm_dn(ADMIN_DN)
    stored = get_entry(admin, dn, ["entryCSN", "modifyTimestamp"])
    assert stored["entrycsn"] == e["entrycsn"]
    assert stored["modifytimestamp"] == e["modifytimestamp"]


def test_pre_and_post_read_show_the_csn_the_change_set(admin, scratch):
    dn, _, _ = scratch
    before = get_entry(admin, dn, ["entryCSN"])["entrycsn"]
    rctls = modify(admin, dn, [(ldap.MOD_ADD, "description", [b"one"])],
                   [PreReadControl(True, ["entryCSN", "description"]),
                    PostReadControl(True, ["entryCSN", "description"])])
    pre, post = ci(pre_of(rctls).entry), ci(post_of(rctls).entry)
    assert pre["entrycsn"] == before
    assert "description" not in pre
    assert post["description"] == ["one"]
    assert post["entrycsn"] != pre["entrycsn"]
    assert post["entrycsn"][0] > pre["entrycsn"][0]


def test_postread_on_modrdn_returns_the_new_name(admin, tree, scratch):
    dn, uid, state = scratch
    new = tree.unique("n")
    _, _, _, rctls = admin.result3(admin.rename(dn, "uid=" + new, delold=0,
                                                serverctrls=[PostReadControl(True, ["uid"])]))
    state["dn"] = "uid=%s,%s" % (new, tree.scratch)
    post = post_of(rctls)
    assert norm_dn(post.dn) == norm_dn(state["dn"])
    assert sorted(ci(post.entry)["uid"]) == sorted([uid, new])



def test_read_entry_plus_has_the_computed_attributes(admin, tree, scratch):
    """'+' brings the computed operational attributes too, as in a search: entryDN (the name
    before, resp. after, a rename), hasSubordinates and subschemaSubentry."""
    dn, _, state = scratch
    new = tree.unique("n")
    _, _, _, rctls = admin.result3(admin.rename(
        dn, "uid=" + new, delold=1,
        serverctrls=[PreReadControl(True, ["+"]), PostReadControl(True, ["+"])]))
    state["dn"] = "uid=%s,%s" % (new, tree.scratch)
    pre, post = ci(pre_of(rctls).entry), ci(post_of(rctls).entry)
    assert norm_dn(pre["entrydn"][0]) == norm_dn(dn)
    assert norm_dn(post["entrydn"][0]) == norm_dn(state["dn"])
    for e in (pre, post):
        assert e["hassubordinates"] == ["FALSE"]
        assert norm_dn(e["subschemasubentry"][0]) == "cn=subschema"
    stored = get_entry(admin, state["dn"], ["+"])
    assert set(post) == set(stored)


def test_read_entry_of_an_entry_with_children(admin, tree):
    rctls = modify(admin, tree.people, [(ldap.MOD_REPLACE, "description", [b"people"])],
                   [PostReadControl(True, ["hasSubordinates", "entryDN"])])
    e = ci(post_of(rctls).entry)
    assert e["hassubordinates"] == ["TRUE"]
    assert norm_dn(e["entrydn"][0]) == norm_dn(tree.people)


@pytest.mark.parametrize("ctl", [PreReadControl, PostReadControl])
@pytest.mark.parametrize("name", ["noSuchAttribute", "1.2.3.4", "bad attr!"])
def test_critical_read_entry_with_undefined_type_refuses_the_change(admin, scratch, ctl, name):
    dn, _, _ = scratch
    with pytest.raises(ldap.UNDEFINED_TYPE):
        modify(admin, dn, [(ldap.MOD_REPLACE, "sn", [b"Refused"])], [ctl(True, ["sn", name])])
    assert get_entry(admin, dn, ["sn"])["sn"] == ["Tester"]


@pytest.mark.parametrize("ctl", [PreReadControl, PostReadControl])
def test_non_critical_read_entry_ignores_undefined_types(admin, scratch, ctl):
    dn, _, _ = scratch
    rctls = modify(admin, dn, [(ldap.MOD_REPLACE, "sn", [b"Kept"])],
                   [ctl(False, ["noSuchAttribute", "sn"])])
    e = ci(read_controls(rctls)[ctl.controlType].entry)
    assert set(e) == {"sn"}
    assert get_entry(admin, dn, ["sn"])["sn"] == ["Kept"]


def test_critical_read_entry_accepts_special_names_and_options(admin, scratch):
    dn, uid, _ = scratch
    rctls = modify(admin, dn, [(ldap.MOD_REPLACE, "sn", [b"Special"])],
                   [PostReadControl(True, ["1.1", "uid", "cn;lang-en"])])
    assert ci(post_of(rctls).entry) == {"uid": [uid]}


def test_read_entry_on_a_failed_change_is_not_returned(admin, tree):
    dn = "uid=%s,%s" % (tree.unique("x"), tree.scratch)
    with pytest.raises(ldap.NO_SUCH_OBJECT) as exc:
        modify(admin, dn, [(ldap.MOD_REPLACE, "sn", [b"x"])],
               [PreReadControl(True, ["sn"]), PostReadControl(True, ["sn"])])
    assert not exc.value.args[0].get("ctrls")


def test_read_entry_repeated_is_protocol_error(admin, scratch):
    dn, _, _ = scratch
    with pytest.raises(ldap.PROTOCOL_ERROR):
        modify(admin, dn, [(ldap.MOD_REPLACE, "sn", [b"Twice"])],
               [PostReadControl(True, ["sn"]), PostReadControl(True, ["cn"])])
    assert get_entry(admin, dn, ["sn"])["sn"] == ["Tester"]


@pytest.mark.parametrize("ctl", [PreReadControl, PostReadControl])
def test_critical_read_entry_on_password_modify_is_unavailable(admin, scratch_person, ctl):
    dn, _, _ = scratch_person
    with pytest.raises(ldap.UNAVAILABLE_CRITICAL_EXTENSION):
        admin.passwd_s(dn, None, "Other-pw-1", serverctrls=[ctl(True, ["sn"])])
    bind_as(dn, "Init-pw-1").unbind_s()

def test_read_entry_without_attributes_returns_user_attributes(admin, scratch):
    """An empty attribute list means all user attributes, as in a search."""
    dn, uid, _ = scratch
    rctls = modify(admin, dn, [(ldap.MOD_REPLACE, "sn", [b"Empty"])], [PostReadControl(True, [])])
    e = ci(post_of(rctls).entry)
    assert e["sn"] == ["Empty"]
    assert e["uid"] == [uid]
    assert "entrycsn" not in e


def test_read_entry_as_the_entry_owner_hides_user_password(tree, admin_session):
    """A user changing their own password (the one write the policy allows them) gets the
    entry back with what they may read: never userPassword."""
    uid = tree.unique("o")
    dn = "uid=%s,%s" % (uid, tree.scratch)
    admin_session.add_s(dn, ldap.modlist.addModlist(person_attrs(uid, password="Own-pw-1")))
    try:
        conn = bind_as(dn, "Own-pw-1")
        try:
            rctls = modify(conn, dn, [(ldap.MOD_REPLACE, "userPassword", [b"Own-pw-2"])],
                           [PreReadControl(True, ["*", "userPassword", "entryCSN"]),
                            PostReadControl(True, ["*", "userPassword", "modifiersName"])])
            pre, post = ci(pre_of(rctls).entry), ci(post_of(rctls).entry)
        finally:
            conn.unbind_s()
        assert pre["uid"] == [uid] and post["uid"] == [uid]
        assert "userpassword" not in pre
        assert "userpassword" not in post
        assert CSN.match(pre["entrycsn"][0])
        assert norm_dn(post["modifiersname"][0]) == norm_dn(dn)
        bind_as(dn, "Own-pw-2").unbind_s()
    finally:
        admin_session.delete_s(dn)


def test_read_entry_as_admin_shows_user_password(admin, tree, scratch_person):
    dn, _, _ = scratch_person
    rctls = modify(admin, dn, [(ldap.MOD_REPLACE, "description", [b"x"])],
                   [PostReadControl(True, ["userPassword"])])
    e = ci(post_of(rctls).entry)
    assert e["userpassword"][0].startswith("{")


# ---- entryCSN ------------------------------------------------------------------------------


def test_entry_csn_on_added_and_modified_entries(admin, scratch):
    dn, _, _ = scratch
    first = get_entry(admin, dn, ["entryCSN"])["entrycsn"]
    assert len(first) == 1 and CSN.match(first[0]), first
    admin.modify_s(dn, [(ldap.MOD_REPLACE, "description", [b"1"])])
    second = get_entry(admin, dn, ["entryCSN"])["entrycsn"]
    admin.modify_s(dn, [(ldap.MOD_REPLACE, "description", [b"2"])])
    third = get_entry(admin, dn, ["entryCSN"])["entrycsn"]
    for c in (second, third):
        assert len(c) == 1 and CSN.match(c[0]), c
    assert first[0] < second[0] < third[0]


def test_entry_csn_is_operational(admin, scratch):
    dn, _, _ = scratch
    assert "entrycsn" not in get_entry(admin, dn)
    assert "entrycsn" in get_entry(admin, dn, ["+"])
