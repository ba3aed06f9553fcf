//! The efficiency frontier (issue #28): energy from DCGM-shaped telemetry and cost from a
//! declared price, over the steady window. Held against the simulator's ground-truth energy
//! (its power model integrated over its own step timeline), the cost recomputed exactly from
//! the bundle's own numbers, the same records re-analysed without telemetry or price (the
//! figures absent with reasons, nothing else changed), an unreachable telemetry page, a
//! sweep's frontier, and the contract errors a user can make.

use crate::common;

use std::sync::{Arc, Mutex};

use goodput::analyze::{Context, summarize};
use goodput::sim::SimConfig;

use common::{parse, run_in, sim};

fn contract(url: &str, extra: &str) -> String {
    format!(
        r#"name = "efficiency"
[target]
url = "{url}"
{extra}
[workload]
seed = 5
input_tokens = {{ dist = "fixed", value = 200 }}
output_tokens = {{ dist = "uniform", min = 40, max = 120 }}
[load]
kind = "open"
rate = 30
requests = 240
[warmup]
requests = 30
[slo]
ttft_ms = 150
tpot_ms = 25
"#
    )
}

const PRICED: &str = r#"[target.telemetry]
urls = ["/telemetry"]
interval = "200ms"
[target.declared]
price_per_hour = 6.5
currency = "USD"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn energy_matches_the_simulators_truth_and_cost_is_exact() {
    let mut cfg = SimConfig::default();
    cfg.power.gpus = 2;
    let server = sim(cfg).await;
    let dir = tempfile::tempdir().unwrap();
    let c = parse(&contract(&server.base_url(), PRICED));
    let r = run_in(c.clone(), dir.path()).await;
    let e = r.summary.efficiency.clone().expect("an efficiency section");
    let energy = e.energy.clone().unwrap_or_else(|| panic!("{e:?}"));
    assert!(energy.method.contains("counters"), "{}", energy.method);
    assert_eq!(e.accelerators, Some(2), "{}", e.accelerators_basis);
    assert_eq!(e.devices.len(), 2);

    // The run's clock against the simulator's: each request's arrival there less its send
    // here (loopback: well under a millisecond apart).
    let truth = common::truth_by_id(&server);
    let offsets: Vec<f64> = r
        .records
        .iter()
        .filter_map(|rec| {
            let g = truth.get(&rec.request_id)?;
            Some(g.arrival_us as f64 - rec.sent_us? as f64)
        })
        .collect();
    assert!(offsets.len() > 200, "{} requests matched", offsets.len());
    let offset_s = common::median(offsets) / 1e6;
    let truth_j = server.energy_between(e.from_s + offset_s, e.to_s + offset_s);
    let err = (energy.joules - truth_j).abs() / truth_j;
    println!(
        "energy {:.1} J, simulator's truth {truth_j:.1} J ({:.3}% apart), bounds {:?}, {:.0} W mean",
        energy.joules,
        err * 100.0,
        energy.bounds_joules,
        energy.mean_watts
    );
    assert!(
        err < 0.02,
        "energy {} J vs truth {truth_j} J",
        energy.joules
    );
    let [lo, hi] = energy.bounds_joules.expect("counters give bounds");
    assert!(lo <= truth_j && truth_j <= hi, "{lo}..{hi} vs {truth_j}");
    // Per token: the same relation over the window's output tokens.
    let per_token = e.value("joules_per_output_token").unwrap();
    let truth_per_token = truth_j / e.output_tokens;
    assert!((per_token - truth_per_token).abs() / truth_per_token < 0.02);
    // Power rises with the batch: busier than idle (100 W a GPU), below the peak (700 W).
    assert!(energy.mean_watts > 2.0 * 100.0 && energy.mean_watts < 2.03 * 700.0);
    assert!(
        e.ignored_metrics
            .contains(&"DCGM_FI_DEV_GPU_TEMP".to_owned())
    );

    // Cost, exactly, from the numbers summary.json itself keeps.
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.bundle.path("summary.json")).unwrap())
            .unwrap();
    let k = &kept["efficiency"];
    let figure = |key: &str| {
        k["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["key"] == key)
            .and_then(|f| f["value"].as_f64())
            .unwrap_or_else(|| panic!("{key} absent: {k}"))
    };
    let (price, window) = (
        k["price_per_hour"].as_f64().unwrap(),
        k["window_s"].as_f64().unwrap(),
    );
    let tokens = k["input_tokens"].as_f64().unwrap() + k["output_tokens"].as_f64().unwrap();
    assert_eq!(
        figure("cost_per_m_tokens"),
        price * window / 3600.0 / tokens * 1e6
    );
    let slo_tokens = k["slo_output_tokens"].as_f64().unwrap();
    assert!(slo_tokens > 0.0 && slo_tokens <= k["output_tokens"].as_f64().unwrap());
    assert_eq!(
        figure("cost_per_m_slo_output_tokens"),
        price * window / 3600.0 / slo_tokens * 1e6
    );
    assert_eq!(window, r.summary.steady.window_s);

    // The same records without telemetry or price: those figures absent with their reasons,
    // and every other part of the summary as it was.
    let mut bare = c.clone();
    bare.target.telemetry = Default::default();
    bare.target.declared.price_per_hour = None;
    bare.target.declared.currency = None;
    let scrapes = goodput::env::prom::read(&r.bundle.path("metrics.jsonl")).unwrap();
    let plain = summarize(
        &bare,
        &r.records,
        &Context {
            scrapes: &scrapes,
            ..Context::default()
        },
    );
    let pe = plain.efficiency.clone().unwrap();
    assert!(pe.energy.is_none());
    assert!(
        pe.energy_absent
            .as_deref()
            .unwrap()
            .starts_with("no energy measurement"),
        "{:?}",
        pe.energy_absent
    );
    for key in [
        "joules_per_output_token",
        "goodput_per_kw",
        "output_tps_per_accelerator",
    ] {
        let f = pe.figure(key).unwrap();
        assert!(f.value.is_none(), "{key}: {f:?}");
        assert!(!f.basis.is_empty());
    }
    let cost = pe.figure("cost_per_m_tokens").unwrap();
    assert!(
        cost.value.is_none() && cost.basis.starts_with("no price"),
        "{cost:?}"
    );
    let full = summarize(
        &c,
        &r.records,
        &Context {
            scrapes: &scrapes,
            ..Context::default()
        },
    );
    let without = |s: &goodput::analyze::Summary| {
        let mut v = serde_json::to_value(s).unwrap();
        v.as_object_mut().unwrap().remove("efficiency");
        v
    };
    assert_eq!(
        without(&full),
        without(&plain),
        "only the efficiency section differs"
    );
    assert_eq!(c.fingerprints(), bare.fingerprints());
}

