//! Server metrics: the target's Prometheus `/metrics`, scraped before the load starts, at an
//! interval while it runs, and after it stops. Each scrape is appended to `metrics.jsonl` as it
//! is taken (an interrupted run keeps what was scraped); the analysis derives queue time,
//! running/waiting requests and KV-cache usage from those lines, never from the network.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::Unavailable;

/// One scrape as kept in `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scrape {
    /// Seconds since the run's epoch (the same clock as the records).
    pub t_s: f64,
    /// `before`, `during` or `after` the load; `steady_start` and `steady_end` when taken at
    /// the steady window's edges (the first and last steady request's send), which the
    /// server's figures over the window are differenced between.
    pub when: String,
    /// The page scraped, where one file keeps several (telemetry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `name{label="value",…}` → value. Histogram buckets are kept in every scrape but those
    /// `during` the load (the window's edges, before and after). NaN and the infinities are
    /// kept as Prometheus spells them (`"NaN"`, `"+Inf"`, `"-Inf"`): JSON has no number for
    /// them, and a `null` in their place once made a whole bundle unreadable.
    #[serde(with = "values")]
    pub series: BTreeMap<String, f64>,
    /// Set on a scrape `during` the load once its file passed half its budget
    /// ([`FILE_BUDGET`]): from this scrape on, one interval's tick in this many was scraped.
    /// 0 on the first scrape after the periodic ones stopped, the rest of the budget kept for
    /// the edges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinned: Option<u64>,
}

/// A scrape's values, lossless in JSON: finite ones as numbers, the rest as the strings the
/// exposition format uses. `null` (what bundles before this wrote for NaN) reads back as NaN.
mod values {
    use std::collections::BTreeMap;

    use serde::de::{self, MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        let mut out = s.serialize_map(Some(m.len()))?;
        for (k, v) in m {
            match *v {
                v if v.is_finite() => out.serialize_entry(k, &v)?,
                v if v.is_nan() => out.serialize_entry(k, "NaN")?,
                v if v > 0.0 => out.serialize_entry(k, "+Inf")?,
                _ => out.serialize_entry(k, "-Inf")?,
            }
        }
        out.end()
    }

    /// One value: a number, a special value's name, or null.
    struct Value(f64);

    impl<'de> de::Deserialize<'de> for Value {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Value;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a number, \"NaN\", \"+Inf\", \"-Inf\" or null")
                }
                fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
                    Ok(Value(v))
                }
                fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
                    Ok(Value(v as f64))
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
                    Ok(Value(v as f64))
                }
                fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
                    Ok(Value(f64::NAN))
                }
                fn visit_none<E: de::Error>(self) -> Result<Value, E> {
                    Ok(Value(f64::NAN))
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
                    match v {
                        "NaN" => Ok(Value(f64::NAN)),
                        "+Inf" | "Inf" => Ok(Value(f64::INFINITY)),
                        "-Inf" => Ok(Value(f64::NEG_INFINITY)),
                        _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                    }
                }
            }
            d.deserialize_any(V)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        struct M;
        impl<'de> Visitor<'de> for M {
            type Value = BTreeMap<String, f64>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of series to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                let mut m = BTreeMap::new();
                while let Some((k, Value(v))) = a.next_entry::<String, Value>()? {
                    m.insert(k, v);
                }
                Ok(m)
            }
        }
        d.deserialize_map(M)
    }
}

/// At most this many series are kept per scrape (an engine with per-LoRA or per-path labels can
/// publish thousands).
const MAX_SERIES: usize = 5000;

/// One sample line: metric name, labels in order, value.
pub type Sample = (String, Vec<(String, String)>, f64);

