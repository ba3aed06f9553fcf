//! Before the load: preflight (the server's models and version; the first request, unmeasured),
//! the target's facts and scrapers, prompts recounted in the server's tokens where the contract
//! asks, the client's wake-up latency, a shard's schedule origin on the target's clock, and
//! `environment.json` as it stands before the first measured request.

use super::RunOptions;
use super::Target;
use super::reach::not_past;
use super::unless_cancelled;
use super::watch::Watch;
use crate::bundle::{Bundle, ENVIRONMENT, EnvironmentFile, METRICS, TELEMETRY};
use crate::contract::{ClientTokenCount, Contract};
use crate::env::facts::Facts;
use crate::env::prom::Scraper;
use crate::env::tokenize::{ServerCounter, check, recount};
use crate::env::wake::WakeLatency;
use crate::plan::Plan;
use crate::workload::Inputs;
use anyhow::{Context, bail};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What the run knows before its load: the target's facts, its scrapers started, the inputs
/// (recounted in the target's tokens where the contract asks), `environment.json` as written,
/// and a shard's schedule origin.
pub(super) struct ProbedTarget {
    pub(super) facts: Facts,
    pub(super) scrapers: Vec<Scraper>,
    pub(super) inputs: Inputs,
    pub(super) environment: EnvironmentFile,
    pub(super) start_us: Option<u64>,
}

/// The target probed before the load (`environment`), the client's wake-up latency and, for a
/// shard, its schedule origin (`shard_origin`), written to `environment.json`.
pub(super) async fn probed(
    target: &Target,
    contract: &Contract,
    (inputs, models, version): (Inputs, serde_json::Value, serde_json::Value),
    (bundle, started, start_at, wake): (&Bundle, Instant, Option<jiff::Timestamp>, &WakeLatency),
    (cancel, opts): (&CancellationToken, &RunOptions),
) -> anyhow::Result<ProbedTarget> {
    let (facts, scrapers, inputs, mut environment) = unless_cancelled(
        cancel,
        &opts.signal,
        "probing the target",
        environment(
            target,
            contract,
            inputs,
            (models, version),
            bundle,
            started,
            opts.watch.as_ref(),
        ),
    )
    .await?;
    environment.client_wake_latency = Some(wake.status.clone());
    let start_us = shard_origin(
        contract,
        start_at,
        target,
        (cancel, opts),
        started,
        &mut environment,
    )
    .await?;
    bundle.write_json(ENVIRONMENT, &environment)?;
    Ok(ProbedTarget {
        facts,
        scrapers,
        inputs,
        environment,
        start_us,
    })
}

/// The bundle's scrapes read back: the target's, the telemetry's, and which telemetry pages
/// answered. A file that cannot be read (a disk error) leaves its figures out and the user is
/// told, never silently.
pub(super) fn scraped(
    bundle: &Bundle,
    environment: &EnvironmentFile,
    opts: &RunOptions,
) -> (
    Vec<crate::env::prom::Scrape>,
    Vec<crate::env::prom::Scrape>,
    Vec<crate::analyze::efficiency::PageStatus>,
) {
    let read = |name: &str| {
        crate::env::prom::read_present(&bundle.path(name)).unwrap_or_else(|e| {
            opts.watch
                .warn(&format!("the server's figures are left out: {e}"));
            Vec::new()
        })
    };
    (
        read(METRICS),
        read(TELEMETRY),
        environment.telemetry_pages().to_vec(),
    )
}

/// Every file the contract names (with its SHA-256) is there.
pub(super) fn inputs_present(inputs: &Inputs) -> anyhow::Result<()> {
    if let Some(f) = inputs.missing.first() {
        bail!(
            "{f} is named by the contract (with its SHA-256) but is not there: put it back to run this contract"
        );
    }
    Ok(())
}

/// Preflight: is the target there, and which model does it serve? Then every other replica
/// must be there and serve the same, before any load. The target's `/v1/models` and
/// `/version` answers.
pub(super) async fn preflight_all(
    http: &reqwest::Client,
    base: &str,
    api_key: Option<&str>,
    contract: &mut Contract,
    (cancel, opts): (&CancellationToken, &RunOptions),
) -> anyhow::Result<(serde_json::Value, serde_json::Value)> {
    let answers = unless_cancelled(
        cancel,
        &opts.signal,
        "asking the target what it serves",
        preflight(http, base, api_key, contract),
    )
    .await?;
    for (i, other) in contract.target.urls.iter().enumerate().skip(1) {
        let mut c = contract.clone();
        unless_cancelled(
            cancel,
            &opts.signal,
            "asking the replicas what they serve",
            preflight(http, other, api_key, &mut c),
        )
        .await
        .with_context(|| format!("target.urls[{i}]"))?;
    }
    Ok(answers)
}

