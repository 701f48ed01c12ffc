//! `linden bench sweep`: latency under load, open loop, for several servers on one chart.
//!
//! For each workload and each target server: a short closed-loop probe finds the server's
//! maximum rate at the sweep's connections × depth; then open-loop runs (`--rate`, latency from
//! each request's intended send time) step the offered load through fractions of that maximum
//! (or through the `--rates` given), the targets taking turns at every step, until a target
//! stops keeping up. Every point is one ordinary [`crate::load`] run, so a sweep measures
//! exactly what `linden bench --rate` measures: latency from the intended send time (the
//! chart's curves), and beside it latency from the actual send and the client's pacing lag
//! ([`crate::pace`]), so that the client's own lateness can be told from the server's. The result is a self-contained HTML page (one
//! SVG chart per workload, both servers on it, and the numbers as a table) and optionally JSON.

use crate::load::{self, BenchArgs, Summary, Workload};
use crate::Error;
use serde::Serialize;
use std::path::PathBuf;

/// A step whose achieved rate is below this share of the offered rate means the server no
/// longer keeps up: the sweep stops raising that server's load.
pub const KEEPS_UP: f64 = 0.9;

/// Arguments of `linden bench sweep`.
#[derive(Debug, Clone, clap::Args)]
pub struct SweepArgs {
    /// Server to load, as NAME=URL (e.g. `linden=ldap://127.0.0.1:3389`); repeat for each
    /// server on the chart.
    #[arg(long = "target", required = true, value_parser = parse_target)]
    pub targets: Vec<Target>,
    /// Workloads to sweep, comma-separated (any `linden bench` workload).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "search,modify,auth"
    )]
    pub workloads: Vec<Workload>,
    /// Offered loads, as fractions of each server's probed maximum, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0"
    )]
    pub fractions: Vec<f64>,
    /// Offered loads in operations per second, the same for every server (no probe);
    /// replaces --fractions.
    #[arg(long, value_delimiter = ',')]
    pub rates: Vec<f64>,
    /// Connections per run.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Requests each connection may have outstanding: enough that the offered rate, not the
    /// generator, decides when requests are sent.
    #[arg(long, default_value_t = 64)]
    pub depth: usize,
    /// Seconds of the closed-loop probe that finds each server's maximum rate.
    #[arg(long, default_value_t = 3.0)]
    pub probe_duration: f64,
    /// Measured seconds of each step.
    #[arg(long, default_value_t = 5.0)]
    pub step_duration: f64,
    /// Seconds run before measuring, per step and probe.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// DN every connection binds as before a run (anonymous when absent).
    #[arg(long)]
    pub bind_dn: Option<String>,
    /// Password for --bind-dn.
    #[arg(long, default_value = "")]
    pub password: String,
    /// `{rand}` is uniform in 0..range (the number of reference entries).
    #[arg(long, default_value_t = 1000)]
    pub range: u64,
    /// Password of the entries that auth binds as.
    #[arg(long, default_value = "password")]
    pub user_password: String,
    /// Search base, and parent of `ou=people`.
    #[arg(long, default_value = "dc=example,dc=com")]
    pub base: String,
    /// Runtime worker threads of the generator (default: one per CPU).
    #[arg(long)]
    pub threads: Option<usize>,
    /// What wakes a connection when a request is due (as `linden bench --pacer`).
    #[arg(long, value_enum, default_value_t = load::Pacer::Thread)]
    pub pacer: load::Pacer,
    /// Microseconds between two wake-ups of the pacer thread at most (as `linden bench
    /// --pace-resolution`).
    #[arg(long, default_value_t = crate::pace::DEFAULT_RESOLUTION_US)]
    pub pace_resolution: u64,
    /// The HTML page to write (charts and table).
    #[arg(long, default_value = "sweep.html")]
    pub out: PathBuf,
    /// Also write every point as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// A line under the page's title (machine, data set, versions).
    #[arg(long, default_value = "")]
    pub note: String,
}

/// A server on the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub name: String,
    pub url: String,
}

fn parse_target(s: &str) -> Result<Target, String> {
    match s.split_once('=') {
        Some((name, url)) if !name.is_empty() && !url.is_empty() => Ok(Target {
            name: name.to_string(),
            url: url.to_string(),
        }),
        _ => Err(format!(
            "{s:?}: expected NAME=URL, e.g. linden=ldap://127.0.0.1:3389"
        )),
    }
}

/// One measured step.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Point {
    pub offered: f64,
    pub achieved: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    /// Latency from the actual send (the server's time, and the client's reading).
    pub service_p50_us: u64,
    pub service_p99_us: u64,
    pub service_p999_us: u64,
    /// Actual minus intended send time: the client's pacing lag.
    pub lag_p50_us: u64,
    pub lag_p99_us: u64,
    pub lag_max_us: u64,
    /// CPU seconds of the whole client over the step (warm-up included), when measured.
    pub client_cpu_secs: Option<f64>,
    pub errors: u64,
}