/// Parses the Prometheus text exposition format (version 0.0.4) into `(name, labels, value)`.
///
/// Hand-written on purpose: the crate of the field, `prometheus-parse` 0.2, matches metric names
/// with `\w+` and so drops every `vllm:`/`sglang:`/`llamacpp:` series (the colon is legal in the
/// format and is what these engines use), and splits label values on commas. The grammar is
/// small: `name[{label="escaped value",…}] value [timestamp]`, `#` lines are comments.
pub fn parse(text: &str) -> Result<Vec<Sample>, Unavailable> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |what: &str| {
            Unavailable::Malformed(format!("line {}: {what}: `{}`", i + 1, truncate(line)))
        };
        let name_end = line
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(line.len());
        if name_end == 0 {
            return Err(err("no metric name"));
        }
        let name = &line[..name_end];
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(r) = rest.strip_prefix('{') {
            rest = r;
            loop {
                rest = rest.trim_start_matches([' ', ',']);
                if let Some(r) = rest.strip_prefix('}') {
                    rest = r;
                    break;
                }
                let eq = rest.find('=').ok_or_else(|| err("label without `=`"))?;
                let key = rest[..eq].trim().to_owned();
                rest = rest[eq + 1..]
                    .trim_start()
                    .strip_prefix('"')
                    .ok_or_else(|| err("label value not quoted"))?;
                let mut value = String::new();
                let mut chars = rest.char_indices();
                let close = loop {
                    match chars.next() {
                        None => return Err(err("unterminated label value")),
                        Some((j, '"')) => break j,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, c)) => value.push(c),
                            None => return Err(err("unterminated label value")),
                        },
                        Some((_, c)) => value.push(c),
                    }
                };
                rest = &rest[close + 1..];
                labels.push((key, value));
            }
        }
        let token = rest
            .split_whitespace()
            .next()
            .ok_or_else(|| err("no value"))?;
        let value = match token {
            "+Inf" | "Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            t => t.parse::<f64>().map_err(|_| err("value is not a number"))?,
        };
        out.push((name.to_owned(), labels, value));
    }
    Ok(out)
}

fn truncate(s: &str) -> String {
    s.chars().take(120).collect()
}

/// The canonical key of a series: `name{a="x",b="y"}` with labels sorted.
pub fn key(name: &str, labels: &[(String, String)]) -> String {
    if labels.is_empty() {
        return name.to_owned();
    }
    let mut l: Vec<_> = labels.iter().collect();
    l.sort();
    let inner: Vec<String> = l
        .iter()
        .map(|(k, v)| format!("{k}={}", serde_json::Value::String(v.clone())))
        .collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// Splits a canonical key back into its name and one label's value.
pub fn label<'a>(key: &'a str, label: &str) -> Option<&'a str> {
    let inner = key.split_once('{')?.1;
    let pat = format!("{label}=\"");
    let start = inner.find(&pat)? + pat.len();
    let end = inner[start..].find('"')? + start;
    Some(&inner[start..end])
}

pub fn name(key: &str) -> &str {
    key.split_once('{').map_or(key, |(n, _)| n)
}

/// Scrapes Prometheus pages in the background until stopped: the target's `/metrics`, or the
/// accelerators' telemetry pages, all appended to one file.
pub struct Scraper {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    marks: tokio::sync::mpsc::UnboundedSender<&'static str>,
}

/// Asks a scraper for a scrape now, tagged with a moment of the run (`steady_start`,
/// `steady_end`): the driver marks the steady window's edges as it sends them.
#[derive(Debug, Clone)]
pub struct Marker(tokio::sync::mpsc::UnboundedSender<&'static str>);

impl Marker {
    pub fn mark(&self, when: &'static str) {
        let _ = self.0.send(when);
    }
}

/// A page to scrape.
pub struct Endpoint {
    pub url: String,
    /// Sent as a bearer token (the target's key, to the target's own `/metrics` only).
    pub key: Option<String>,
    /// Each scrape is tagged with its page (telemetry: several pages share one file).
    pub tagged: bool,
}

struct Target {
    http: reqwest::Client,
    endpoint: Endpoint,
    epoch: Instant,
}

impl Target {
    async fn scrape(&self, when: &str) -> Result<Scrape, Unavailable> {
        let url = &self.endpoint.url;
        let mut req = self.http.get(url).timeout(Duration::from_secs(5));
        if let Some(k) = &self.endpoint.key {
            req = req.bearer_auth(k);
        }
        let sent = self.epoch.elapsed().as_secs_f64();
        let resp = req
            .send()
            .await
            .map_err(|e| Unavailable::Unanswered(crate::text::error_chain(&e)))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(Unavailable::Unanswered(format!(
                "{url} answered HTTP {}",
                status.as_u16()
            )));
        }
        let body = super::body_capped(resp, MAX_SCRAPE_BYTES)
            .await
            .map_err(|e| Unavailable::Unanswered(format!("{url}: {e}")))?;
        // A tagged (telemetry) page is timed at the middle of its round trip: the exporter
        // read its counters somewhere inside it, and energy is interpolated on these times.
        let t_s = match self.endpoint.tagged {
            true => (sent + self.epoch.elapsed().as_secs_f64()) / 2.0,
            false => sent,
        };
        let text = String::from_utf8_lossy(&body);
        let parsed = parse(&text).map_err(|e| Unavailable::Malformed(format!("{url}: {e}")))?;
        let mut series = BTreeMap::new();
        for (name, labels, value) in parsed {
            if when == "during" && name.ends_with("_bucket") {
                continue;
            }
            if series.len() >= MAX_SERIES {
                break;
            }
            series.insert(key(&name, &labels), value);
        }
        Ok(Scrape {
            t_s,
            when: when.to_owned(),
            source: self.endpoint.tagged.then(|| url.clone()),
            series,
            thinned: None,
        })
    }
}

