#!/usr/bin/env python3
"""The web console in a real browser: Debian's headless Chromium driven by selenium against a
`linden serve` on loopback (console over plain HTTP on 127.0.0.1).

A user logs in, browses to their entry, edits an attribute (checked over LDAP), is refused an
edit the access rules forbid (the message shown); the administrator creates a person from the
template, adds them to a group (memberOf checked), resets their password (the new one binds),
searches with a filter and pages the results, reads the audit page, and watches the dashboard's
operations and latency charts move while a bounded `linden bench` runs; the tree expands a node in
place; CSRF and session-fixation attempts are refused.

Usage: browser_test.py [--linden target/debug/linden] [--screenshots DIR]
Prints "N passed, M failed" last; exits non-zero on a failure.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import ldap
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ADMIN_DN = "cn=admin,dc=example,dc=com"
ADMIN_PW = "secret"
ALICE = "uid=alice,ou=people,dc=example,dc=com"
GROUP = "cn=staff,ou=groups,dc=example,dc=com"
DEADLINE = 20  # seconds any one wait may take

CONFIG = """
suffix = ["dc=example,dc=com"]
admin_password = "secret"
memberof = true
[[access]]
attrs = ["userPassword"]
by = [ { who = "self", rights = ["write", "auth"] }, { who = "anonymous", rights = ["auth"] } ]
[[access]]
attrs = ["telephoneNumber", "description"]
by = [ { who = "self", rights = ["read", "search", "compare", "write"] }, { who = "*", rights = ["read", "search", "compare"] } ]
[[access]]
by = [ { who = "*", rights = ["read", "search", "compare"] } ]
"""

results = []


def check(name, cond, detail=""):
    results.append((name, bool(cond)))
    print(("ok     " if cond else "FAILED ") + name + ("" if cond else ": " + str(detail)[:400]), flush=True)
    return cond


def start_server(linden, tmp):
    conf = os.path.join(tmp, "linden.toml")
    with open(conf, "w") as f:
        f.write('audit_log = "%s"\n' % os.path.join(tmp, "audit.log"))
        f.write(CONFIG)
    proc = subprocess.Popen(
        [linden, "serve", "--config", conf, "--data", os.path.join(tmp, "data"),
         "--listen", "127.0.0.1:0", "--console-listen", "127.0.0.1:0", "--console-plain-http"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    ldap_url = console = None
    deadline = time.time() + 60
    lines = []
    while (ldap_url is None or console is None) and time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"listening on (\S+?),", line)
        if m:
            ldap_url = "ldap://" + m.group(1)
        m = re.search(r"serving the web console on (http://\S+?)/?$", line.strip())
        if m:
            console = m.group(1).rstrip("/")
    if ldap_url is None or console is None:
        proc.kill()
        sys.exit("linden serve did not start:\n" + "".join(lines))
    # Keep draining stderr so the server never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, ldap_url, console


def admin_conn(url):
    c = ldap.initialize(url)
    c.simple_bind_s(ADMIN_DN, ADMIN_PW)
    return c


def populate(url):
    c = admin_conn(url)
    for ou in ("people", "groups", "items"):
        c.add_s(f"ou={ou},dc=example,dc=com", [("objectClass", [b"organizationalUnit"]), ("ou", [ou.encode()])])
    for uid, cn, sn in (("alice", "Alice Liddell", "Liddell"), ("bob", "Bob Builder", "Builder")):
        c.add_s(f"uid={uid},ou=people,dc=example,dc=com", [
            ("objectClass", [b"inetOrgPerson"]), ("uid", [uid.encode()]), ("cn", [cn.encode()]),
            ("sn", [sn.encode()]), ("userPassword", [f"{uid}-pw".encode()])])
    c.add_s(GROUP, [("objectClass", [b"groupOfNames"]), ("cn", [b"staff"]),
                    ("member", [f"uid=bob,ou=people,dc=example,dc=com".encode()])])
    for i in range(130):
        c.add_s(f"cn=item {i:03},ou=items,dc=example,dc=com",
                [("objectClass", [b"organizationalRole"]), ("cn", [f"item {i:03}".encode()])])
    c.unbind_s()


def values(url, dn, attr):
    c = admin_conn(url)
    try:
        r = c.search_s(dn, ldap.SCOPE_BASE, "(objectClass=*)", [attr])
    except ldap.NO_SUCH_OBJECT:
        return []
    finally:
        c.unbind_s()
    return sorted(v.decode() for v in (r[0][1].get(attr, []) if r else []))


def binds(url, dn, pw):
    c = ldap.initialize(url)
    try:
        c.simple_bind_s(dn, pw)
        return True
    except ldap.INVALID_CREDENTIALS:
        return False
    finally:
        c.unbind_s()


def browser():
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run",
              "--disable-dev-shm-usage", "--window-size=1280,900",
              "--user-data-dir=" + tempfile.mkdtemp(prefix="linden-chromium-")):
        opts.add_argument(a)
    for path in ("/usr/bin/chromium", "/usr/lib/chromium/chromium"):
        if os.path.exists(path):
            opts.binary_location = path
            break
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    d = webdriver.Chrome(service=Service(driver_path), options=opts)
    d.set_page_load_timeout(DEADLINE)
    return d


def wait(d, cond, what):
    try:
        return WebDriverWait(d, DEADLINE, poll_frequency=0.1).until(lambda _: cond())
    except Exception as e:  # selenium's TimeoutException, a stale element…
        check("waiting for " + what, False, e)
        raise


def login(d, console, user, pw):
    d.get(console + "/login")
    d.find_element(By.ID, "user").send_keys(user)
    d.find_element(By.ID, "password").send_keys(pw)
    d.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    wait(d, lambda: "/login" not in d.current_url or d.find_elements(By.ID, "login-error"), "the login")


def logout(d):
    d.find_element(By.CSS_SELECTOR, "form.logout button").click()
    wait(d, lambda: "/login" in d.current_url, "the logout")


def shot(d, shots, name):
    if shots:
        d.save_screenshot(os.path.join(shots, name + ".png"))


def field_value(d, attr):
    return d.find_element(By.NAME, "a." + attr)


def run(linden, shots):
    tmp = tempfile.mkdtemp(prefix="linden-console-")
    proc, url, console = start_server(linden, tmp)
    d = None
    try:
        populate(url)
        d = browser()
        q = urllib.parse.quote

        # Session fixation: an id planted before the login is not the one the login gives.
        d.get(console + "/login")
        d.add_cookie({"name": "linden_session", "value": "0123456789abcdef0123456789abcdef", "path": "/"})
        shot(d, shots, "login")
        login(d, console, "alice", "alice-pw")
        sid = d.get_cookie("linden_session")
        check("a login by user id lands on the console", "/tree" in d.current_url, d.current_url)
        check("the login gives a new session id (fixation refused)",
              sid and sid["value"] != "0123456789abcdef0123456789abcdef" and sid.get("httpOnly"), sid)

        # The tree expands in place: a disclosure button per entry with children (a button, so
        # the keyboard reaches it), aria-expanded, the children loaded by pages with "more…".
        d.get(console + "/tree?dn=" + q("dc=example,dc=com"))
        items = wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "button.disclosure[aria-label*='ou=items']"),
                     "the disclosure button of ou=items")[0]
        check("a node's disclosure starts closed", items.get_attribute("aria-expanded") == "false")
        items.send_keys(" ")  # the keyboard: Space on the focused button
        shown = lambda: d.find_elements(By.XPATH, "//ul[@aria-label='Children of ou=items']/li/a[starts-with(text(), 'cn=item')]")
        wait(d, lambda: len(shown()) == 100, "the first 100 children in place")
        check("expanding a node shows its children in place", items.get_attribute("aria-expanded") == "true"
              and "/tree?dn=" + q("dc=example,dc=com") in d.current_url, d.current_url)
        d.execute_script("window.scrollTo(0, 0)")
        shot(d, shots, "tree-expanded")
        d.find_element(By.CSS_SELECTOR, "button.more").click()
        wait(d, lambda: len(shown()) == 130, "the next page of children after more…")
        check("more… adds the next page of children (100, then 130)", len(shown()) == 130, len(shown()))
        items.click()
        check("a second press closes the node", items.get_attribute("aria-expanded") == "false"
              and not shown()[0].is_displayed())

        # Browse by the links (as without the script): the tree, down to alice's entry.
        d.get(console + "/tree")
        d.find_element(By.LINK_TEXT, "dc=example,dc=com").click()
        d.find_element(By.LINK_TEXT, "children").click()  # ou=groups, ou=items or ou=people
        d.get(console + "/tree?dn=" + q("ou=people,dc=example,dc=com"))
        shot(d, shots, "tree")
        d.find_element(By.LINK_TEXT, "uid=alice").click()
        check("browsing reaches the entry", "Alice Liddell" in d.page_source and "/entry?dn=" in d.current_url)
        shot(d, shots, "entry")

        # Edit an attribute the rules let alice write.
        d.find_element(By.LINK_TEXT, "Edit").click()
        d.find_element(By.TAG_NAME, "summary").click()
        tel = field_value(d, "telephoneNumber")
        tel.clear()
        tel.send_keys("+1 555 0100")
        d.find_element(By.XPATH, "//button[text()='Save']").click()
        wait(d, lambda: "/entry?dn=" in d.current_url, "the saved entry")
        check("an allowed edit is applied (seen over LDAP)", values(url, ALICE, "telephoneNumber") == ["+1 555 0100"],
              values(url, ALICE, "telephoneNumber"))

        # An edit the rules forbid: the server's message beside the form, nothing changed.
        d.get(console + "/edit?dn=" + q(ALICE))
        cn = field_value(d, "cn")
        cn.clear()
        cn.send_keys("Alice L.")
        shot(d, shots, "edit")
        d.find_element(By.XPATH, "//button[text()='Save']").click()
        err = wait(d, lambda: d.find_elements(By.ID, "form-error"), "the refusal")
        check("a forbidden edit shows the server's refusal",
              "InsufficientAccessRights (50)" in err[0].text, err[0].text)
        shot(d, shots, "edit-refused")
        check("the forbidden edit changed nothing", values(url, ALICE, "cn") == ["Alice Liddell"])

        # CSRF: a change without the session's token is refused, even from the console's origin.
        status = d.execute_script(
            "return fetch('/edit', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},"
            " body: 'dn=' + encodeURIComponent(arguments[0]) + '&a.description=csrf'}).then(r => r.status);", ALICE)
        check("a change without the CSRF token is refused", status == 403 and values(url, ALICE, "description") == [],
              status)
        logout(d)

        # The administrator: a person from the template.
        login(d, console, ADMIN_DN, ADMIN_PW)
        d.get(console + "/create?template=person&parent=" + q("ou=people,dc=example,dc=com"))
        for attr, v in (("uid", "carol"), ("cn", "Carol Chen"), ("sn", "Chen"), ("mail", "carol@example.com"),
                        ("userPassword", "carol-pw")):
            field_value(d, attr).send_keys(v)
        shot(d, shots, "create-person")
        d.find_element(By.XPATH, "//button[text()='Create']").click()
        carol = "uid=carol,ou=people,dc=example,dc=com"
        wait(d, lambda: "/entry?dn=" in d.current_url, "the new entry")
        check("a person created from the template binds", binds(url, carol, "carol-pw"))

        # Add carol to the group with the picker; memberOf follows.
        d.get(console + "/group?dn=" + q(GROUP))
        d.find_element(By.ID, "find").send_keys("chen")
        d.find_element(By.XPATH, "//button[text()='Find']").click()
        add = wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#picked button"), "the picker")
        shot(d, shots, "group-picker")
        add[0].click()
        wait(d, lambda: "uid=carol" in d.find_element(By.ID, "members").text, "the new member")
        check("the picker adds the member (memberOf set)", values(url, carol, "memberOf") == [GROUP],
              values(url, carol, "memberOf"))
        d.get(console + "/groups?member=" + q(carol))
        check("the person's groups show memberOf", "cn=staff" in d.find_element(By.ID, "member-of").text)

        # Reset carol's password.
        d.get(console + "/password?dn=" + q(carol))
        d.find_element(By.ID, "new").send_keys("carol-new-pw")
        d.find_element(By.ID, "confirm").send_keys("carol-new-pw")
        d.find_element(By.XPATH, "//button[text()='Set the password']").click()
        wait(d, lambda: d.find_elements(By.ID, "form-ok") or d.find_elements(By.ID, "form-error"), "the reset")
        shot(d, shots, "password")
        check("a reset password binds, the old one does not",
              binds(url, carol, "carol-new-pw") and not binds(url, carol, "carol-pw"))

        # Search with the builder and page the results.
        d.get(console + "/search")
        base = d.find_element(By.ID, "base")
        base.send_keys("ou=items,dc=example,dc=com")
        d.find_element(By.ID, "a0").send_keys("cn")
        d.find_element(By.CSS_SELECTOR, "#m0 option[value=starts]").click()
        d.find_element(By.ID, "v0").send_keys("item")
        d.find_element(By.ID, "attrs").send_keys("cn")
        d.find_element(By.XPATH, "//button[text()='Search']").click()
        wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "table.results tbody tr"), "the results")
        first = len(d.find_elements(By.CSS_SELECTOR, "table.results tbody tr"))
        shot(d, shots, "search")
        d.find_element(By.ID, "next-page").click()
        wait(d, lambda: "page=" in d.current_url, "the next page")
        second = len(d.find_elements(By.CSS_SELECTOR, "table.results tbody tr"))
        check("a filtered search pages its results (100, then 30)", (first, second) == (100, 30), (first, second))

        # The audit page: the administrator sees the changes just made, newest first.
        d.get(console + "/audit")
        wait(d, lambda: "uid=carol" in d.find_element(By.ID, "audit-records").text or d.refresh(),
             "carol's changes in the audit page")
        check("the audit page shows the latest changes", "changetype: modify" in d.find_element(By.ID, "audit-records").text)
        shot(d, shots, "audit")

        # The dashboard's charts move while `linden bench` runs, bounded (500 compares a second
        # for 8 s): compares, which nothing did before, so a new latency series appears.
        d.get(console + "/dashboard")
        wait(d, lambda: int(d.find_element(By.ID, "dashboard").get_attribute("data-updates") or 0) >= 2,
             "two dashboard updates")
        latency_before = d.find_element(By.ID, "legend-latency").text
        check("no compare latency before the load", "Compare" not in latency_before, latency_before)
        bench = subprocess.Popen(
            [linden, "bench", "compare", "--url", url, "--bind-dn", ADMIN_DN, "--password", ADMIN_PW,
             "--dn", ALICE, "--compare-attr", "cn", "--compare-value", "Alice Liddell",
             "--connections", "2", "--rate", "500", "--duration", "8", "--warmup", "0", "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            moved = wait(d, lambda: float(d.find_element(By.ID, "ops-total-rate").text.replace("–", "0") or 0) > 10,
                         "operations per second above 10")
            check("the operations chart shows the load", moved)
            lat = wait(d, lambda: "Compare p99" in d.find_element(By.ID, "legend-latency").text
                       and d.find_element(By.ID, "legend-latency").text, "the compare latency in the chart")
            check("the latency chart shows the load's operations (p50 and p99)",
                  "Compare p50" in lat and d.find_elements(By.CSS_SELECTOR, "#chart-latency polyline"), lat)
            shot(d, shots, "dashboard")
        finally:
            try:
                out, _ = bench.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                bench.kill()
                out, _ = bench.communicate()
        check("linden bench ran its bounded load", bench.returncode == 0, out)
    finally:
        if d is not None:
            d.quit()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--linden", default=os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "linden"))
    ap.add_argument("--screenshots", default=None)
    a = ap.parse_args()
    shots = a.screenshots or tempfile.mkdtemp(prefix="linden-console-shots-")
    os.makedirs(shots, exist_ok=True)
    try:
        run(os.path.abspath(a.linden), shots)
    except Exception as e:  # a failed wait is already counted
        if not results or results[-1][1]:
            check("the scenario ran to its end", False, repr(e))
    print("screenshots in " + shots)
    passed = sum(1 for _, ok in results if ok)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
