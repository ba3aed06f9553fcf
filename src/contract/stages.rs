//! A load program (`[[load.stage]]`): one open-loop run whose offered rate follows a written
//! schedule of stages — a ramp, steps, a burst, the recovery after it, a soak — each judged on
//! its own. One plan, one seed, one arrival stream: latency counts from the intended send
//! throughout, and every record carries its stage's name.
//!
//! Shorthands expand here, so the resolved contract (and its fingerprint) lists every stage
//! as it runs: `step` becomes its holds, a `ramp` gets its starting rate written as `from`.

use serde::{Deserialize, Serialize};

use super::validate::{Problem, problem};
use super::{Arrival, LoadModel, Seconds};

/// The most stages a program may have (after `step` expands).
pub const MAX_STAGES: usize = 1000;

/// `[[load.stage]]`: one stage of a load program.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// Its name in records and reports; unique. Default: its number and shape (`2-burst`).
    #[serde(default)]
    pub name: String,
    /// `hold` (the default: a constant rate), `ramp` (linear from the previous stage's rate,
    /// or `from`, to `rate`), `step` (`steps` holds rising evenly from `from` to `rate`),
    /// `burst`, `recovery` (a hold whose recovery from the stage before it is measured) or
    /// `soak` (a long hold).
    #[serde(default)]
    pub shape: Shape,
    /// Offered requests per second (at its end, for a ramp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// `ramp` and `step`: the rate they start from (default: the previous stage's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<f64>,
    /// `step`: how many holds (each `duration` long); the last is at `rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// How long it lasts; or `requests` (an `edge`'s steps: `requests` each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Seconds>,
    /// How many arrivals it lasts; or `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Its arrival process (default: `load.arrival`, else Poisson); not `trace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
    /// Gamma arrivals' shape (as `load.burstiness`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<f64>,
    /// `closed` labels a closed-loop stage (with `concurrency`); a program runs open-loop
    /// stages only, so both are refused with what to do instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<LoadModel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// `edge`: the search ends when the bracket between the highest passing and the lowest
    /// failing step is narrower than this fraction of the failing rate (default 0.05).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<f64>,
    /// `edge`: the most steps the search takes (default 12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
}

/// `edge`'s defaults: `sweep --capacity`'s.
pub const EDGE_RESOLUTION: f64 = 0.05;
pub const EDGE_MAX_STEPS: u32 = 12;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    #[default]
    Hold,
    Ramp,
    Step,
    Burst,
    Recovery,
    Soak,
    /// The SLA edge searched within the run: steps of `requests` each, from `rate`, doubling
    /// until one misses the SLO, then bisecting (as `sweep --capacity` does).
    Edge,
}

impl Shape {
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Hold => "hold",
            Shape::Ramp => "ramp",
            Shape::Step => "step",
            Shape::Burst => "burst",
            Shape::Recovery => "recovery",
            Shape::Soak => "soak",
            Shape::Edge => "edge",
        }
    }
}

impl Stage {
    /// The offered rate at its start (a ramp's `from`) and at its end.
    pub fn rates(&self) -> (f64, f64) {
        let to = self.rate.unwrap_or(0.0);
        match self.shape {
            Shape::Ramp => (self.from.unwrap_or(to), to),
            _ => (to, to),
        }
    }

    /// Its length in seconds, when a duration bounds it.
    pub fn seconds(&self) -> Option<f64> {
        self.duration.map(Seconds::seconds)
    }

    /// Its arrivals when a duration bounds it: the integral of its rate.
    pub fn expected_requests(&self) -> Option<f64> {
        let (a, b) = self.rates();
        match (self.requests, self.seconds()) {
            (Some(n), _) => Some(n as f64),
            (None, Some(t)) => Some((a + b) / 2.0 * t),
            _ => None,
        }
    }

    /// An `edge`'s step `n` (from 1) and the hold that follows it while its requests finish:
    /// `edge.3`, `edge.3.wait`.
    pub fn step_name(&self, n: u32) -> String {
        crate::arrival::edge::step_name(&self.name, n)
    }

