//! The target reached, before anything is sent: the embedded simulator started or a
//! `[cold_start]` server launched (its timeline kept), the HTTP pools built with the contract's
//! credentials, and the server ready to answer; a launched server stopped at the end.

use super::RunOptions;
use super::files::new_bundle;
use super::unless_cancelled;
use crate::bundle::{Bundle, COLD_START, CONTRACT};
use crate::client::http_pool;
use crate::coldstart::Launched;
use crate::contract::Contract;
use crate::sim::SimServer;
use anyhow::{Context, bail};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Stops a launched server (its exit kept in the cold-start timeline) and writes the timeline.
pub(super) async fn stop_launched(
    launched: Option<Launched>,
    timeline: Option<&mut crate::analyze::Timeline>,
    bundle: &Bundle,
) -> anyhow::Result<()> {
    if let Some(t) = timeline {
        if let Some(l) = launched {
            t.exit = Some(l.stop().await);
        }
        bundle.write_json(COLD_START, t)?;
    }
    Ok(())
}

/// The target, reached: the HTTP pool, the base URL, the API key; the embedded simulator
/// (alive as long as this is), a launched server and the cold-start timeline; and the bundle
/// when a launched server's log needed it first.
pub(super) struct Reached {
    pub(super) http: reqwest::Client,
    /// The load's pool for https targets: `http` without the credential headers.
    pub(super) load_http: reqwest::Client,
    /// The credential headers the load's pools leave to each request (name, value, secret).
    pub(super) credentials: Vec<(String, String, bool)>,
    /// The load's requests go through this pool, not `http` (but to a URL with credentials).
    pub(super) direct: crate::client::direct::Direct,
    /// Each new connection `http` opened, timed.
    pub(super) connects: crate::client::ConnectLog,
    pub(super) base: String,
    pub(super) api_key: Option<String>,
    pub(super) sim: Option<SimServer>,
    pub(super) launched: Option<Launched>,
    pub(super) timeline: Option<crate::analyze::Timeline>,
    pub(super) bundle: Option<Bundle>,
}

/// The headers every request of the pools carries, and the API key left for a bearer token:
/// an API that takes its key in a header of its own (Anthropic's `x-api-key`) gets it, with
/// its fixed headers, on every request of the pool, so the probes and scrapes authenticate as
/// the load does, and no `Authorization: Bearer` goes with them.
pub(super) fn pool_credentials(
    contract: &Contract,
    secrets: &crate::workload::environment::RequestSecrets,
) -> (crate::workload::environment::Headers, Option<String>) {
    let mut headers = secrets.headers.clone();
    let mut api_key = secrets.api_key.clone();
    let adapter = contract.target.api.adapter();
    if let crate::api::Auth::Header(name) = adapter.auth() {
        headers.extend(
            adapter
                .headers()
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string(), false)),
        );
        if let Some(k) = api_key.take() {
            headers.push((name.to_owned(), k, true));
        }
    }
    (headers, api_key)
}

/// A cold start's readiness wait: the server's timeline from launch (or first contact) to
/// ready; a launched server is stopped when it never gets there.
pub(super) async fn ready(
    http: &reqwest::Client,
    base: &str,
    cs: &crate::contract::ColdStart,
    launched: &mut Option<Launched>,
    (started, cancel, opts): (Instant, &CancellationToken, &RunOptions),
) -> anyhow::Result<crate::analyze::Timeline> {
    let ready = unless_cancelled(
        cancel,
        &opts.signal,
        "waiting for the server to be ready",
        async {
            crate::coldstart::wait_ready(http, base, cs, launched.as_mut(), started)
                .await
                .map_err(anyhow::Error::from)
        },
    )
    .await;
    if ready.is_err()
        && let Some(l) = launched.take()
    {
        l.stop().await;
    }
    ready.context("cold start")
}

/// Starts what the contract starts (the simulator, a launched server) and waits for the
/// target to be ready when it measures a cold start.
pub(super) async fn reach(
    contract: &Contract,
    opts: &RunOptions,
    (started, receiver): (Instant, Option<&crate::otlp::receiver::Receiver>),
    cancel: &CancellationToken,
) -> anyhow::Result<Reached> {
    let cold = contract.cold_start.clone();
    let keep_alive = Duration::from_secs_f64(contract.target.keep_alive.seconds());
    // Read before anything starts: an unset variable stops the run before a server launches.
    let secrets = crate::workload::environment::request_secrets(contract)
        .map_err(|(key, msg)| anyhow::anyhow!("`{key}` {msg}"))?;
    let (headers, api_key) = pool_credentials(contract, &secrets);
    let connects = crate::client::ConnectLog::default();
    let http = http_pool(keep_alive, &headers, &contract.target.tls, &connects)?;
    // The load's pools leave the credentials to each request (`Client::credentials`), which
    // sends them to the target's origin only: a followed redirect elsewhere goes without.
    let (credentials, plain): (Vec<_>, Vec<_>) = headers
        .iter()
        .cloned()
        .partition(|(n, _, secret)| *secret || crate::secrets::is_credential_header(n));
    let load_http = if credentials.is_empty() {
        http.clone()
    } else {
        http_pool(keep_alive, &plain, &contract.target.tls, &connects)?
    };
    let direct = crate::client::direct_pool(keep_alive, &plain, &contract.target.tls, &connects);

    // A launched server writes its log into the bundle, so the bundle comes first then.
    let mut bundle = None;
    let mut launched = None;
    if let Some(cs) = cold.as_ref().filter(|cs| cs.launch.is_some()) {
        let b = new_bundle(opts, contract)?;
        b.write(CONTRACT, &contract.to_toml())?;
        launched = Some(Launched::spawn(cs, &b.dir)?);
        bundle = Some(b);
    }
    // The embedded simulator lives as long as this function.
    let sim = match (&contract.target.url, &contract.target.simulator) {
        (None, Some(_)) if opts.simulator.is_some() => None,
        // With a receiver, the simulator exports its spans to it as vLLM would (gRPC).
        (None, Some(cfg)) => Some(
            SimServer::start_traced(
                cfg.clone(),
                ([127, 0, 0, 1], 0).into(),
                None,
                receiver.map(|r| (format!("http://{}", r.addr()), Default::default())),
            )
            .await
            .context("starting the embedded simulator")?,
        ),
        _ => None,
    };
    let base = match (&sim, &contract.target.url) {
        (Some(s), _) => s.base_url(),
        (None, None) if let Some(b) = &opts.simulator => b.clone(),
        (None, Some(u)) => u.trim_end_matches('/').to_owned(),
        (None, None) => bail!("no target: set target.url or leave it out for the simulator"),
    };
    let timeline = match &cold {
        Some(cs) => Some(ready(&http, &base, cs, &mut launched, (started, cancel, opts)).await?),
        None => None,
    };
    Ok(Reached {
        http,
        load_http,
        credentials,
        direct,
        connects,
        base,
        api_key,
        sim,
        launched,
        timeline,
        bundle,
    })
}

/// How long until a sharded run's start instant; an error once it has passed (`when` says
/// what took the time).
pub(super) fn not_past(at: jiff::Timestamp, when: &str) -> anyhow::Result<Duration> {
    let ahead = at.duration_since(jiff::Timestamp::now());
    if ahead.is_negative() || ahead.is_zero() {
        bail!(
            "load.start_at = {at} passed {:.1} s ago{when}: every shard must be ready before it, so choose a later instant (e.g. a minute from now) and start every shard again",
            -ahead.as_secs_f64()
        );
    }
    Ok(Duration::from_secs_f64(ahead.as_secs_f64()))
}