/// Records each warning with how many progress reports came before it.
#[derive(Debug, Default)]
struct Told {
    events: Mutex<Vec<String>>,
}

impl goodput::run::Watch for Told {
    fn progress(&self, _p: &goodput::run::Progress) {
        self.events.lock().unwrap().push("progress".into());
    }
    fn warn(&self, m: &str) {
        self.events.lock().unwrap().push(format!("warn: {m}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_telemetry_page_is_warned_of_before_the_load_and_the_run_goes_on() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/metrics", closed.local_addr().unwrap());
    drop(closed);
    let c = parse(&format!(
        r#"name = "no-telemetry"
[target.telemetry]
urls = ["{dead}", "/telemetry"]
[target.simulator]
decode_base_ms = 2
[load]
kind = "open"
rate = 40
requests = 40
[measurement]
stop_when_decided = false
"#
    ));
    // Every request runs to its end: on a machine busy with other tests the run could
    // otherwise judge itself overloaded and abandon the requests in flight, which is not
    // what this test is about (a dead page must cost no request).
    let dir = tempfile::tempdir().unwrap();
    let told = Arc::new(Told::default());
    let r = common::try_run_watched(c, dir.path(), told.clone())
        .await
        .expect("the run goes on without the page");
    let events = told.events.lock().unwrap().clone();
    let at = events
        .iter()
        .position(|e| e.starts_with("warn: telemetry page") && e.contains(&dead))
        .unwrap_or_else(|| panic!("{events:?}"));
    assert!(
        !events[..at].iter().any(|e| e == "progress"),
        "warned before the load: {events:?}"
    );
    let failed: Vec<_> = r
        .records
        .iter()
        .filter(|r| !r.is_ok())
        .map(|r| (r.index, r.outcome, r.error.clone()))
        .collect();
    assert!(failed.is_empty(), "every request measured: {failed:?}");
    let e = r.summary.efficiency.clone().unwrap();
    // The other page (the embedded simulator's) still measures; the dead one is named.
    assert!(e.energy.is_some(), "{:?}", e.energy_absent);
    assert!(
        e.notes
            .iter()
            .any(|n| n.contains(&dead) && n.contains("could not be read")),
        "{:?}",
        e.notes
    );
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.bundle.path("environment.json")).unwrap())
            .unwrap();
    assert!(
        env["telemetry"]["endpoints"][0]["absent"].is_string(),
        "{}",
        env["telemetry"]
    );
    let report = goodput::report::document(&r.summary).terminal();
    assert!(report.contains("could not be read"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_draws_the_frontier_with_its_pareto_points() {
    let dir = tempfile::tempdir().unwrap();
    let src = r#"name = "frontier"
[target.simulator]
max_batch = 16
[target.telemetry]
urls = ["/telemetry"]
interval = "100ms"
[target.declared]
price_per_hour = 4
currency = "EUR"
[workload]
input_tokens = { dist = "fixed", value = 128 }
output_tokens = { dist = "fixed", value = 48 }
[load]
kind = "open"
rate = 10
requests = 50
[slo]
ttft_ms = 400
tpot_ms = 40
"#;
    let path = dir.path().join("frontier.toml");
    std::fs::write(&path, src).unwrap();
    let vary = goodput::sweep::Vary::parse(&["load.rate=8,30,90".into()]).unwrap();
    let (parent, result) =
        goodput::sweep::sweep(&path, src, &vary, &common::sweep_options(dir.path()))
            .await
            .unwrap();
    assert_eq!(result.points.len(), 3);
    for p in &result.points {
        assert!(p.tps_per_user.is_some(), "{p:?}");
        assert!(p.slo_output_tps_per_accelerator.is_some(), "{p:?}");
        assert_eq!(p.currency.as_deref(), Some("EUR"));
    }
    // Per user falls as the load rises; the frontier keeps at least the ends it cannot beat.
    assert!(result.points.iter().any(|p| p.pareto));
    let best_user = result
        .points
        .iter()
        .max_by(|a, b| a.tps_per_user.unwrap().total_cmp(&b.tps_per_user.unwrap()))
        .unwrap();
    assert!(best_user.pareto, "the fastest per user is never dominated");
    let html = std::fs::read_to_string(parent.path("sweep.html")).unwrap();
    for needle in [
        "id=\"frontier-accelerator\"",
        "id=\"frontier-cost\"",
        "pareto-optimal",
        "SLO-meeting output tok per EUR",
    ] {
        assert!(html.contains(needle), "{needle} not in sweep.html");
    }
    let md = std::fs::read_to_string(parent.path("sweep.md")).unwrap();
    assert!(md.contains("✓ frontier"), "{md}");
}

#[test]
fn bad_prices_and_pages_are_contract_errors_naming_file_line_and_key() {
    let cases = [
        (
            "[target.declared]\ncurrency = \"USD\"\nprice_per_hour = -2\n",
            ":3: `target.declared.price_per_hour`",
            "positive",
        ),
        (
            "[target.declared]\ncurrency = \"USD\"\nprice_per_hour = \"cheap\"\n",
            ":3: `target.declared.price_per_hour`",
            "invalid type",
        ),
        (
            "[target.declared]\nprice_per_hour = 3\n",
            ":2: `target.declared.price_per_hour`",
            "currency",
        ),
        (
            "[target.telemetry]\nurls = [\"gpu-node:9400\"]\n",
            ":2: `target.telemetry.urls[0]`",
            "http://",
        ),
        (
            "[target.declared]\naccelerators = 0\n",
            ":2: `target.declared.accelerators`",
            "at least 1",
        ),
    ];
    for (section, place, says) in cases {
        let src = format!("{section}[load]\nkind = \"open\"\nrate = 1\nrequests = 2\n");
        let e = goodput::contract::parse(&src, std::path::Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&format!("c.toml{place}")), "{e}");
        assert!(e.contains(says), "{e}");
    }
}
