//! Open-loop pacing: when each connection's requests are due, and the thread that wakes the
//! connections at those times.
//!
//! Connection `i` of `C` at an aggregate rate `R` sends its `n`-th request at
//! `start + (i / C + n) · C / R` (the connections interleaved evenly). Latency is counted from that
//! *intended* time whatever happens, so a late client or a queue at the server both show (no
//! coordinated omission); the time the request actually went out is recorded too, and the
//! difference (the pacing lag) is reported apart, so a reader can tell the client's lateness
//! from the server's time.
//!
//! Two pacers wake a connection when a request is due ([`Pacer`]):
//! - `thread` (the default): one OS thread per run sleeps until the next due request
//!   (`nanosleep` with a 1 µs timer slack) and wakes the connections it is due on through a
//!   [`tokio::sync::Notify`]. It wakes at most once per `--pace-resolution`
//!   ([`DEFAULT_RESOLUTION_US`] by default), so at high rates each wake releases a few requests
//!   per connection, not a millisecond's burst. Its CPU time is measured and reported
//!   (`pacer_cpu_secs`).
//!
//! The resolution trades precision for client CPU: every wake of a connection is a task
//! wake-up and a `write`. At 67,500 searches/s over 8 connections on 2 shared cores
//! (BENCHMARKS.md, "pacing"), 50 µs cost 1.5–2.5× the client CPU of tokio's timer and made the
//! client itself late when the machine was busy; 200 µs kept the send lag's p99 at a few
//! hundred µs for about 1.5× the timer's CPU.
//! - `timer`: each connection sleeps on tokio's timer, whose resolution is 1 ms: a connection
//!   wakes up to ~1 ms late and then sends every request whose time has passed at once. Kept
//!   to compare with measurements made before the thread pacer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Default `--pace-resolution`: the pacer thread wakes at most once per this many µs.
pub const DEFAULT_RESOLUTION_US: u64 = 200;

/// How a connection is woken when a request is due under `--rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Pacer {
    /// A thread of its own, sleeping with microsecond precision (see `--pace-resolution`).
    #[default]
    Thread,
    /// tokio's timer (1 ms resolution): the pacing of earlier versions.
    Timer,
}

impl Pacer {
    /// The name the command line uses.
    pub fn name(self) -> &'static str {
        match self {
            Pacer::Thread => "thread",
            Pacer::Timer => "timer",
        }
    }
}

/// Every connection's send times.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    /// Per connection: when its first request is due.
    first: Vec<Instant>,
    /// Per connection: time between two of its requests (at least 1 ns).
    period: Duration,
}

impl Schedule {
    /// `connections` connections sending `rate` requests per second between them, from `start`.
    pub(crate) fn new(start: Instant, connections: usize, rate: f64) -> Schedule {
        let c = connections.max(1);
        let period = Duration::try_from_secs_f64(c as f64 / rate)
            .unwrap_or(Duration::from_secs(u64::from(u32::MAX)))
            .max(Duration::from_nanos(1));
        let first = (0..c)
            .map(|i| start + period.mul_f64(i as f64 / c as f64))
            .collect();
        Schedule { first, period }
    }

    pub(crate) fn period(&self) -> Duration {
        self.period
    }

    /// When connection `i`'s first request is due.
    pub(crate) fn first(&self, i: usize) -> Instant {
        self.first[i]
    }

    /// When connection `i`'s `n`-th request (from 0) is due: the same instant as adding
    /// `period` to `first` `n` times, as the connection does.
    pub(crate) fn due_at(&self, i: usize, n: u64) -> Instant {
        let nanos = self.period.as_nanos().saturating_mul(u128::from(n));
        let d = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        self.first[i] + d
    }

    /// How many of connection `i`'s requests are due at `now`.
    pub(crate) fn due_by(&self, i: usize, now: Instant) -> u64 {
        match now.checked_duration_since(self.first[i]) {
            None => 0,
            Some(d) => {
                let n = d.as_nanos() / self.period.as_nanos() + 1;
                u64::try_from(n).unwrap_or(u64::MAX)
            }
        }
    }
}

/// What the pacer thread does at one wake-up: which connections to wake, and when to wake next.
#[derive(Debug, Clone)]
pub(crate) struct PaceState {
    schedule: Schedule,
    /// Per connection: requests it has been woken for.
    woken_for: Vec<u64>,
    resolution: Duration,
    stop: Instant,
}

