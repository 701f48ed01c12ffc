//! Connection counting for `max_connections` and `max_connections_per_ip`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Open connections, in total and per client address.
#[derive(Default)]
pub struct Connections {
    total: AtomicUsize,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// Held for as long as a connection is open; gives its place back when dropped.
pub struct Admitted {
    table: Arc<Connections>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.table.total.fetch_sub(1, Ordering::Relaxed);
        if let Ok(mut m) = self.table.per_ip.lock() {
            if let Some(n) = m.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&self.ip);
                }
            }
        }
    }
}

/// Why a connection was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Total,
    PerIp,
}

impl Connections {
    /// Admits a connection from `ip` unless that would exceed a limit.
    pub fn admit(
        table: &Arc<Connections>,
        ip: IpAddr,
        max_total: usize,
        max_per_ip: usize,
    ) -> Result<Admitted, Refused> {
        let Ok(mut m) = table.per_ip.lock() else {
            return Err(Refused::Total);
        };
        if table.total.load(Ordering::Relaxed) >= max_total {
            return Err(Refused::Total);
        }
        let n = m.entry(ip).or_insert(0);
        if *n >= max_per_ip {
            return Err(Refused::PerIp);
        }
        *n += 1;
        table.total.fetch_add(1, Ordering::Relaxed);
        Ok(Admitted {
            table: table.clone(),
            ip,
        })
    }

    pub fn open(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_release() {
        let t = Arc::new(Connections::default());
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        let g1 = Connections::admit(&t, a, 3, 2).expect("1st");
        let _g2 = Connections::admit(&t, a, 3, 2).expect("2nd");
        assert_eq!(Connections::admit(&t, a, 3, 2).err(), Some(Refused::PerIp));
        let _g3 = Connections::admit(&t, b, 3, 2).expect("other address");
        assert_eq!(Connections::admit(&t, b, 3, 2).err(), Some(Refused::Total));
        drop(g1);
        let _g4 = Connections::admit(&t, a, 3, 2).expect("room again");
        assert_eq!(t.open(), 3);
    }
}
