//! The figures the end-to-end benchmarks (`person`, `room`) report: times
//! in milliseconds, percentiles, and a table row against a target.

use std::{fmt::Write as _, time::Duration};

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `p` quantile (0–1) of the finite values, by nearest rank; NaN when
/// there are none.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let rank = (p * (v.len() - 1) as f64).round() as usize;
    v[rank.min(v.len() - 1)]
}

/// `| what | median | p95 | max | verdict |`, in ms with `decimals`; the
/// verdict against `target` (ms) judges the maximum, then the p95.
pub fn row(out: &mut String, what: &str, values: &[f64], decimals: usize, target: Option<f64>) {
    let (median, p95, max) = (
        percentile(values, 0.5),
        percentile(values, 0.95),
        percentile(values, 1.0),
    );
    let verdict = match target {
        Some(t) if max <= t => format!("≤ {t:.0} ms: met (max)"),
        Some(t) if p95 <= t => format!("≤ {t:.0} ms: met at p95, not at max"),
        Some(t) => format!("≤ {t:.0} ms: **not met**"),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "| {what} | {median:.decimals$} | {p95:.decimals$} | {max:.decimals$} | {verdict} |"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_verdicts() {
        let v = [5.0, 1.0, 3.0, f64::NAN, 2.0, 4.0];
        assert_eq!(percentile(&v, 0.5), 3.0);
        assert_eq!(percentile(&v, 1.0), 5.0);
        assert!(percentile(&[], 0.5).is_nan());
        let mut out = String::new();
        row(&mut out, "x", &v, 1, Some(4.5));
        assert!(
            out.contains("met at p95, not at max") || out.contains("not met"),
            "{out}"
        );
        let mut out = String::new();
        row(&mut out, "x", &v, 1, Some(10.0));
        assert!(out.contains("met (max)"), "{out}");
    }
}
