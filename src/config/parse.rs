//! The flags' value parsers: what a duration, a period, a rate or a byte budget may be.

use std::time::Duration;

pub(crate) fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| e.to_string())
}

/// For periods (timers cannot tick every 0s).
pub(crate) fn period(s: &str) -> Result<Duration, String> {
    duration(s).and_then(|d| {
        if d.is_zero() {
            Err("must be more than 0s".into())
        } else {
            Ok(d)
        }
    })
}

/// Room for the largest body beside others, and no more than a machine may have.
pub(crate) fn body_budget(s: &str) -> Result<usize, String> {
    let min = 2 * crate::serve::server::MAX_BODY;
    let max = 1usize << 40;
    let n: usize = s.parse().map_err(|e| format!("{e}"))?;
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err(format!("must be a number of bytes from {min} to {max}"))
    }
}

pub(crate) fn rate(s: &str) -> Result<f64, String> {
    let r: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if r.is_finite() && r > 0.0 && r <= 10_000.0 {
        Ok(r)
    } else {
        Err("must be a number of writes per second above 0 and at most 10000".into())
    }
}