    pub fn wait_name(&self, n: u32) -> String {
        crate::arrival::edge::wait_name(&self.name, n)
    }

    /// `edge`: its resolution and step budget, defaults filled.
    pub fn edge_search(&self) -> (f64, u32) {
        (
            self.resolution.unwrap_or(EDGE_RESOLUTION),
            self.max_steps.unwrap_or(EDGE_MAX_STEPS),
        )
    }

    /// What it offers, in words: `4 req/s for 20 s`, `1 → 8 req/s over 30 s`.
    pub fn describe(&self) -> String {
        if self.shape == Shape::Edge {
            let (res, max) = self.edge_search();
            return format!(
                "edge search from {} req/s in steps of {} requests (to {:.0}% or {max} steps)",
                fmt_rate(self.rate.unwrap_or(0.0)),
                self.requests.unwrap_or(0),
                res * 100.0
            );
        }
        let (a, b) = self.rates();
        let rate = if a == b {
            format!("{} req/s", fmt_rate(b))
        } else {
            format!("{} → {} req/s", fmt_rate(a), fmt_rate(b))
        };
        let span = match (self.requests, self.seconds()) {
            (Some(n), _) => format!("for {n} requests"),
            (None, Some(t)) if a != b => format!("over {t} s"),
            (None, Some(t)) => format!("for {t} s"),
            _ => String::new(),
        };
        format!("{} {rate} {span}", self.shape.as_str())
    }
}

