//! Debian's slapd for the tests opted in with `LINDEN_TEST_SLAPD=1` (syncrepl_slapd.rs,
//! partitions.rs): the opt-in, with its check that slapd and the modules a test needs are there
//! (opted in, a missing one is a failure), and a slapd process started from a configuration
//! file, waited for, and killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ldap3::LdapConn;

use super::{ADMIN_DN, ADMIN_PW};

pub const SLAPD: &str = "/usr/sbin/slapd";
pub const SLAPADD: &str = "/usr/sbin/slapadd";
/// Where Debian's slapd keeps its loadable modules (`modulepath`).
pub const MODULES: &str = "/usr/lib/ldap";

/// Whether test `test` runs: opted in with `LINDEN_TEST_SLAPD=1`, and then slapd, slapadd and
/// each of `modules` (file names in `MODULES`, e.g. `back_meta.so`) must be there.
pub fn opted_in(test: &str, modules: &[&str]) -> bool {
    if !super::opted_in("LINDEN_TEST_SLAPD", test) {
        return false;
    }
    let missing: Vec<String> = [PathBuf::from(SLAPD), PathBuf::from(SLAPADD)]
        .into_iter()
        .chain(modules.iter().map(|m| Path::new(MODULES).join(m)))
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "LINDEN_TEST_SLAPD=1 but {} missing: install Debian's slapd (scripts/install-test-deps.sh)",
        missing.join(", ")
    );
    true
}

/// A slapd process, killed when dropped.
pub struct Slapd(Child);

impl Slapd {
    /// Starts `slapd -d 0 -h LISTENERS -f CONF` and waits (bounded: 30 s) until `url` takes a
    /// bind as the administrator.
    pub fn start(conf: &Path, listeners: &str, url: &str) -> Slapd {
        let child = Command::new(SLAPD)
            .args(["-d", "0", "-h", listeners, "-f"])
            .arg(conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start slapd");
        let s = Slapd(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut c) = LdapConn::new(url) {
                if c.simple_bind(ADMIN_DN, ADMIN_PW).is_ok_and(|r| r.rc == 0) {
                    return s;
                }
            }
            assert!(Instant::now() < deadline, "slapd did not start on {url}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