impl Point {
    fn from_summary(offered: f64, s: &Summary) -> Point {
        let l = &s.total.latency_us;
        let (sv, lag) = (&s.total.service_us, &s.total.lag_us);
        Point {
            offered,
            achieved: s.total.ops_per_sec,
            p50_us: l.p50,
            p90_us: l.p90,
            p99_us: l.p99,
            p999_us: l.p999,
            max_us: l.max,
            service_p50_us: sv.p50,
            service_p99_us: sv.p99,
            service_p999_us: sv.p999,
            lag_p50_us: lag.p50,
            lag_p99_us: lag.p99,
            lag_max_us: lag.max,
            client_cpu_secs: s.client_cpu_secs,
            errors: s.total.errors,
        }
    }

    /// The server answered what was offered (and without errors).
    pub fn keeps_up(&self) -> bool {
        self.errors == 0 && self.achieved >= KEEPS_UP * self.offered
    }
}

/// One server's curve for one workload.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Series {
    pub target: String,
    pub url: String,
    /// Closed-loop operations per second at the sweep's connections × depth (absent with
    /// `--rates`).
    pub max_rate: Option<f64>,
    pub points: Vec<Point>,
}

impl Series {
    /// Latency percentiles at half of the probed maximum, interpolated between the steps
    /// around it: what the "p99 at half the maximum rate" aim reads.
    pub fn p99_at_half_max(&self) -> Option<f64> {
        let half = self.max_rate? / 2.0;
        interpolate(&self.points, half, |p| p.p99_us as f64)
    }

    /// p99 of latency from the actual send at half of the probed maximum (interpolated).
    pub fn service_p99_at_half_max(&self) -> Option<f64> {
        let half = self.max_rate? / 2.0;
        interpolate(&self.points, half, |p| p.service_p99_us as f64)
    }
}

/// `y(x)` between the two points whose offered loads enclose `x` (linear), or the point at
/// exactly `x`.
fn interpolate(points: &[Point], x: f64, y: impl Fn(&Point) -> f64) -> Option<f64> {
    let mut sorted: Vec<&Point> = points.iter().collect();
    sorted.sort_by(|a, b| a.offered.total_cmp(&b.offered));
    sorted.windows(2).find_map(|w| {
        let (a, b) = (w[0], w[1]);
        if a.offered <= x && x <= b.offered {
            let span = b.offered - a.offered;
            let t = if span > 0.0 {
                (x - a.offered) / span
            } else {
                0.0
            };
            Some(y(a) + t * (y(b) - y(a)))
        } else {
            None
        }
    })
}

/// All curves of one workload.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WorkloadSweep {
    pub workload: String,
    pub series: Vec<Series>,
}

/// Everything a sweep measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SweepReport {
    pub connections: usize,
    pub depth: usize,
    /// `thread` or `timer` (see `linden bench --pacer`).
    pub pacer: String,
    /// The thread pacer's resolution in microseconds.
    pub pace_resolution_us: u64,
    pub step_secs: f64,
    pub note: String,
    pub workloads: Vec<WorkloadSweep>,
}

impl SweepArgs {
    fn check(&self) -> Result<(), Error> {
        let positive = |xs: &[f64]| xs.iter().all(|x| x.is_finite() && *x > 0.0);
        if self.rates.is_empty() && (self.fractions.is_empty() || !positive(&self.fractions)) {
            return Err(Error::Args(
                "--fractions must be positive numbers (e.g. 0.1,0.5,1.0)".into(),
            ));
        }
        if !positive(&self.rates) {
            return Err(Error::Args("--rates must be positive numbers".into()));
        }
        if self.workloads.is_empty() {
            return Err(Error::Args("--workloads names no workload".into()));
        }
        let mut names: Vec<&str> = self.targets.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::Args(
                "two --target entries have the same name".into(),
            ));
        }
        Ok(())
    }

    /// The arguments of one ordinary `linden bench` run of this sweep.
    fn run_args(
        &self,
        workload: Workload,
        url: &str,
        rate: Option<f64>,
        duration: f64,
    ) -> Result<BenchArgs, Error> {
        let mut a = load::parse_args(&[workload.name(), "--url", url])?;
        a.bind_dn.clone_from(&self.bind_dn);
        a.password.clone_from(&self.password);
        a.connections = self.connections;
        a.depth = self.depth;
        a.duration = duration;
        a.warmup = self.warmup;
        a.rate = rate;
        a.range = self.range;
        a.user_password.clone_from(&self.user_password);
        a.base.clone_from(&self.base);
        a.threads = self.threads;
        a.pacer = self.pacer;
        a.pace_resolution = self.pace_resolution;
        a.quiet = true;
        a.allow_errors = true;
        Ok(a)
    }
}