fn fmt_rate(r: f64) -> String {
    let s = format!("{r:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// A problem where a value other than `()` is expected.
fn err<T>(key: &str, msg: impl Into<String>) -> Result<T, Problem> {
    Err((key.to_owned(), msg.into()))
}

/// The key of stage `k`'s field, as errors name it (`load.stage[1].rate`).
pub fn key(k: usize, field: &str) -> String {
    if field.is_empty() {
        format!("load.stage[{k}]")
    } else {
        format!("load.stage[{k}].{field}")
    }
}

/// Checks a written program and expands it: `step` into holds, a ramp's `from` filled, every
/// stage named and its arrival process set. `arrival` is `load.arrival`, the default.
pub fn resolve(written: &[Stage], arrival: Option<Arrival>) -> Result<Vec<Stage>, Problem> {
    let mut out: Vec<Stage> = Vec::new();
    for (k, s) in written.iter().enumerate() {
        closed_stage(k, s)?;
        let mut s = s.clone();
        arrivals(k, &mut s, arrival)?;
        bound(k, &s)?;
        edge_only(k, &s, written.len())?;
        let prev = out.last().map(|p| p.rates().1);
        match s.shape {
            Shape::Ramp | Shape::Step => {
                let to = rate(k, &s, true)?;
                let from = match (s.from, prev) {
                    (Some(f), _) => check_rate(&key(k, "from"), f, true)?,
                    (None, Some(p)) => p,
                    (None, None) => {
                        return err(
                            &key(k, "shape"),
                            format!(
                                "a {} starts from the previous stage's rate, and this is the first stage: set `from`",
                                s.shape.as_str()
                            ),
                        );
                    }
                };
                if s.shape == Shape::Ramp {
                    if from == 0.0 && to == 0.0 {
                        return err(&key(k, "rate"), "a ramp from 0 to 0 sends nothing");
                    }
                    s.from = Some(from);
                    s.steps = None;
                    named(&mut s, &out);
                    out.push(s);
                } else {
                    expand_steps(k, &s, from, to, &mut out)?;
                }
            }
            _ => {
                rate(k, &s, false)?;
                only_for(
                    k,
                    &s,
                    &[("from", s.from.is_some()), ("steps", s.steps.is_some())],
                    "\"ramp\" or \"step\"",
                )?;
                if s.shape == Shape::Recovery && out.is_empty() {
                    return err(
                        &key(k, "shape"),
                        "a recovery is measured from the end of the stage before it, and this is the first stage",
                    );
                }
                named(&mut s, &out);
                out.push(s);
            }
        }
        if out.len() > MAX_STAGES {
            return err(
                &key(k, ""),
                format!("the program has more than {MAX_STAGES} stages"),
            );
        }
    }
    unique_names(written, &out)?;
    Ok(out)
}

/// An `edge` is the program's last stage (its length is what the search takes), runs steps of
/// `requests`, and alone takes `resolution` and `max_steps`.
fn edge_only(k: usize, s: &Stage, stages: usize) -> Result<(), Problem> {
    if s.shape != Shape::Edge {
        let fields = [
            ("resolution", s.resolution.is_some()),
            ("max_steps", s.max_steps.is_some()),
        ];
        return only_for(k, s, &fields, "\"edge\"");
    }
    if k + 1 != stages {
        return problem(
            &key(k, "shape"),
            "an edge search must be the program's last stage: how long it runs is what the search takes",
        );
    }
    if s.requests.is_none() {
        return problem(
            &key(k, "duration"),
            "an edge search's steps are a number of `requests` each (what a verdict at the SLO percentile needs), not a duration",
        );
    }
    if let Some(r) = s.resolution
        && !(r > 0.0 && r < 1.0)
    {
        return problem(
            &key(k, "resolution"),
            format!("= {r}: must be a fraction in (0, 1)"),
        );
    }
    if let Some(n) = s.max_steps
        && !(2..=100).contains(&n)
    {
        return problem(&key(k, "max_steps"), format!("= {n}: must be 2 to 100"));
    }
    Ok(())
}

/// Fields of other shapes (`shapes`, in words) set on stage `k`: refused, naming the first.
fn only_for(k: usize, s: &Stage, fields: &[(&str, bool)], shapes: &str) -> Result<(), Problem> {
    match fields.iter().find(|(_, set)| *set) {
        Some((field, _)) => problem(
            &key(k, field),
            format!(
                "applies to shape = {shapes} only (this stage is a {})",
                s.shape.as_str()
            ),
        ),
        None => Ok(()),
    }
}

/// A closed-loop stage: refused, with the label it needs first.
fn closed_stage(k: usize, s: &Stage) -> Result<(), Problem> {
    match (s.kind, s.concurrency) {
        (Some(LoadModel::Closed), _) => problem(
            &key(k, "kind"),
            "a load program runs open-loop stages only (closed-loop stages are not run inside one yet): measure the closed loop as its own contract with load.kind = \"closed\"",
        ),
        (_, Some(_)) => problem(
            &key(k, "concurrency"),
            "a closed stage inside an open program must be labelled kind = \"closed\" (its latency counts from the actual send, not the schedule); a program runs open-loop stages only, so measure the closed loop as its own contract",
        ),
        _ => Ok(()),
    }
}

/// Its arrival process: its own, else the load's, else Poisson; a burstiness other than 1
/// means gamma (as `load.burstiness`); no trace.
fn arrivals(k: usize, s: &mut Stage, default: Option<Arrival>) -> Result<(), Problem> {
    let b = *s.burstiness.get_or_insert(1.0);
    if !(b.is_finite() && b > 0.0) {
        return problem(&key(k, "burstiness"), "must be > 0 (1 = Poisson)");
    }
    let a = s.arrival.or(default);
    let a = match (a, b != 1.0) {
        (Some(Arrival::Trace), _) => {
            return problem(
                &key(k, "arrival"),
                "a stage draws its arrivals at a rate; a trace sets its own timing (replay it as its own contract)",
            );
        }
        (None, true) => Arrival::Gamma,
        (Some(Arrival::Poisson | Arrival::Constant), true) => {
            return problem(
                &key(k, "burstiness"),
                "applies to arrival = \"gamma\" only; set arrival = \"gamma\" or leave arrival out",
            );
        }
        (a, _) => a.unwrap_or_default(),
    };
    s.arrival = Some(a);
    Ok(())
}

/// A duration or a number of requests, not both, and neither empty; ramps and steps by
/// duration only.
fn bound(k: usize, s: &Stage) -> Result<(), Problem> {
    match (s.duration, s.requests) {
        (None, None) => problem(
            &key(k, "duration"),
            "missing: a stage lasts a `duration` or a number of `requests`",
        ),
        (Some(_), Some(_)) => problem(
            &key(k, "requests"),
            "set `duration` or `requests`, not both",
        ),
        (Some(d), None) if !(d.0.is_finite() && d.0 > 0.0) => problem(
            &key(k, "duration"),
            format!("= {}: an empty stage (must be > 0)", d.0),
        ),
        (Some(d), None) if d.seconds() > super::MAX_DURATION_S => problem(
            &key(k, "duration"),
            format!(
                "= {} s; at most {} s (a week)",
                d.seconds(),
                super::MAX_DURATION_S
            ),
        ),
        (None, Some(0)) => problem(&key(k, "requests"), "= 0: an empty stage (must be >= 1)"),
        (None, Some(_)) if matches!(s.shape, Shape::Ramp | Shape::Step) => problem(
            &key(k, "requests"),
            format!(
                "a {} changes its rate over time: give it a `duration`",
                s.shape.as_str()
            ),
        ),
        _ => Ok(()),
    }
}

/// Its `rate`, present and in range (`zero_ok`: a ramp may start or end at 0).
fn rate(k: usize, s: &Stage, zero_ok: bool) -> Result<f64, Problem> {
    match s.rate {
        None => Err((
            key(k, "rate"),
            "missing: a stage needs a rate in requests per second".to_owned(),
        )),
        Some(r) => check_rate(&key(k, "rate"), r, zero_ok),
    }
}

fn check_rate(key: &str, r: f64, zero_ok: bool) -> Result<f64, Problem> {
    let low_ok = if zero_ok { r >= 0.0 } else { r > 0.0 };
    if !(r.is_finite() && low_ok) {
        let bound = if zero_ok { ">= 0" } else { "> 0" };
        return Err((
            key.to_owned(),
            format!("= {r}: must be {bound} requests per second"),
        ));
    }
    if r > 1e6 {
        return Err((
            key.to_owned(),
            format!("= {r}: must be at most 1000000 requests per second"),
        ));
    }
    Ok(r)
}

/// `step`: `steps` holds, each `duration` long, rising evenly from `from` (not itself a step)
/// to `rate`: `from = 0, rate = 8, steps = 4` is 2, 4, 6 and 8 req/s.
fn expand_steps(
    k: usize,
    s: &Stage,
    from: f64,
    to: f64,
    out: &mut Vec<Stage>,
) -> Result<(), Problem> {
    let n = s.steps.unwrap_or(0);
    if !(1..=MAX_STAGES as u32).contains(&n) {
        return problem(
            &key(k, "steps"),
            format!("missing or out of range: a step needs 1 to {MAX_STAGES} steps"),
        );
    }
    let base = if s.name.is_empty() {
        format!("{}-step", out.len() + 1)
    } else {
        s.name.clone()
    };
    for i in 1..=n {
        let r = from + (to - from) * f64::from(i) / f64::from(n);
        if r <= 0.0 {
            return problem(
                &key(k, "from"),
                "a step's holds must each offer a rate above 0",
            );
        }
        out.push(Stage {
            name: format!("{base}-{i}"),
            shape: Shape::Hold,
            rate: Some(r),
            from: None,
            steps: None,
            ..s.clone()
        });
    }
    Ok(())
}

/// Its default name: its number in the program and its shape (`2-burst`).
fn named(s: &mut Stage, before: &[Stage]) {
    if s.name.is_empty() {
        s.name = format!("{}-{}", before.len() + 1, s.shape.as_str());
    }
}

/// Names are unique and usable in a file name.
fn unique_names(written: &[Stage], out: &[Stage]) -> Result<(), Problem> {
    for (k, s) in written.iter().enumerate() {
        if !s.name.is_empty()
            && !s
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return problem(
                &key(k, "name"),
                "use only letters, digits, '-', '_' and '.'",
            );
        }
    }
    // An edge's steps are named after it (`edge.3`): no other stage may take such a name.
    if let Some(e) = out.iter().find(|s| s.shape == Shape::Edge)
        && let Some(k) = out
            .iter()
            .position(|s| s.name.starts_with(&format!("{}.", e.name)))
    {
        return problem(
            &key(k, "name"),
            format!(
                "`{}` looks like a step of the edge search `{}` (its steps are `{}.1`, `{}.2`, …): name it otherwise",
                out[k].name, e.name, e.name, e.name
            ),
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for s in out {
        if !seen.insert(s.name.as_str()) {
            let k = written
                .iter()
                .rposition(|w| s.name.starts_with(w.name.as_str()) && !w.name.is_empty())
                .unwrap_or(0);
            return problem(
                &key(k, "name"),
                format!("`{}` names two stages: each needs its own", s.name),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn parse(s: &str) -> Result<crate::contract::Contract, String> {
        crate::contract::parse(s, Path::new("c.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn shorthands_expand_into_the_resolved_program() {
        let c = parse(
            "[[load.stage]]\nrate = 2\nrequests = 10\n\
             [[load.stage]]\nshape = \"ramp\"\nrate = 8\nduration = \"4s\"\n\
             [[load.stage]]\nname = \"climb\"\nshape = \"step\"\nfrom = 0\nrate = 8\nsteps = 4\nduration = 2\n\
             [[load.stage]]\nshape = \"burst\"\nrate = 20\nduration = 1\n\
             [[load.stage]]\nshape = \"recovery\"\nrate = 2\nduration = 5\n",
        )
        .unwrap();
        let got: Vec<(String, f64, f64)> = c
            .load
            .stage
            .iter()
            .map(|s| (s.name.clone(), s.rates().0, s.rates().1))
            .collect();
        let want = [
            ("1-hold", 2.0, 2.0),
            ("2-ramp", 2.0, 8.0),
            ("climb-1", 2.0, 2.0),
            ("climb-2", 4.0, 4.0),
            ("climb-3", 6.0, 6.0),
            ("climb-4", 8.0, 8.0),
            ("7-burst", 20.0, 20.0),
            ("8-recovery", 2.0, 2.0),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0.as_str(), g.1, g.2), w);
        }
        // The resolved contract states every stage as it runs (the ramp's start written out),
        // and reads back to the same program.
        let resolved = c.to_toml();
        assert!(resolved.contains("from = 2.0"), "{resolved}");
        assert_eq!(parse(&resolved).unwrap().load.stage, c.load.stage);
        assert!(c.load.describe().contains("a load program of 8 stages"));
    }

    #[test]
    fn bad_programs_are_named_by_file_line_and_key() {
        let cases = [
            (
                "[[load.stage]]\nshape = \"ramp\"\nrate = 4\nduration = 3\n",
                "c.toml:2: `load.stage[0].shape`: a ramp starts from the previous stage's rate, and this is the first stage",
            ),
            (
                "[[load.stage]]\nrate = 4\nduration = 3\n[[load.stage]]\nrate = 4\nduration = 0\n",
                "c.toml:6: `load.stage[1].duration`: = 0: an empty stage",
            ),
            (
                "[[load.stage]]\nrate = 4\nrequests = 0\n",
                "c.toml:3: `load.stage[0].requests`: = 0: an empty stage",
            ),
            (
                "[[load.stage]]\nrate = 4\n",
                "`load.stage[0].duration`: missing",
            ),
            (
                "[[load.stage]]\nrate = 4\nduration = 3\nrequests = 9\n",
                "`load.stage[0].requests`: set `duration` or `requests`, not both",
            ),
            (
                "[[load.stage]]\nrate = 4\nduration = 3\n[[load.stage]]\nconcurrency = 8\nduration = 3\n",
                "c.toml:5: `load.stage[1].concurrency`: a closed stage inside an open program must be labelled kind = \"closed\"",
            ),
            (
                "[[load.stage]]\nkind = \"closed\"\nconcurrency = 8\nduration = 3\n",
                "`load.stage[0].kind`: a load program runs open-loop stages only",
            ),
            (
                "[[load.stage]]\nshape = \"recovery\"\nrate = 1\nduration = 3\n",
                "`load.stage[0].shape`: a recovery is measured from the end of the stage before it",
            ),
            (
                "[[load.stage]]\nname = \"a\"\nrate = 1\nduration = 3\n[[load.stage]]\nname = \"a\"\nrate = 2\nduration = 3\n",
                "`load.stage[1].name`: `a` names two stages",
            ),
            (
                "[load]\nrate = 3\n[[load.stage]]\nrate = 1\nduration = 3\n",
                "c.toml:2: `load.rate`: the stages ([[load.stage]]) set the load's rate",
            ),
            (
                "[[load.stage]]\nshape = \"step\"\nfrom = 1\nrate = 4\nduration = 3\n",
                "`load.stage[0].steps`: missing or out of range",
            ),
            (
                "[[load.stage]]\nrate = 4\nduration = 3\narrival = \"trace\"\n",
                "`load.stage[0].arrival`: a stage draws its arrivals at a rate",
            ),
            (
                "[[load.stage]]\nrate = -1\nduration = 3\n",
                "`load.stage[0].rate`: = -1: must be > 0",
            ),
            // An edge search: last, by requests, with an SLO, on one client.
            (
                "[[load.stage]]\nshape = \"edge\"\nrate = 4\nrequests = 50\n[[load.stage]]\nrate = 1\nduration = 3\n[slo]\nttft_ms = 100\n",
                "c.toml:2: `load.stage[0].shape`: an edge search must be the program's last stage",
            ),
            (
                "[[load.stage]]\nshape = \"edge\"\nrate = 4\nduration = 30\n[slo]\nttft_ms = 100\n",
                "`load.stage[0].duration`: an edge search's steps are a number of `requests` each",
            ),
            (
                "[[load.stage]]\nshape = \"edge\"\nrate = 4\nrequests = 50\n",
                "c.toml:2: `load.stage[0].shape`: an edge search finds the highest rate that meets the SLO: add an [slo]",
            ),
            (
                "[[load.stage]]\nshape = \"edge\"\nrate = 4\nrequests = 50\nresolution = 1.5\n[slo]\nttft_ms = 100\n",
                "c.toml:5: `load.stage[0].resolution`: = 1.5: must be a fraction in (0, 1)",
            ),
            (
                "[[load.stage]]\nrate = 4\nrequests = 50\nmax_steps = 5\n",
                "`load.stage[0].max_steps`: applies to shape = \"edge\" only",
            ),
            (
                "[[load.stage]]\nname = \"e.1\"\nrate = 4\nrequests = 5\n[[load.stage]]\nname = \"e\"\nshape = \"edge\"\nrate = 4\nrequests = 50\n[slo]\nttft_ms = 100\n",
                "`load.stage[0].name`: `e.1` looks like a step of the edge search `e`",
            ),
            (
                "[workload.sessions]\nturns = { dist = \"fixed\", value = 2 }\n[[load.stage]]\nshape = \"edge\"\nrate = 4\nrequests = 50\n[slo]\nttft_ms = 100\n",
                "`load.stage[0].shape`: an edge search judges each step as its requests finish, and a session's turns outlive it",
            ),
        ];
        for (src, want) in cases {
            let e = parse(src).unwrap_err();
            assert!(e.contains(want), "want {want:?} in {e:?}");
        }
    }
}
