//! TCP listeners with the configured accept queue (`listen_backlog`).
//!
//! `TcpListener::bind` (tokio, mio and std alike) listens with a backlog of 128: of a burst of
//! connections (a farm of clients reconnecting after a restart), those beyond it have their
//! SYN dropped and retry a second later. The kernel caps the backlog at
//! `net.core.somaxconn`; [`backlog_warning`] says when it does.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};

/// Binds a TCP listener on `addr` (with `SO_REUSEADDR`, as `TcpListener::bind`) whose accept
/// queue holds `backlog` connections. Call it from within the Tokio runtime.
pub fn tcp(addr: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// The kernel's cap on every accept queue (`/proc/sys/net/core/somaxconn`), where there is one.
pub fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The warning to log at start when `backlog` is more than the kernel grants.
pub fn backlog_warning(backlog: u32) -> Option<String> {
    let cap = somaxconn()?;
    (backlog > cap).then(|| {
        format!(
            "listen_backlog is {backlog} but the kernel caps accept queues at {cap} \
             (net.core.somaxconn): connections beyond {cap} waiting to be accepted are dropped \
             and retried by their clients a second later; raise it with \
             `sysctl -w net.core.somaxconn={backlog}`"
        )
    })
}
