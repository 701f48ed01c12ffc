//! The page `linden bench sweep` writes: one self-contained HTML file (inline SVG and CSS, no
//! script, nothing fetched) with a chart per workload — latency percentiles against offered
//! load, every server on the same axes — and the numbers under each chart.

use crate::sweep::{Point, Series, SweepReport, WorkloadSweep};
use std::fmt::Write;

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 460.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 36.0;
const BOTTOM: f64 = 56.0;
const COLORS: [&str; 6] = [
    "#1f5fbf", "#d1495b", "#2e933c", "#8e44ad", "#e08e0b", "#555555",
];

/// A percentile drawn on the chart: its label, how to read it from a point, its line style.
struct Curve {
    label: &'static str,
    value: fn(&Point) -> u64,
    dash: &'static str,
}

const CURVES: [Curve; 4] = [
    Curve {
        label: "p50",
        value: |p| p.p50_us,
        dash: "",
    },
    Curve {
        label: "p99",
        value: |p| p.p99_us,
        dash: "8 4",
    },
    Curve {
        label: "p99.9",
        value: |p| p.p999_us,
        dash: "2 3",
    },
    // The server's share of p99 (the client's own send lag left out): where it sits below
    // p99, the rest is the client's lateness.
    Curve {
        label: "p99 from send",
        value: |p| p.service_p99_us,
        dash: "10 3 2 3",
    },
];

/// The whole page.
pub fn page(report: &SweepReport) -> String {
    let mut out = String::with_capacity(64 * 1024);
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Latency under load</title>\n<style>\
         body{font-family:system-ui,sans-serif;margin:24px;color:#222}\
         table{border-collapse:collapse;margin:8px 0 32px;font-size:13px}\
         th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}\
         th{background:#f2f2f2}td.l{text-align:left}tr.sat td{color:#999}\
         svg text{font-family:system-ui,sans-serif}\
         </style></head><body>\n",
    );
    let _ = writeln!(out, "<h1>Latency under load (open loop)</h1>");
    let _ = writeln!(
        out,
        "<p>{} connections × {} outstanding requests at most, {} s measured per step; latency \
         runs from each request's intended send time, so a server that falls behind shows it. \
         Hollow markers: the server answered less than 90&nbsp;% of the offered load (the sweep \
         stops raising it there). Sends paced by the {} pacer{}; the tables also give latency \
         from each request's actual send and the send lag (actual minus intended send time: the \
         client's own lateness), and the client's CPU time per step (warm-up included).</p>",
        report.connections,
        report.depth,
        fmt_num(report.step_secs),
        esc(&report.pacer),
        if report.pacer == "thread" {
            format!(" (wake-ups at most every {} µs)", report.pace_resolution_us)
        } else {
            " (tokio's 1 ms timer)".to_string()
        }
    );
    if !report.note.is_empty() {
        let _ = writeln!(out, "<p>{}</p>", esc(&report.note));
    }
    for w in &report.workloads {
        let _ = writeln!(out, "<h2>{}</h2>", esc(&w.workload));
        out.push_str(&chart(w));
        out.push_str(&table(w));
    }
    out.push_str("</body></html>\n");
    out
}