/// Whether the target is there and serves the contract's model (the first it lists when
/// none is set, written into the contract): the wrong model is caught before any load. Returns
/// the verbatim `/v1/models` and `/version` answers.
pub(super) async fn preflight(
    http: &reqwest::Client,
    base: &str,
    api_key: Option<&str>,
    contract: &mut Contract,
) -> anyhow::Result<(serde_json::Value, serde_json::Value)> {
    let models = crate::env::probe(http, base, crate::env::facts::Endpoint::Models, api_key).await;
    let version =
        crate::env::probe(http, base, crate::env::facts::Endpoint::Version, api_key).await;
    if models.get("status").is_none() {
        let why = models["absent"].as_str().unwrap_or("no answer");
        let hint = crate::client::tls_hint(why).map_or(String::new(), |h| format!(" — {h}"));
        bail!("cannot reach the target at {base}: {why}{hint}");
    }
    if contract.target.model.is_none() {
        // An answer that is not a list is not an empty list: what the server refused is named.
        if let Some(status) = models["status"]
            .as_u64()
            .filter(|s| !(200..300).contains(s))
        {
            let why = match status {
                431 => {
                    " (request headers too large: the headers of [target.request] are larger than the server accepts)"
                }
                401 | 403 => {
                    " (not authorised: check target.api_key_env and the headers of [target.request])"
                }
                _ => "",
            };
            bail!(
                "target.model is not set, and GET {base}/v1/models answered HTTP {status}{why} instead of listing the models; fix that, or set target.model"
            );
        }
        let m = crate::env::first_model(&models).with_context(|| {
            format!("target.model is not set and {base}/v1/models lists no model ({}); set target.model", models["absent"].as_str().unwrap_or("empty list"))
        })?;
        contract.target.model = Some(m);
    }
    let model = contract.target.model.as_deref().unwrap_or_default();
    // The wrong model is caught before any load: a server that lists what it serves and does
    // not list this one would fail every request (or, like llama.cpp, answer with another).
    // So is a traffic class's own model or adapter name.
    let served = crate::env::served_models(&models);
    let listed = || {
        served
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !served.is_empty() && !served.iter().any(|s| crate::text::same_model(model, s)) {
        bail!(
            "target.model = \"{model}\" is not served by {base}: its /v1/models lists {}. Set target.model to one of these (or leave it out to take the first).",
            listed()
        );
    }
    for (k, class) in contract.classes.iter().enumerate() {
        let names = class
            .model
            .iter()
            .map(|m| (crate::contract::classes::key(k, "model"), m))
            .chain(class.models.iter().flat_map(|mix| {
                mix.names
                    .iter()
                    .map(move |m| (crate::contract::classes::key(k, "models.names"), m))
            }));
        for (key, m) in names {
            if !served.is_empty() && !served.iter().any(|s| crate::text::same_model(m, s)) {
                bail!(
                    "{key} = \"{m}\" (class \"{}\") is not served by {base}: its /v1/models lists {}. A LoRA adapter is listed once the server has loaded it.",
                    class.name,
                    listed()
                );
            }
        }
    }
    Ok((models, version))
}

/// What the run knows of its target before the load, kept in `environment.json`: every
/// engine's metadata endpoint verbatim and the facts they state (resolved against the
/// declared ones), the client host and network path; with `tokenizer = "server"` the inputs
/// recounted in the target's tokens; and the `/metrics` scraper, started. Returns the facts,
/// the scraper, the inputs and the `environment.json` document.
pub(super) async fn environment(
    t: &Target,
    contract: &Contract,
    mut inputs: Inputs,
    answers: (serde_json::Value, serde_json::Value),
    bundle: &Bundle,
    started: Instant,
    watch: &dyn Watch,
) -> anyhow::Result<(Facts, Vec<Scraper>, Inputs, EnvironmentFile)> {
    // Every engine's documented metadata endpoint, kept verbatim (absent ones say why), and
    // the facts they state, resolved against the declared ones.
    let probes = crate::env::probe_engines(
        &t.http,
        &t.base,
        t.api_key.as_deref(),
        &t.model,
        vec![answers.0, answers.1],
    )
    .await;
    let network = crate::env::network_path(&t.base).await;
    let client_host = crate::env::host();
    let mut probes = probes;
    probes.extend(crate::env::probe_metrics_info(&t.http, &t.base, t.api_key.as_deref()).await);
    probes.extend(crate::env::this_host(&client_host, &network));
    probes.extend(crate::env::hash_model_file(&probes, &network).await);
    let facts = Facts::resolve(&contract.target.declared, &probes);
    let mut environment = EnvironmentFile {
        probed: crate::env::document(contract, &t.base, client_host, probes, &facts, network),
        ..EnvironmentFile::default()
    };
    // `tokenizer = "server"`: lengths in the target's own tokens, measured before the load.
    if contract.workload.server_tokenizer() {
        let (recounted, kept) = server_lengths(t, contract, &inputs, watch).await?;
        inputs = recounted;
        environment.tokenizer = Some(kept);
    }
    // The server's own metrics, scraped before, during and after the load.
    let every = contract.measurement.server_metrics_interval.0;
    let scraper = if every > 0.0 {
        Scraper::start(
            t.http.clone(),
            &t.base,
            t.api_key.clone(),
            Duration::from_secs_f64(every),
            started,
            &bundle.path(METRICS),
        )
        .await
    } else {
        Err(crate::env::Unavailable::Off(
            "off (measurement.server_metrics_interval = 0)".to_owned(),
        ))
    };
    environment.client_http = Some(crate::client::http_pool_settings(
        Duration::from_secs_f64(contract.target.keep_alive.seconds()),
        &contract.target.tls,
    ));
    environment.server_metrics = Some(crate::bundle::ServerMetrics {
        endpoint: "/metrics".to_owned(),
        file: scraper.as_ref().ok().map(|_| METRICS.to_owned()),
        absent: scraper.as_ref().err().map(ToString::to_string),
    });
    let mut scrapers: Vec<Scraper> = scraper.into_iter().collect();
    if let Some((telemetry, status)) = telemetry(t, contract, bundle, started, watch).await {
        scrapers.extend(telemetry);
        environment.telemetry = Some(status);
    }
    Ok((facts, scrapers, inputs, environment))
}

/// `tokenizer = "server"`: the inputs recounted in the target's own tokens, and the check of
/// the first planned prompts against its count (for `environment.json`).
async fn server_lengths(
    t: &Target,
    contract: &Contract,
    inputs: &Inputs,
    watch: &dyn Watch,
) -> anyhow::Result<(Inputs, serde_json::Value)> {
    let counter = ServerCounter::detect(t.http.clone(), &t.base, &t.model, t.api_key.as_deref())
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "workload.tokenizer = \"server\", but the target cannot count tokens: {e}"
            )
        })?;
    let inputs = recount(&counter, contract, inputs)
        .await
        .map_err(anyhow::Error::msg)?;
    let plan = Plan::new(contract, &inputs);
    let first = (0..plan.len().unwrap_or(u64::MAX)).map(|i| {
        let r = plan.request(i);
        (i, r.prompt, r.input_tokens)
    });
    let kept = check(&counter, &inputs.tokenizer, first)
        .await
        .map_err(anyhow::Error::msg)?;
    if kept["mismatches"].as_array().is_some_and(|m| !m.is_empty()) {
        watch.warn(&format!(
            "{} of {} planned prompts do not count as planned at {} (see environment.json `tokenizer`)",
            kept["mismatches"].as_array().map_or(0, Vec::len),
            kept["checked"],
            counter.url()
        ));
    }
    Ok((inputs, kept))
}

