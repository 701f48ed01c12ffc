//! Notifications to systemd (`sd_notify(3)`) for a `Type=notify` service: `READY=1` once every
//! listener is bound, `STOPPING=1` when a stop begins, `RELOADING=1` … `READY=1` around a
//! reload, and `WATCHDOG=1` pings when the unit sets `WatchdogSec`.
//!
//! Without `NOTIFY_SOCKET` in the environment (not started by systemd) every function here does
//! nothing. A notification that cannot be sent is logged, never fatal: the server keeps
//! serving, and systemd reports the start as timed out on its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sd_notify::NotifyState;

/// The server accepts connections on every configured listener: systemd may start the units
/// ordered after this one. `status` is shown by `systemctl status`.
pub fn ready(status: &str) {
    send(
        "READY=1",
        &[NotifyState::Ready, NotifyState::Status(status)],
    );
}

/// A stop has begun (SIGTERM or SIGINT): connections are closed and the shutdown snapshot is
/// written next.
pub fn stopping() {
    send(
        "STOPPING=1",
        &[
            NotifyState::Stopping,
            NotifyState::Status("stopping: closing connections, writing a snapshot"),
        ],
    );
}

/// A reload (SIGHUP) has begun. Follow it with [`reloaded`] when the new settings are in force
/// or were refused, so that `systemctl reload` returns.
pub fn reloading() {
    // MONOTONIC_USEC tells systemd which reload this is (required with Type=notify-reload).
    match NotifyState::monotonic_usec_now() {
        Ok(now) => send("RELOADING=1", &[NotifyState::Reloading, now]),
        Err(_) => send("RELOADING=1", &[NotifyState::Reloading]),
    }
}

/// A reload has finished (applied or refused): the service is ready again.
pub fn reloaded(status: &str) {
    ready(status);
}

/// How often to ping the watchdog: half the unit's `WatchdogSec` (systemd passes it as
/// `WATCHDOG_USEC`, for this process when `WATCHDOG_PID` names it or is absent); `None` when
/// no watchdog is set.
pub fn watchdog_period() -> Option<Duration> {
    sd_notify::watchdog_enabled()
        .filter(|d| !d.is_zero())
        .map(|d| d / 2)
}

/// Pings the watchdog every `period` for as long as it runs. Spawned on the server's runtime,
/// so the pings stop when the runtime no longer runs its tasks (every worker stuck) and
/// systemd then restarts the service.
pub async fn watchdog(period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        send("WATCHDOG=1", &[NotifyState::Watchdog]);
    }
}

/// Whether a failed notification was logged already: a socket that went away is reported once,
/// not at every watchdog ping.
static FAILED: AtomicBool = AtomicBool::new(false);

fn send(what: &str, state: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(state) {
        if !FAILED.swap(true, Ordering::Relaxed) {
            tracing::warn!("cannot notify systemd ({what}) on $NOTIFY_SOCKET: {e}");
        }
    }
}
