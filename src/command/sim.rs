//! `goodput sim`: the simulated inference server on loopback until a stop signal; and the
//! simulator's configuration from a file and `--set`.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use super::signals::stop_signal_streams;
use super::{Done, Text, emit, read_contract};
use crate::contract::source;
use crate::report::format::Format;
use crate::sim::{SimConfig, SimServer};

// The arguments of `goodput sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Performance-model file (TOML; keys as in [target.simulator]).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one setting, e.g. `--set decode_base_ms=20` or `--set faults.error_rate=0.1`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    #[arg(long, default_value = "127.0.0.1")]
    host: std::net::IpAddr,
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Append the ground truth of every request to this JSONL file.
    #[arg(long)]
    ground_truth: Option<PathBuf>,
    /// Send every finished request's server span (OTLP, as vLLM's `llm_request`: queue,
    /// prefill and decode from the ground truth) to this endpoint, as vLLM's flag of that name.
    #[arg(long, value_name = "URL")]
    otlp_traces_endpoint: Option<String>,
    /// Its protocol: grpc (vLLM's default) or http/protobuf (the endpoint is then the full URL,
    /// e.g. http://127.0.0.1:4318/v1/traces).
    #[arg(
        long,
        env = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        default_value = "grpc"
    )]
    otlp_protocol: String,
}

/// Serves until a stop signal; says its address as soon as it listens.
pub async fn sim(a: SimArgs) -> anyhow::Result<Done> {
    let SimArgs {
        config,
        set,
        host,
        port,
        ground_truth,
        otlp_traces_endpoint,
        otlp_protocol,
    } = a;
    let cfg = sim_config(config.as_deref(), &set)?;
    let protocol = otlp_protocol
        .parse::<crate::otlp::export::Protocol>()
        .map_err(|e| anyhow::anyhow!("--otlp-protocol: {e}"))?;
    let traces = otlp_traces_endpoint.map(|e| (e, protocol));
    let mut server =
        SimServer::start_traced(cfg, (host, port).into(), ground_truth, traces).await?;
    emit(
        &Text(format!(
            "goodput sim listening on {} (model {})\n",
            server.base_url(),
            server.config().model
        )),
        Format::Terminal,
        false,
    )?;
    // Any of the stop signals ends it cleanly (a container runtime sends SIGTERM).
    let mut streams = stop_signal_streams();
    if streams.is_empty() {
        bail!("cannot handle SIGINT, SIGTERM or SIGHUP: nothing could stop the simulator cleanly");
    }
    futures_util::future::select_all(streams.iter_mut().map(|(_, s)| Box::pin(s.recv()))).await;
    server.stop();
    Ok(Done::text(String::new()))
}

/// Builds a simulator configuration from a file and `KEY=VALUE` overrides; errors name the key
/// (and the file and line when it came from the file).
pub fn sim_config(file: Option<&Path>, sets: &[String]) -> anyhow::Result<SimConfig> {
    let (src, name) = match file {
        Some(p) => (read_contract(p)?, p.display().to_string()),
        None => (String::new(), "--set".to_owned()),
    };
    let mut table: toml::Table = toml::from_str(&src).map_err(|e| {
        let line = e
            .span()
            .map(|s| source::line_of_offset(&src, s.start))
            .unwrap_or(0);
        anyhow::anyhow!("{name}:{line}: {}", e.message().trim())
    })?;
    for s in sets {
        let Some((key, value)) = s.split_once('=') else {
            bail!("--set {s}: expected KEY=VALUE");
        };
        let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_owned()));
        let mut t = &mut table;
        let parts: Vec<&str> = key.trim().split('.').collect();
        for p in &parts[..parts.len() - 1] {
            t = t
                .entry(p.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                .as_table_mut()
                .with_context(|| format!("--set {key}: `{p}` is not a table"))?;
        }
        t.insert(parts[parts.len() - 1].to_owned(), value);
    }
    let cfg: SimConfig = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("{name}: {}", e.message().trim()))?;
    if let Err(e) = cfg.validate() {
        let line = file
            .and_then(|_| source::line_of_key(&src, &e.key))
            .map(|l| format!(":{l}"))
            .unwrap_or_default();
        bail!("{name}{line}: {e}");
    }
    Ok(cfg)
}