/// One workload's chart as an SVG element.
pub fn chart(w: &WorkloadSweep) -> String {
    let points = || w.series.iter().flat_map(|s| s.points.iter());
    let x_step = tick_step(
        points()
            .map(|p| p.offered.max(p.achieved))
            .chain(w.series.iter().filter_map(|s| s.max_rate))
            .fold(0.0, f64::max)
            * 1.04,
    );
    let x_max = x_step.0 * x_step.1 as f64;
    let lat = || {
        points()
            .flat_map(|p| CURVES.iter().map(move |c| (c.value)(p)))
            .filter(|&v| v > 0)
    };
    // Whole decades of microseconds, at least 10 µs to 10 ms.
    let lo = lat()
        .min()
        .map_or(1.0, |v| (v as f64).log10().floor())
        .min(1.0);
    let hi = lat()
        .max()
        .map_or(4.0, |v| (v as f64).log10().ceil())
        .max(4.0);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |v: f64| LEFT + v / x_max * plot_w;
    let y = |us: u64| {
        let l = (us.max(1) as f64).log10().clamp(lo, hi);
        TOP + (hi - l) / (hi - lo) * plot_h
    };

    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{} latency against offered load\">",
        esc(&w.workload)
    );
    let _ = writeln!(
        s,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"#fff\" stroke=\"#888\"/>"
    );
    // Horizontal grid: decades, with 2 and 5 between them faint.
    let mut d = lo as i32;
    while f64::from(d) <= hi {
        let base = 10f64.powi(d);
        let yy = y(base as u64);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\">{}</text>",
            LEFT + plot_w,
            LEFT - 6.0,
            yy + 4.0,
            fmt_us(base as u64)
        );
        for m in [2.0, 5.0] {
            if f64::from(d) < hi {
                let yy = y((base * m) as u64);
                let _ = writeln!(
                    s,
                    "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#f0f0f0\"/>",
                    LEFT + plot_w
                );
            }
        }
        d += 1;
    }
    // The 1 ms line: the p99 aim at half the maximum search rate.
    if lo <= 3.0 && 3.0 <= hi {
        let yy = y(1000);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#999\" stroke-dasharray=\"4 4\"/>",
            LEFT + plot_w
        );
    }
    // Vertical grid and ticks.
    for t in (0..=x_step.1).map(|i| x_step.0 * i as f64) {
        let xx = x(t);
        let _ = writeln!(
            s,
            "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"#eee\"/>\
             <text x=\"{xx:.1}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">{}</text>",
            TOP + plot_h,
            TOP + plot_h + 16.0,
            fmt_rate(t)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" font-size=\"13\" text-anchor=\"middle\">offered load (operations/s)</text>\
         <text transform=\"translate(18 {}) rotate(-90)\" font-size=\"13\" text-anchor=\"middle\">latency (from the intended send time)</text>",
        LEFT + plot_w / 2.0,
        HEIGHT - 14.0,
        TOP + plot_h / 2.0
    );

    for (i, series) in w.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts: Vec<&Point> = series.points.iter().collect();
        pts.sort_by(|a, b| a.offered.total_cmp(&b.offered));
        // Half of the probed maximum: where the p99 aim is read.
        if let Some(max) = series.max_rate {
            let xx = x(max / 2.0);
            let _ = writeln!(
                s,
                "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"{color}\" \
                 stroke-width=\"1\" stroke-dasharray=\"1 3\"/>\
                 <text x=\"{:.1}\" y=\"{}\" font-size=\"11\" fill=\"{color}\">½ max</text>",
                TOP + plot_h,
                xx + 3.0,
                TOP + 12.0 + 12.0 * i as f64
            );
        }
        for c in &CURVES {
            let line: Vec<String> = pts
                .iter()
                .map(|p| format!("{:.1},{:.1}", x(p.offered), y((c.value)(p))))
                .collect();
            let dash = if c.dash.is_empty() {
                String::new()
            } else {
                format!(" stroke-dasharray=\"{}\"", c.dash)
            };
            let _ = writeln!(
                s,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.8\"{dash} points=\"{}\"/>",
                line.join(" ")
            );
            for p in &pts {
                let fill = if p.keeps_up() { color } else { "#fff" };
                let _ = writeln!(
                    s,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{fill}\" stroke=\"{color}\">\
                     <title>{} {}: offered {}/s, achieved {}/s, {} {}</title></circle>",
                    x(p.offered),
                    y((c.value)(p)),
                    esc(&series.target),
                    c.label,
                    fmt_rate(p.offered),
                    fmt_rate(p.achieved),
                    c.label,
                    fmt_us((c.value)(p))
                );
            }
        }
    }

    // Legend: servers (colour), then percentiles (line style).
    let lx = LEFT + plot_w + 18.0;
    let mut ly = TOP + 10.0;
    for (i, series) in w.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let max = series
            .max_rate
            .map(|m| format!(" (max {}/s)", fmt_rate(m)))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "<rect x=\"{lx}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{color}\"/>\
             <text x=\"{}\" y=\"{ly}\" font-size=\"12\">{}{}</text>",
            ly - 9.0,
            lx + 20.0,
            esc(&series.target),
            esc(&max)
        );
        ly += 18.0;
    }
    ly += 8.0;
    for c in &CURVES {
        let dash = if c.dash.is_empty() {
            String::new()
        } else {
            format!(" stroke-dasharray=\"{}\"", c.dash)
        };
        let _ = writeln!(
            s,
            "<line x1=\"{lx}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\" stroke-width=\"1.8\"{dash}/>\
             <text x=\"{}\" y=\"{ly}\" font-size=\"12\">{}</text>",
            lx + 26.0,
            ly - 4.0,
            ly - 4.0,
            lx + 32.0,
            c.label
        );
        ly += 18.0;
    }
    s.push_str("</svg>\n");
    s
}

