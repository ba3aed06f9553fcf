//! The simulated accelerators' power and energy, and the DCGM-exporter-shaped page that
//! publishes them (`GET /telemetry`), so energy and cost figures are tested against a known
//! truth.
//!
//! Power model, per simulated GPU: `idle_watts` while no step runs; during a step,
//! `idle + (peak − idle) × (0.35 + 0.65 × min(1, batch / max_batch))` (a busy GPU draws a good
//! share of its dynamic range even for one sequence, and more as the batch fills). GPU `i`
//! draws `1 + 0.03 i` times that, so per-device figures differ as real ones do. The energy is
//! the integral of that power over the model's own step timeline: exact, and kept as a
//! piecewise-linear log so any past interval's energy is known ([`Meter::joules_between`]).

use std::fmt::Write;

pub use crate::sim_config::Power;

/// At most this many points are kept; the oldest half is dropped beyond it (a simulator left
/// running for days keeps its recent truth).
const MAX_POINTS: usize = 4_000_000;

/// GPU 0's energy (joules) as a function of the simulator's clock: points between which the
/// power was constant, so linear interpolation between them is exact.
#[derive(Debug, Clone)]
pub struct Meter {
    power: Power,
    max_batch: u32,
    /// `(t, joules)`, t in seconds on the simulator's clock, increasing.
    points: Vec<(f64, f64)>,
}

impl Meter {
    pub fn new(power: Power, max_batch: u32) -> Meter {
        Meter {
            power,
            max_batch,
            points: vec![(0.0, 0.0)],
        }
    }

    fn last(&self) -> (f64, f64) {
        *self.points.last().expect("the meter starts with a point")
    }

    /// A step with `batch` running sequences ran over `[start, end]`; idle before it since the
    /// last step.
    pub fn step(&mut self, start: f64, end: f64, batch: usize) {
        let (t0, e0) = self.last();
        let start = start.max(t0);
        let end = end.max(start);
        let idle = self.power.watts(None, self.max_batch);
        let busy = self.power.watts(Some(batch), self.max_batch);
        let e_start = e0 + idle * (start - t0);
        let e_end = e_start + busy * (end - start);
        // A step that follows the last one directly at the same power extends it.
        let n = self.points.len();
        let same_slope = n >= 2 && start == t0 && {
            let (ta, ea) = self.points[n - 2];
            t0 > ta && ((e0 - ea) / (t0 - ta) - busy).abs() < 1e-9
        };
        if same_slope {
            self.points[n - 1] = (end, e_end);
        } else {
            if start > t0 {
                self.points.push((start, e_start));
            }
            self.points.push((end, e_end));
        }
        if self.points.len() > MAX_POINTS {
            self.points.drain(..MAX_POINTS / 2);
        }
    }

    /// GPU 0's energy at `t` (seconds, simulator clock): idle after the last step.
    pub fn joules_at(&self, t: f64) -> f64 {
        let (tl, el) = self.last();
        if t >= tl {
            return el + self.power.watts(None, self.max_batch) * (t - tl);
        }
        let i = self.points.partition_point(|p| p.0 <= t);
        if i == 0 {
            return self.points[0].1;
        }
        let (ta, ea) = self.points[i - 1];
        let (tb, eb) = self.points[i];
        ea + (eb - ea) * (t - ta) / (tb - ta)
    }

    /// Energy of every GPU together over `[from, to]`, joules: the ground truth.
    pub fn joules_between(&self, from: f64, to: f64) -> f64 {
        let gpu0 = self.joules_at(to) - self.joules_at(from);
        (0..self.power.gpus).map(|i| Power::factor(i) * gpu0).sum()
    }

    /// GPU 0's power at `t`, watts.
    fn watts_at(&self, t: f64) -> f64 {
        let dt = 1e-6;
        (self.joules_at(t) - self.joules_at(t - dt)) / dt
    }

    /// The page a DCGM exporter would publish at `t`: per GPU, power (W), the energy counter
    /// since "driver load" (mJ, starting from a large arbitrary value as a real one does),
    /// utilisation (%: 100 while a step runs), frame-buffer memory used (MiB: an engine
    /// preallocates 90% of it) and a temperature goodput does not read.
    pub fn render(&self, t: f64, busy: bool) -> String {
        let mut out = String::with_capacity(2048);
        let gpu0_w = self.watts_at(t);
        let gpu0_j = self.joules_at(t);
        let fb_total_mib = 81_559.0;
        for (name, help, kind) in [
            ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge"),
            (
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                "Total energy consumption since boot (in mJ).",
                "counter",
            ),
            ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge"),
            (
                "DCGM_FI_DEV_FB_USED",
                "Framebuffer memory used (in MiB).",
                "gauge",
            ),
            ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge"),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for i in 0..self.power.gpus {
                let f = Power::factor(i);
                let value = match name {
                    "DCGM_FI_DEV_POWER_USAGE" => format!("{:.3}", f * gpu0_w),
                    // Whole millijoules, as DCGM publishes them.
                    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" => {
                        format!("{:.0}", 1.0e9 * f64::from(i + 1) + f * gpu0_j * 1000.0)
                    }
                    "DCGM_FI_DEV_GPU_UTIL" => if busy { "100" } else { "0" }.to_owned(),
                    "DCGM_FI_DEV_FB_USED" => format!("{:.0}", fb_total_mib * 0.9),
                    _ => format!("{:.0}", 30.0 + f * gpu0_w / 20.0),
                };
                let _ = writeln!(
                    out,
                    "{name}{{gpu=\"{i}\",UUID=\"GPU-{:08x}-sim0-0000-0000-{i:012}\",device=\"nvidia{i}\",modelName=\"goodput-sim GPU\",Hostname=\"goodput-sim\"}} {value}",
                    0x600d_0000_u32 + i
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_integrates_idle_and_busy_power_exactly() {
        let p = Power {
            gpus: 2,
            idle_watts: 100.0,
            peak_watts: 500.0,
        };
        let mut m = Meter::new(p.clone(), 10);
        // Idle 1 s, then a full batch (500 W) for 2 s in two contiguous steps, then idle.
        m.step(1.0, 2.0, 10);
        m.step(2.0, 3.0, 10);
        assert_eq!(m.points.len(), 3, "contiguous steps at one power merge");
        assert!((m.joules_at(1.0) - 100.0).abs() < 1e-9);
        assert!((m.joules_at(3.0) - 1100.0).abs() < 1e-9);
        assert!((m.joules_at(2.5) - 850.0).abs() < 1e-9);
        assert!((m.joules_at(4.0) - 1200.0).abs() < 1e-9);
        // A half batch: 100 + 400 × (0.35 + 0.325) = 370 W.
        m.step(5.0, 6.0, 5);
        assert!((m.joules_at(6.0) - (1300.0 + 370.0)).abs() < 1e-9);
        // Two GPUs: 1 + 1.03 times GPU 0.
        assert!((m.joules_between(5.0, 6.0) - 370.0 * 2.03).abs() < 1e-9);
        assert!((m.watts_at(5.5) - 370.0).abs() < 1e-3);
        let page = m.render(5.5, true);
        let parsed = crate::env::prom::parse(&page).unwrap();
        let energy: Vec<f64> = parsed
            .iter()
            .filter(|(n, _, _)| n == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
            .map(|s| s.2)
            .collect();
        assert_eq!(energy.len(), 2);
        assert_eq!(energy[0], 1.0e9 + 1_485_000.0);
    }
}