/// Runs the sweep on a runtime of its own, printing a line per step, and writes the page (and
/// the JSON). Blocking, like [`load::run`].
pub fn run(args: &SweepArgs) -> Result<SweepReport, Error> {
    args.check()?;
    let mut report = SweepReport {
        connections: args.connections,
        depth: args.depth,
        pacer: args.pacer.name().to_string(),
        pace_resolution_us: args.pace_resolution,
        step_secs: args.step_duration,
        note: args.note.clone(),
        workloads: Vec::new(),
    };
    for &workload in &args.workloads {
        let name = workload.name();
        let mut series: Vec<Series> = args
            .targets
            .iter()
            .map(|t| Series {
                target: t.name.clone(),
                url: t.url.clone(),
                max_rate: None,
                points: Vec::new(),
            })
            .collect();
        if args.rates.is_empty() {
            for s in &mut series {
                let probe =
                    load::run(&args.run_args(workload, &s.url, None, args.probe_duration)?)?;
                println!(
                    "{name} {}: closed-loop maximum {:.0}/s (C={} D={})",
                    s.target, probe.total.ops_per_sec, args.connections, args.depth
                );
                s.max_rate = Some(probe.total.ops_per_sec);
            }
        }
        let steps = args.rates.len().max(args.fractions.len());
        let mut saturated = vec![false; series.len()];
        for step in 0..steps {
            // The targets take turns going first, so neither always runs after the other.
            let order: Vec<usize> = if step % 2 == 0 {
                (0..series.len()).collect()
            } else {
                (0..series.len()).rev().collect()
            };
            for i in order {
                if saturated[i] {
                    continue;
                }
                let s = &mut series[i];
                let offered = match (args.rates.get(step), s.max_rate) {
                    (Some(&r), _) => r,
                    (None, Some(max)) => max * args.fractions[step],
                    (None, None) => continue,
                };
                if offered < 1.0 {
                    continue;
                }
                let summary = load::run(&args.run_args(
                    workload,
                    &s.url,
                    Some(offered),
                    args.step_duration,
                )?)?;
                let p = Point::from_summary(offered, &summary);
                println!(
                    "{name} {}: offered {:.0}/s achieved {:.0}/s p50 {} µs p99 {} µs p99.9 {} µs \
                     (from send: p50 {} µs p99 {} µs; send lag p99 {} µs){}",
                    s.target,
                    p.offered,
                    p.achieved,
                    p.p50_us,
                    p.p99_us,
                    p.p999_us,
                    p.service_p50_us,
                    p.service_p99_us,
                    p.lag_p99_us,
                    if p.errors > 0 {
                        format!(" errors {}", p.errors)
                    } else {
                        String::new()
                    }
                );
                saturated[i] = !p.keeps_up();
                s.points.push(p);
            }
        }
        for s in &series {
            if let (Some(p99), Some(from_send)) = (s.p99_at_half_max(), s.service_p99_at_half_max())
            {
                println!(
                    "{name} {}: p99 at half the maximum rate ({:.0}/s): {:.0} µs ({:.0} µs from send)",
                    s.target,
                    s.max_rate.unwrap_or_default() / 2.0,
                    p99,
                    from_send
                );
            }
        }
        report.workloads.push(WorkloadSweep {
            workload: name.to_string(),
            series,
        });
    }
    write_outputs(args, &report)?;
    Ok(report)
}

fn write_outputs(args: &SweepArgs, report: &SweepReport) -> Result<(), Error> {
    let page = crate::plot::page(report);
    std::fs::write(&args.out, page)
        .map_err(|e| Error::io(format!("writing {}", args.out.display()), e))?;
    println!("wrote {}", args.out.display());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(report).map_err(|source| Error::Json {
            path: path.display().to_string(),
            source,
        })?;
        std::fs::write(path, text + "\n")
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(offered: f64, achieved: f64, p99: u64) -> Point {
        Point {
            offered,
            achieved,
            p50_us: p99 / 2,
            p90_us: p99,
            p99_us: p99,
            p999_us: p99 * 2,
            max_us: p99 * 3,
            service_p50_us: p99 / 4,
            service_p99_us: p99 / 2,
            service_p999_us: p99,
            lag_p50_us: 1,
            lag_p99_us: 10,
            lag_max_us: 20,
            client_cpu_secs: None,
            errors: 0,
        }
    }

    #[test]
    fn targets_parse_as_name_equals_url() {
        assert_eq!(
            parse_target("slapd=ldap://127.0.0.1:389").unwrap(),
            Target {
                name: "slapd".into(),
                url: "ldap://127.0.0.1:389".into()
            }
        );
        assert!(parse_target("ldap://127.0.0.1:389").is_err());
        assert!(parse_target("=ldap://x").is_err());
    }

    #[test]
    fn a_server_keeps_up_while_it_answers_what_is_offered() {
        assert!(pt(1000.0, 995.0, 100).keeps_up());
        assert!(!pt(1000.0, 700.0, 100).keeps_up());
        let mut p = pt(1000.0, 1000.0, 100);
        p.errors = 1;
        assert!(!p.keeps_up());
    }

    #[test]
    fn p99_at_half_max_interpolates_between_steps() {
        let s = Series {
            target: "linden".into(),
            url: String::new(),
            max_rate: Some(1000.0),
            points: vec![pt(400.0, 400.0, 100), pt(600.0, 600.0, 300)],
        };
        assert_eq!(s.p99_at_half_max(), Some(200.0));
        assert_eq!(s.service_p99_at_half_max(), Some(100.0));
        let none = Series {
            max_rate: None,
            ..s.clone()
        };
        assert_eq!(none.p99_at_half_max(), None);
    }
}