/// One workload's numbers.
fn table(w: &WorkloadSweep) -> String {
    let mut s = String::from(
        "<table><tr><th rowspan=\"2\">server</th><th rowspan=\"2\">offered/s</th>\
         <th rowspan=\"2\">achieved/s</th><th colspan=\"5\">latency from the intended send</th>\
         <th colspan=\"3\">from the actual send</th><th colspan=\"2\">send lag</th>\
         <th rowspan=\"2\">client CPU</th><th rowspan=\"2\">errors</th></tr>\n\
         <tr><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th>\
         <th>p50</th><th>p99</th><th>p99.9</th><th>p99</th><th>max</th></tr>\n",
    );
    for series in &w.series {
        for p in &series.points {
            let _ = writeln!(
                s,
                "<tr{}><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td></tr>",
                if p.keeps_up() { "" } else { " class=\"sat\"" },
                esc(&series.target),
                fmt_rate(p.offered),
                fmt_rate(p.achieved),
                fmt_us(p.p50_us),
                fmt_us(p.p90_us),
                fmt_us(p.p99_us),
                fmt_us(p.p999_us),
                fmt_us(p.max_us),
                fmt_us(p.service_p50_us),
                fmt_us(p.service_p99_us),
                fmt_us(p.service_p999_us),
                fmt_us(p.lag_p99_us),
                fmt_us(p.lag_max_us),
                p.client_cpu_secs
                    .map_or_else(String::new, |c| format!("{} s", fmt_num(c))),
                p.errors
            );
        }
        summary_row(&mut s, series);
    }
    s.push_str("</table>\n");
    s
}

fn summary_row(s: &mut String, series: &Series) {
    if let (Some(max), Some(p99), Some(from_send)) = (
        series.max_rate,
        series.p99_at_half_max(),
        series.service_p99_at_half_max(),
    ) {
        let _ = writeln!(
            s,
            "<tr><td class=\"l\" colspan=\"15\">{}: closed-loop maximum {}/s; p99 at half of it \
             ({}/s, interpolated): {} ({} from the actual send)</td></tr>",
            esc(&series.target),
            fmt_rate(max),
            fmt_rate(max / 2.0),
            fmt_us(p99.round() as u64),
            fmt_us(from_send.round() as u64)
        );
    }
}

/// The smallest 1, 2 or 5 × 10ⁿ at or above `v`.
fn nice_ceil(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * p)
}

/// Round tick spacing for an axis from 0 to at least `max`, and how many steps cover it
/// (about six).
fn tick_step(max: f64) -> (f64, u32) {
    let step = nice_ceil(max / 6.0);
    (step, ((max / step).ceil() as u32).max(1))
}

fn fmt_us(us: u64) -> String {
    if us < 1_000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{} ms", fmt_num(us as f64 / 1e3))
    } else {
        format!("{} s", fmt_num(us as f64 / 1e6))
    }
}

/// Rates with thousands separators.
fn fmt_rate(r: f64) -> String {
    let n = r.round() as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Up to three significant digits, no trailing zeros.
fn fmt_num(v: f64) -> String {
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_numbers() {
        assert_eq!(nice_ceil(0.7), 1.0);
        assert_eq!(nice_ceil(1.3), 2.0);
        assert_eq!(nice_ceil(37_000.0), 50_000.0);
        assert_eq!(nice_ceil(100.0), 100.0);
        assert_eq!(tick_step(50_000.0), (10_000.0, 5));
        assert_eq!(tick_step(7_170.0), (2_000.0, 4));
        assert_eq!(fmt_rate(1_234_567.4), "1,234,567");
        assert_eq!(fmt_rate(999.0), "999");
        assert_eq!(fmt_us(850), "850 µs");
        assert_eq!(fmt_us(1_500), "1.5 ms");
        assert_eq!(fmt_us(2_000_000), "2 s");
        assert_eq!(esc("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
    }
}
