//! `goodput demo`: coordinated omission shown, open against closed loop on the simulator's
//! clock; or `--live`, the simulated engine driven in real time on a dashboard.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::bail;

use super::run::RunShown;
use super::signals::{CAUGHT, cancel_on_signals};
use super::sim::sim_config;
use super::watch::watched;
use super::{Done, FormatArgs, Shown};
use crate::report::Doc;
use crate::report::format::Format;

// The arguments of `goodput demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Performance-model file for the simulated engine (TOML; keys as in [target.simulator]).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Override one setting, e.g. `--set max_batch=32`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// `html`: a self-contained page with both curves.
    #[command(flatten)]
    format: FormatArgs,
    /// Drive the simulated engine in real time, on a dashboard whose keys change the load in
    /// place: `+`/`-` raise and lower the offered load by 10% of capacity, `o`/`c` switch to
    /// open or closed loop, `q` ends it. Each change is a segment of the run's bundle.
    #[arg(long)]
    live: bool,
    /// With --live: the offered load to start at, as a share of the engine's capacity.
    #[arg(long, default_value_t = 0.5, requires = "live")]
    load: f64,
    /// With --live: the longest it runs, seconds (it stops by itself).
    #[arg(long, default_value_t = 300.0, requires = "live")]
    duration: f64,
    /// With --live: the directory that receives the bundle.
    #[arg(long, default_value = "runs", env = "GOODPUT_OUT", requires = "live")]
    out: PathBuf,
}

async fn demo_live(
    cfg: crate::sim::SimConfig,
    load: f64,
    duration: f64,
    out: PathBuf,
) -> anyhow::Result<Done> {
    if !(load.is_finite() && (0.1..=3.0).contains(&load)) {
        bail!("--load {load}: give a share of capacity from 0.1 to 3 (0.5 is half)");
    }
    if !(duration.is_finite() && duration > 0.0 && duration <= 3600.0) {
        bail!("--duration {duration}: give seconds, more than 0 and at most 3600");
    }
    let spec = crate::demo::DemoSpec::default();
    let (capacity, e2e_alone) = crate::demo::capacity(&cfg, &spec).map_err(anyhow::Error::msg)?;
    let text = crate::demo::live_contract(&cfg, &spec, capacity, load, duration)
        .map_err(anyhow::Error::msg)?;
    let path = PathBuf::from("<goodput demo --live>");
    let (c, inputs) = crate::workload::parse(&text, &path)?;
    let control = crate::driver::live::Control::new(capacity, e2e_alone, true, load);
    let board = crate::live::Board::new(Arc::new(c.clone()), Some(control));
    let options = crate::run::RunOptions {
        out_root: out,
        watch: Arc::new(crate::run::Silent),
        argv: std::env::args().collect(),
        overrides: Vec::new(),
        bundle_dir: None,
        wake_latency_hold: false,
        signal: CAUGHT.clone(),
        live: None,
        simulator: None,
    };
    let cancel = cancel_on_signals("the records in flight");
    let title = format!("goodput demo --live · capacity {capacity:.1} req/s");
    let r = watched(board, title, options, cancel, |o, k| {
        crate::run::run(c, inputs, o, k)
    })
    .await?;
    Ok(Done::new(
        RunShown::of(r, "goodput demo --live"),
        Format::Terminal,
        false,
    ))
}

/// The demo's curves (or the live run's summary).
pub async fn demo(a: DemoArgs) -> anyhow::Result<Done> {
    let DemoArgs {
        config,
        set,
        format,
        live,
        load,
        duration,
        out,
    } = a;
    let cfg = sim_config(config.as_deref(), &set)?;
    if live {
        return demo_live(cfg, load, duration, out).await;
    }
    let demo =
        crate::demo::run(&cfg, crate::demo::DemoSpec::default()).map_err(anyhow::Error::msg)?;
    Ok(Done::new(DemoShown(demo), format.get(), false))
}

/// The demo as the seam shows it: its table, and a page with both curves.
pub struct DemoShown(pub crate::demo::Demo);

impl Shown for DemoShown {
    fn title(&self) -> String {
        "goodput demo".into()
    }
    fn document(&self, _full: bool) -> Doc {
        self.0.document()
    }
    fn json(&self) -> String {
        super::json(&self.0)
    }
    fn page(&self) -> anyhow::Result<String> {
        Ok(crate::demo::html_page(&self.0))
    }
}