/// One scrape of `url` now (an untagged page, timed on `epoch`), outside any scraper.
pub async fn scrape_once(
    http: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    epoch: Instant,
) -> Result<Scrape, Unavailable> {
    Target {
        http: http.clone(),
        endpoint: Endpoint {
            url: url.to_owned(),
            key: key.map(str::to_owned),
            tagged: false,
        },
        epoch,
    }
    .scrape("after")
    .await
}

/// The largest `/metrics` page read: vLLM's is about 100 KB.
const MAX_SCRAPE_BYTES: usize = 16 << 20;

/// What one scrape file may hold of the scrapes taken `during` the load: a page of 12 MB every
/// 50 ms once wrote 828 MB in 8 s, and reading it back took 1.7 GB. Past half of it, the
/// periodic scrapes are thinned, every second tick, then every fourth past three quarters, and
/// so on, so a run of any length keeps scrapes from its whole span within the budget; the
/// scrapes at the steady window's edges, before and after the load are always kept. Each
/// thinned scrape says so (`thinned`), and the report warns.
pub const FILE_BUDGET: u64 = 64 << 20;

/// The thinning of one file's periodic scrapes (see [`FILE_BUDGET`]).
struct Thinning {
    /// Bytes written to the file, every scrape counted (the edges' too).
    written: u64,
    /// The most bytes one tick wrote (all its pages).
    largest: u64,
    /// One tick in this many is scraped.
    every: u64,
    ticks: u64,
    /// The periodic scrapes stopped: what is left of the budget is the edges' (the steady
    /// window's two and the after scrape), each as large as the largest tick so far.
    stopped: bool,
    /// A scrape written since they stopped says so.
    told: bool,
}

impl Thinning {
    fn new() -> Self {
        Thinning {
            written: 0,
            largest: 0,
            every: 1,
            ticks: 0,
            stopped: false,
            told: false,
        }
    }

    /// Marks a scrape about to be written: a periodic one with the thinning in force, and
    /// the first one after the periodic scrapes stopped with 0.
    fn mark(&mut self, s: &mut Scrape) {
        if s.when == "during" && self.every > 1 {
            s.thinned = Some(self.every);
        }
        if self.stopped && !std::mem::replace(&mut self.told, true) {
            s.thinned = Some(0);
        }
    }

    /// Whether this interval's tick is scraped.
    fn take(&mut self) -> bool {
        let t = self.ticks;
        self.ticks += 1;
        if self.written + 4 * self.largest > FILE_BUDGET {
            self.stopped = true;
        }
        !self.stopped && t % self.every == 0
    }

    /// `n` more bytes written by one tick: past `1 − 1/(2·every)` of the budget, ticks are
    /// thinned twice as much, so each halving of the rate has half the room of the one before.
    fn wrote(&mut self, n: u64) {
        self.written += n;
        self.largest = self.largest.max(n);
        while self.every < 1 << 40 && self.written >= FILE_BUDGET - FILE_BUDGET / (2 * self.every) {
            self.every *= 2;
        }
    }
}