/// The pacer's decision at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    /// Connections that have a request due that they were not yet woken for.
    pub wake: Vec<usize>,
    /// When to look again; `None` once `stop` is reached.
    pub next: Option<Instant>,
}

impl PaceState {
    pub(crate) fn new(schedule: Schedule, resolution: Duration, stop: Instant) -> PaceState {
        let n = schedule.first.len();
        PaceState {
            schedule,
            woken_for: vec![0; n],
            resolution,
            stop,
        }
    }

    /// Wakes every connection with a new due request at `now`; the next look is at the
    /// earliest request not yet due, but no sooner than `resolution` after `now` (so the
    /// thread wakes at most once per resolution, whatever the rate).
    pub(crate) fn step(&mut self, now: Instant) -> Step {
        let mut wake = Vec::new();
        let mut earliest: Option<Instant> = None;
        for i in 0..self.woken_for.len() {
            let due = self.schedule.due_by(i, now);
            if due > self.woken_for[i] {
                self.woken_for[i] = due;
                wake.push(i);
            }
            let next = self.schedule.due_at(i, due);
            earliest = Some(earliest.map_or(next, |e| e.min(next)));
        }
        let next = match earliest {
            _ if now >= self.stop => None,
            None => None,
            Some(t) => Some(t.max(now + self.resolution)),
        }
        .filter(|t| *t < self.stop);
        Step { wake, next }
    }
}

/// The running pacer thread of one run.
pub(crate) struct PacerThread {
    handle: std::thread::JoinHandle<Option<Duration>>,
    done: Arc<AtomicBool>,
}

/// Longest single sleep of the pacer thread, so that [`PacerThread::finish`] never waits long.
const MAX_SLEEP: Duration = Duration::from_millis(10);

impl PacerThread {
    /// Starts the thread; it wakes `notify[i]` whenever connection `i` has a request due, until
    /// `stop`.
    pub(crate) fn start(
        mut state: PaceState,
        notify: Vec<Arc<Notify>>,
    ) -> std::io::Result<PacerThread> {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let handle = std::thread::Builder::new()
            .name("bench-pacer".into())
            .spawn(move || {
                fine_timer_slack();
                loop {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    let now = Instant::now();
                    let step = state.step(now);
                    for i in step.wake {
                        notify[i].notify_one();
                    }
                    let Some(next) = step.next else { break };
                    let wait = next.saturating_duration_since(Instant::now());
                    std::thread::sleep(wait.min(MAX_SLEEP));
                }
                thread_cpu_time()
            })?;
        Ok(PacerThread { handle, done })
    }

    /// Stops the thread (at most [`MAX_SLEEP`] later) and returns the CPU time it used, when
    /// the system tells it.
    pub(crate) fn finish(self) -> Option<Duration> {
        self.done.store(true, Ordering::Relaxed);
        self.handle.join().ok().flatten()
    }
}

/// Asks the kernel to wake this thread within 1 µs of the requested time (the default slack of
/// 50 µs would be most of the pacing error).
fn fine_timer_slack() {
    #[cfg(target_os = "linux")]
    {
        // Best effort: without it the pacer is only less precise, which the lag shows.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1_000));
    }
}

/// CPU time (user + system) of the calling thread so far.
fn thread_cpu_time() -> Option<Duration> {
    cpu_time_from_stat("/proc/thread-self/stat")
}

/// CPU time (user + system) of this process so far: what the client costs.
pub(crate) fn process_cpu_time() -> Option<Duration> {
    cpu_time_from_stat("/proc/self/stat")
}

fn cpu_time_from_stat(path: &str) -> Option<Duration> {
    let text = std::fs::read_to_string(path).ok()?;
    parse_stat_cpu(&text, clock_ticks_per_sec())
}

/// `utime + stime` of a `/proc/…/stat` line (fields 14 and 15, counted after the command name,
/// which may hold spaces and parentheses).
pub(crate) fn parse_stat_cpu(stat: &str, ticks_per_sec: u64) -> Option<Duration> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_comm.split_whitespace();
    // After the command come state (field 3) … so utime (14) is the 12th from here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let ticks = utime + stime;
    Some(Duration::from_secs_f64(
        ticks as f64 / ticks_per_sec.max(1) as f64,
    ))
}

fn clock_ticks_per_sec() -> u64 {
    // USER_HZ: 100 on every Linux architecture that matters here; rustix does not expose
    // sysconf(_SC_CLK_TCK) without libc.
    100
}