/// The accelerators' telemetry pages (`[target.telemetry]`), scraped before, during and after
/// the load into `telemetry.jsonl`. A page that does not answer is warned about before the load
/// and the run goes on without it; so is one that publishes none of the accelerator metrics
/// goodput reads. Returns the scraper and what `environment.json` keeps of each page; `None`
/// when the contract names no page.
pub(super) async fn telemetry(
    t: &Target,
    contract: &Contract,
    bundle: &Bundle,
    started: Instant,
    watch: &dyn Watch,
) -> Option<(Option<Scraper>, crate::bundle::Telemetry)> {
    let tel = &contract.target.telemetry;
    if tel.urls.is_empty() {
        return None;
    }
    let urls = tel.resolved(&t.base);
    for u in &urls {
        crate::secrets::register_url(u);
    }
    let endpoints = urls
        .iter()
        .map(|url| crate::env::prom::Endpoint {
            url: url.clone(),
            key: None,
            tagged: true,
        })
        .collect();
    let (scraper, absent) = Scraper::start_all(
        t.http.clone(),
        endpoints,
        Duration::from_secs_f64(tel.every_s()),
        started,
        &bundle.path(TELEMETRY),
    )
    .await;
    for (url, why) in &absent {
        watch.warn(&format!(
            "telemetry page {url} cannot be read, so it measures no energy in this run (the load goes on without it): {why}"
        ));
    }
    let firsts = crate::env::prom::read_present(&bundle.path(TELEMETRY)).unwrap_or_else(|e| {
        watch.warn(&format!("the telemetry scrapes cannot be read back: {e}"));
        Vec::new()
    });
    for s in firsts
        .iter()
        .filter(|s| !crate::analyze::efficiency::reads_any(&s.series))
    {
        let names = crate::analyze::efficiency::unread_names(&s.series);
        let shown: Vec<&str> = names.iter().take(8).map(String::as_str).collect();
        watch.warn(&format!(
            "telemetry page {} publishes none of the accelerator metrics goodput reads (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, DCGM_FI_DEV_POWER_USAGE; AMD's gpu_energy_consumed, gpu_power_usage): its series are kept in {TELEMETRY} but measure nothing. It publishes {}{}",
            s.source.as_deref().unwrap_or("?"),
            shown.join(", "),
            if names.len() > shown.len() { format!(" and {} more", names.len() - shown.len()) } else { String::new() }
        ));
    }
    let endpoints = urls
        .iter()
        .map(|u| crate::analyze::efficiency::PageStatus {
            url: crate::analyze::without_userinfo(u),
            absent: absent.iter().find(|a| &a.0 == u).map(|a| a.1.to_string()),
        })
        .collect();
    let status = crate::bundle::Telemetry {
        file: scraper.as_ref().map(|_| TELEMETRY.to_owned()),
        interval_s: tel.every_s(),
        endpoints,
    };
    Some((scraper, status))
}