/// Each endpoint scraped once before the run: the ones that answered with series, their first
/// scrapes, and why each other one is left out.
async fn first_scrapes(
    http: reqwest::Client,
    endpoints: Vec<Endpoint>,
    epoch: Instant,
) -> (Vec<Target>, Vec<Scrape>, Vec<(String, Unavailable)>) {
    let mut targets = Vec::new();
    let mut firsts = Vec::new();
    let mut absent = Vec::new();
    for endpoint in endpoints {
        let target = Target {
            http: http.clone(),
            endpoint,
            epoch,
        };
        match target.scrape("before").await {
            Ok(s) if s.series.is_empty() => absent.push((
                target.endpoint.url.clone(),
                Unavailable::Malformed(format!("{} lists no series", target.endpoint.url)),
            )),
            Ok(s) => {
                firsts.push(s);
                targets.push(target);
            }
            Err(why) => absent.push((target.endpoint.url.clone(), why)),
        }
    }
    (targets, firsts, absent)
}

/// Appends a scrape as one line; returns the bytes written.
fn append(file: &mut std::fs::File, s: &Scrape) -> std::io::Result<u64> {
    let line = serde_json::to_string(s)?;
    let line = crate::secrets::redact(&line);
    file.write_all(line.as_bytes())?;
    file.write_all(b"\n")?;
    Ok(line.len() as u64 + 1)
}

impl Scraper {
    /// Takes the target's `before` scrape and starts scraping its `/metrics` every `interval`.
    /// When the target has no usable `/metrics`, returns why instead (recorded, never fatal).
    pub async fn start(
        http: reqwest::Client,
        base: &str,
        key: Option<String>,
        interval: Duration,
        epoch: Instant,
        path: &Path,
    ) -> Result<Scraper, Unavailable> {
        let endpoint = Endpoint {
            url: format!("{}/metrics", base.trim_end_matches('/')),
            key,
            tagged: false,
        };
        let (scraper, mut absent) =
            Scraper::start_all(http, vec![endpoint], interval, epoch, path).await;
        scraper.ok_or_else(|| {
            absent.pop().map_or_else(
                || Unavailable::Unanswered("no page answered".to_owned()),
                |a| a.1,
            )
        })
    }

    /// Takes each page's `before` scrape and scrapes those that answered every `interval`.
    /// Returns the scraper (none when no page answered) and, for each page that did not, why.
    pub async fn start_all(
        http: reqwest::Client,
        endpoints: Vec<Endpoint>,
        interval: Duration,
        epoch: Instant,
        path: &Path,
    ) -> (Option<Scraper>, Vec<(String, Unavailable)>) {
        let (targets, firsts, mut absent) = first_scrapes(http, endpoints, epoch).await;
        if targets.is_empty() {
            return (None, absent);
        }
        // The file and the first scrapes in it, or why not (then no page is scraped).
        let mut before_bytes = 0;
        let opened = std::fs::File::create(path).and_then(|mut f| {
            for s in &firsts {
                before_bytes += append(&mut f, s)?;
            }
            Ok(f)
        });
        let mut file = match opened {
            Ok(f) => f,
            Err(e) => {
                let why = Unavailable::File(format!("{}: {e}", path.display()));
                absent.extend(
                    targets
                        .iter()
                        .map(|t| (t.endpoint.url.clone(), why.clone())),
                );
                return (None, absent);
            }
        };
        let stop = CancellationToken::new();
        let (marks, mut marked) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
        let task = tokio::spawn({
            let stop = stop.clone();
            async move {
                let mut tick = tokio::time::interval(interval);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick.tick().await;
                let all = |when: &'static str| {
                    futures_util::future::join_all(targets.iter().map(move |t| t.scrape(when)))
                };
                let mut thinning = Thinning::new();
                // The first scrapes (before the run) count toward the budget too.
                thinning.wrote(before_bytes);
                loop {
                    let when = tokio::select! {
                        // A mark first: it times a window's edge.
                        biased;
                        _ = stop.cancelled() => break,
                        Some(m) = marked.recv() => m,
                        _ = tick.tick() => "during",
                    };
                    if when == "during" && !thinning.take() {
                        continue;
                    }
                    // A scrape that fails mid-run is skipped: the gap shows in t_s.
                    let mut tick = 0;
                    for mut s in all(when).await.into_iter().flatten() {
                        thinning.mark(&mut s);
                        tick += append(&mut file, &s)?;
                    }
                    thinning.wrote(tick);
                }
                for mut s in all("after").await.into_iter().flatten() {
                    thinning.mark(&mut s);
                    append(&mut file, &s)?;
                }
                file.flush()
            }
        });
        (Some(Scraper { stop, task, marks }), absent)
    }

    /// A handle that asks for a scrape now, tagged (`steady_start`, `steady_end`).
    pub fn marker(&self) -> Marker {
        Marker(self.marks.clone())
    }

    /// Stops scraping after one last `after` scrape.
    pub async fn finish(self) -> std::io::Result<()> {
        self.stop.cancel();
        self.task.await.unwrap_or(Ok(()))
    }
}

