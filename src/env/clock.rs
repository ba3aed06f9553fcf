//! This client's clock against the target's: how far apart they are, from the target's HTTP
//! `Date` header. Shards of one run start at one instant on their own clocks; the target is the
//! one clock they all reach, so each shard's offset to it shows how well their starts lined up
//! (`goodput merge` holds the offsets against each other).
//!
//! `Date` has one-second resolution, so one answer says little. The probe asks again every
//! [`POLL`] until the header's second changes: the target's clock passed that whole second
//! between the two answers that show the change, so on this clock the second began between the
//! first of those requests' send and the second's answer. The offset is the middle of that
//! span, and its half-width the uncertainty (about half of [`POLL`] plus a round trip).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// Time between two asks while waiting for the target's second to change.
const POLL: Duration = Duration::from_millis(10);

/// The longest the probe waits for the second to change (a second, and some).
const PATIENCE: Duration = Duration::from_millis(2500);

/// Milliseconds since the Unix epoch on this machine's wall clock.
fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// An HTTP `Date` header (IMF-fixdate, RFC 9110), as seconds since the Unix epoch. jiff's
/// RFC 2822 parser reads it: IMF-fixdate is RFC 2822's form with the zone written `GMT`.
pub fn http_date_s(v: &str) -> Option<i64> {
    jiff::fmt::rfc2822::parse(v.trim())
        .ok()
        .map(|z| z.timestamp().as_second())
}

/// The target's clock minus this client's, in milliseconds, with its uncertainty and how it
/// was measured; `{"absent": why}` when the target sends no usable `Date` header.
pub async fn offset(http: &reqwest::Client, base: &str, key: Option<&str>) -> Value {
    let url = format!("{}/v1/models", base.trim_end_matches('/'));
    let start = std::time::Instant::now();
    // The previous answer's second and the local time its request was sent.
    let mut prev: Option<(i64, f64)> = None;
    let mut asks = 0u32;
    while start.elapsed() < PATIENCE {
        let mut req = http.get(&url).timeout(Duration::from_secs(2));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        let sent = wall_ms();
        let answer = match req.send().await {
            Ok(r) => r,
            Err(e) => return json!({ "absent": crate::text::error_chain(&e) }),
        };
        let date = answer
            .headers()
            .get(reqwest::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(http_date_s);
        // Read to the end, so the connection is reused for the next ask.
        let _ = answer.bytes().await;
        let got = wall_ms();
        asks += 1;
        let Some(second) = date else {
            return json!({ "absent": format!("{url} answers without a Date header") });
        };
        if let Some((before, sent_before)) = prev
            && second > before
        {
            // The target's second `second` began between `sent_before` and `got` here.
            let began = (sent_before + got) / 2.0;
            return json!({
                "offset_ms": round3(second as f64 * 1e3 - began),
                "uncertainty_ms": round3((got - sent_before) / 2.0),
                "asks": asks,
                "method": "the target's HTTP Date header, asked until its second changed",
            });
        }
        prev = Some((second, sent));
        tokio::time::sleep(POLL).await;
    }
    json!({ "absent": format!("the Date header of {url} did not change in {} s", PATIENCE.as_secs_f64()) })
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_http_date() {
        // RFC 9110's own example.
        assert_eq!(
            http_date_s("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784111777)
        );
        assert_eq!(http_date_s("yesterday"), None);
    }
}