/// Whether the client's own count is the model's tokens: words on the embedded simulator,
/// whose tokenizer is words.
pub(super) fn counts_model_tokens(c: &Contract) -> bool {
    c.target.url.is_none() && c.measurement.client_token_count == Some(ClientTokenCount::Words)
}

/// A shard's schedule origin on the run's clock (its common start instant, still ahead), with
/// the target's clock read and the shard's facts put in `environment`; `None` unsharded.
async fn shard_origin(
    contract: &Contract,
    start_at: Option<jiff::Timestamp>,
    target: &Target,
    (cancel, opts): (&CancellationToken, &RunOptions),
    started: Instant,
    environment: &mut EnvironmentFile,
) -> anyhow::Result<Option<u64>> {
    Ok(match (contract.load.shard(), start_at) {
        (Some(shard), Some(at)) => {
            let clock =
                unless_cancelled(cancel, &opts.signal, "reading the target's clock", async {
                    Ok(crate::env::clock::offset(
                        &target.http,
                        &target.base,
                        target.api_key.as_deref(),
                    )
                    .await)
                })
                .await?;
            let ahead = not_past(at, " while the target was probed")?;
            let origin_us = started.elapsed().as_micros() as u64 + ahead.as_micros() as u64;
            opts.watch.note(&format!(
                "shard {shard}: the schedule starts at {at} (in {:.1} s)",
                ahead.as_secs_f64()
            ));
            environment.shard = Some(crate::bundle::ShardEnvironment {
                shard: shard.to_string(),
                index: shard.index,
                count: shard.count,
                plan_fingerprint: contract.unsharded().fingerprints().short(),
                start_at: at.to_string(),
                origin_us: Some(origin_us),
                clock: serde_json::to_value(clock)?,
            });
            Some(origin_us)
        }
        _ => None,
    })
}