/// The three durations a completed request is reported with, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timings {
    /// From the intended send time to the answer: the latency a user of the server sees
    /// when requests arrive at this rate.
    pub latency: u64,
    /// From the actual send to the answer: the server (and the network, and the client's
    /// reading).
    pub service: u64,
    /// From the intended to the actual send: the client's own lateness.
    pub lag: u64,
}

impl Timings {
    pub(crate) fn of(intended: Instant, sent: Instant, answered: Instant) -> Timings {
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        Timings {
            latency: us(answered.saturating_duration_since(intended)),
            service: us(answered.saturating_duration_since(sent)),
            lag: us(sent.saturating_duration_since(intended)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn connections_interleave_evenly() {
        let t0 = Instant::now();
        // 4 connections at 4,000/s: each every 1 ms, offset by 250 µs.
        let s = Schedule::new(t0, 4, 4000.0);
        assert_eq!(s.period(), us(1000));
        for i in 0..4 {
            assert_eq!(s.first(i), t0 + us(250 * i as u64));
            assert_eq!(s.due_at(i, 3), t0 + us(250 * i as u64 + 3000));
        }
        assert_eq!(s.due_by(0, t0), 1);
        assert_eq!(s.due_by(1, t0), 0);
        assert_eq!(s.due_by(1, t0 + us(250)), 1);
        assert_eq!(s.due_by(1, t0 + us(1249)), 1);
        assert_eq!(s.due_by(1, t0 + us(1250)), 2);
        // Adding the period n times, as a connection does, lands on due_at(n).
        let mut t = s.first(3);
        for n in 0..1000 {
            assert_eq!(t, s.due_at(3, n));
            assert_eq!(s.due_by(3, t), n + 1);
            t += s.period();
        }
    }

    #[test]
    fn pacer_wakes_each_due_connection_once_and_at_most_once_per_resolution() {
        let t0 = Instant::now();
        let stop = t0 + us(10_000);
        // 2 connections at 20,000/s: a request every 100 µs each, 50 µs apart.
        let mut p = PaceState::new(Schedule::new(t0, 2, 20_000.0), us(20), stop);
        let s = p.step(t0);
        assert_eq!(s.wake, vec![0]);
        assert_eq!(s.next, Some(t0 + us(50)));
        // Woken early: nothing new is due, and the next look is not sooner than the resolution.
        let s = p.step(t0 + us(40));
        assert!(s.wake.is_empty());
        assert_eq!(s.next, Some(t0 + us(60)));
        let s = p.step(t0 + us(50));
        assert_eq!(s.wake, vec![1]);
        assert_eq!(s.next, Some(t0 + us(100)));
        // Woken late (the thread was descheduled): each connection is woken once, whatever
        // it has due; it sends all of it.
        let s = p.step(t0 + us(420));
        assert_eq!(s.wake, vec![0, 1]);
        assert_eq!(s.next, Some(t0 + us(450)));
        // A coarse resolution batches: at 1 ms, the next look is 1 ms later.
        let mut coarse = PaceState::new(Schedule::new(t0, 2, 20_000.0), us(1000), stop);
        assert_eq!(coarse.step(t0).next, Some(t0 + us(1000)));
        assert_eq!(coarse.step(t0 + us(1000)).wake, vec![0, 1]);
        // At and after stop: nothing more to do.
        assert_eq!(p.step(stop).next, None);
        let mut late = PaceState::new(Schedule::new(t0, 2, 20_000.0), us(20), stop);
        assert_eq!(late.step(stop - us(10)).next, None);
    }

    #[test]
    fn timings_split_latency_into_lag_and_service() {
        let t0 = Instant::now();
        let t = Timings::of(t0, t0 + us(30), t0 + us(230));
        assert_eq!(
            t,
            Timings {
                latency: 230,
                service: 200,
                lag: 30
            }
        );
        assert_eq!(t.latency, t.lag + t.service);
        // Closed loop: sent when intended.
        let t = Timings::of(t0, t0, t0 + us(80));
        assert_eq!((t.latency, t.service, t.lag), (80, 80, 0));
    }

    #[test]
    fn cpu_time_from_proc_stat() {
        let line = "4242 (bench (pacer) x) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 1 0";
        assert_eq!(parse_stat_cpu(line, 100), Some(Duration::from_secs(2)));
        assert_eq!(parse_stat_cpu("garbage", 100), None);
        assert!(process_cpu_time().is_some());
    }
}