/// Reads `metrics.jsonl`.
/// The scrapes of a file that may not exist (a run that scraped nothing has none): none then,
/// and any other failure named with the file and line.
pub fn read_present(path: &Path) -> Result<Vec<Scrape>, Unavailable> {
    if path.exists() {
        read(path)
    } else {
        Ok(Vec::new())
    }
}

pub fn read(path: &Path) -> Result<Vec<Scrape>, Unavailable> {
    // Capped like every file goodput reads, and read a line at a time: a symlink to a device,
    // or a file past the limit, is an error naming it, never memory without bound, and only
    // the scrapes are held, never the file's text beside them.
    let mut out = Vec::new();
    crate::text::each_line_capped(path, crate::text::MAX_FILE_BYTES, |l| {
        out.push(serde_json::from_str(l).map_err(|e| e.to_string())?);
        Ok(())
    })
    .map_err(Unavailable::File)?;
    Ok(out)
}

/// What a report must say of thinned scrapes (see [`FILE_BUDGET`]): from when, and to what,
/// for the file `name` holding `scrapes`.
pub fn thinning_warning(name: &str, scrapes: &[Scrape]) -> Option<String> {
    let budget = crate::text::human_bytes(FILE_BUDGET);
    let thinned = |s: &&Scrape| s.thinned.is_some_and(|n| n > 0);
    let stopped = scrapes
        .iter()
        .find(|s| s.thinned == Some(0))
        .map(|s| {
            format!(
                "; its scrapes during the load stopped before {:.1} s, the rest of the budget kept for the steady window's edges and the after scrape (pages of this size leave room for few)",
                s.t_s
            )
        });
    let Some(first) = scrapes.iter().find(thinned) else {
        return stopped.map(|w| {
            format!("{name} reached its {budget} budget{w}; server figures averaged over the load rest on fewer scrapes")
        });
    };
    let last = scrapes.iter().rfind(thinned)?;
    Some(format!(
        "{name} passed half its {budget} budget {:.1} s into the run: from then on its scrapes during the load were thinned, to one interval in {} by the last one kept, at {:.1} s (the steady window's edges, before and after were all kept){}; server figures averaged over the load rest on fewer scrapes",
        first.t_s,
        last.thinned.unwrap_or(1),
        last.t_s,
        stopped.unwrap_or_default()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #46: NaN and the infinities survive the bundle (a summary with no observations
    /// publishes NaN), and a bundle written before, with `null` for NaN, still reads.
    #[test]
    fn special_values_survive_the_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let s = Scrape {
            t_s: 1.5,
            when: "during".into(),
            source: None,
            series: parse("a NaN\nb +Inf\nc -Inf\nd 2.5\n")
                .unwrap()
                .into_iter()
                .map(|(n, l, v)| (key(&n, &l), v))
                .collect(),
            thinned: None,
        };
        let line = serde_json::to_string(&s).unwrap();
        assert!(
            line.contains(r#""a":"NaN""#) && line.contains(r#""b":"+Inf""#),
            "{line}"
        );
        std::fs::write(
            &path,
            format!(
                "{line}\n{}\n",
                r#"{"t_s":2,"when":"after","series":{"a":null,"d":1}}"#
            ),
        )
        .unwrap();
        let back = read(&path).unwrap();
        assert!(back[0].series["a"].is_nan());
        assert_eq!(back[0].series["b"], f64::INFINITY);
        assert_eq!(back[0].series["c"], f64::NEG_INFINITY);
        assert_eq!(back[0].series["d"], 2.5);
        assert!(back[1].series["a"].is_nan());
        std::fs::write(&path, r#"{"t_s":2,"when":"after","series":{"a":"lots"}}"#).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(
            err.contains("metrics.jsonl:1") && err.contains("lots"),
            "{err}"
        );
    }

    #[test]
    fn parses_colon_names_escaped_labels_and_special_values() {
        let text = "# HELP vllm:num_requests_running Running.\n\
                    # TYPE vllm:num_requests_running gauge\n\
                    vllm:num_requests_running{engine=\"0\",model_name=\"a,b \\\"q\\\" }\"} 3\n\
                    tgi_queue_size 0 1712345678000\n\
                    x_bucket{le=\"+Inf\"} +Inf\n\
                    \n\
                    y NaN\n";
        let p = parse(text).unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!(p[0].0, "vllm:num_requests_running");
        assert_eq!(
            p[0].1,
            vec![
                ("engine".into(), "0".into()),
                ("model_name".into(), "a,b \"q\" }".into())
            ]
        );
        assert_eq!(p[0].2, 3.0);
        assert_eq!(p[1], ("tgi_queue_size".into(), vec![], 0.0));
        assert!(p[2].2.is_infinite());
        assert!(p[3].2.is_nan());
        let k = key(&p[0].0, &p[0].1);
        assert_eq!(name(&k), "vllm:num_requests_running");
        assert_eq!(label(&k, "engine"), Some("0"));
    }

    #[test]
    fn malformed_lines_name_their_line() {
        let e = parse("ok 1\nbad{le=\"1\" 2\n").unwrap_err().to_string();
        assert!(e.starts_with("line 2:"), "{e}");
        let e = parse("ok 1\nok2 one\n").unwrap_err().to_string();
        assert!(e.contains("line 2: value is not a number"), "{e}");
    }

    #[test]
    fn parses_what_the_simulator_publishes() {
        let mut m = crate::sim::metrics::MetricsState::default();
        m.queue_time.observe(0.003);
        m.running = 7;
        let p = parse(&m.render("sim")).unwrap();
        assert!(
            p.iter()
                .any(|(n, _, v)| n == "vllm:num_requests_running" && *v == 7.0)
        );
        assert!(
            p.iter()
                .any(|(n, l, v)| n == "vllm:request_queue_time_seconds_bucket"
                    && l.iter().any(|(k, x)| k == "le" && x == "0.005")
                    && *v == 1.0)
        );
    }

    /// Issue #46: a long run's periodic scrapes stay within the file's budget, and what is
    /// kept still spans the run, thinned ever more as the file fills.
    #[test]
    fn thinning_keeps_a_long_run_within_its_budget_across_its_span() {
        // A vLLM-sized page (30 KB a line) every second, for ten hours.
        let (line, ticks) = (30_000u64, 36_000u64);
        let mut t = Thinning::new();
        let mut kept = Vec::new();
        for tick in 0..ticks {
            if t.take() {
                kept.push(tick);
                t.wrote(line);
            }
        }
        // Room is left for the edge scrapes (three of a tick's size, and one more).
        assert!(t.written + 3 * line <= FILE_BUDGET, "{} bytes", t.written);
        assert!(t.stopped);
        // Unthinned until half the budget: the first ~1,100 ticks all kept.
        let half = FILE_BUDGET / 2 / line;
        assert_eq!(kept[..half as usize], (0..half).collect::<Vec<_>>()[..]);
        // Kept scrapes reach hours in, each stretch sparser than the one before.
        let last = *kept.last().unwrap();
        assert!(last > 2 * 3600, "the last kept scrape is at tick {last}");
        assert!(t.every >= 512, "thinned to 1 in {}", t.every);
        // A short run is never thinned.
        let mut short = Thinning::new();
        for _ in 0..600 {
            assert!(short.take());
            short.wrote(line);
        }
        assert_eq!(short.every, 1);
    }

    /// The warning says from when and to what a file was thinned; none when it was not.
    #[test]
    fn a_thinned_file_is_named_in_a_warning() {
        let at = |t_s: f64, thinned: Option<u64>| Scrape {
            t_s,
            when: "during".into(),
            source: None,
            series: BTreeMap::new(),
            thinned,
        };
        assert_eq!(thinning_warning("metrics.jsonl", &[at(1.0, None)]), None);
        let w = thinning_warning(
            "metrics.jsonl",
            &[at(1.0, None), at(1200.5, Some(2)), at(2400.0, Some(8))],
        )
        .unwrap();
        assert!(
            w.contains("metrics.jsonl passed half its 64 MiB budget 1200.5 s"),
            "{w}"
        );
        assert!(
            w.contains("one interval in 8 by the last one kept, at 2400.0 s"),
            "{w}"
        );
    }
}
