//! Keeping the client machine's idle CPUs quick to wake for the length of a run.
//!
//! An open-loop schedule is kept by a thread that sleeps until each request's time. When every
//! CPU is idle, the kernel lets them enter idle states that take long to leave; in a virtual
//! machine an idle vCPU halts and the hypervisor must reschedule it, which on the 2-core VMs
//! this was measured on made a sleeping thread wake 0.6 ms late at p99 and 3 ms at p99.9, and
//! the dispatch lag's p99 swing between 0.3 and 10 ms from run to run. Held at 0 µs, the same
//! wake-ups were 60 µs late at p99 and the lag's p99 stayed at 0.2 ms. This is what latency
//! tools such as `cyclictest` do by default.
//!
//! The request goes through the kernel's PM QoS interface (`/dev/cpu_dma_latency`): it lasts
//! exactly as long as the file stays open, so it ends with the run, and with the process if that
//! dies. It changes the idle CPUs of the whole machine, a server on it included, so whether it
//! was held is kept in `environment.json`.

use std::fs::File;
use std::io::Write;

use serde_json::Value;

const DEVICE: &str = "/dev/cpu_dma_latency";

/// A held (or declined, or unavailable) request for idle CPUs that wake at once.
#[derive(Debug)]
pub struct WakeLatency {
    /// The open device is the request: dropping it withdraws the request.
    _open: Option<File>,
    /// What `environment.json` keeps about it.
    pub status: WakeStatus,
}

/// The request for idle CPUs that wake at once, as `environment.json` keeps it
/// (`client_wake_latency`), with the dispatch thread's priority during the load.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct WakeStatus {
    /// The dispatch thread's scheduling policy, once the load ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch_thread: Option<Value>,
    pub held: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_us: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// Why it is not held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl WakeLatency {
    /// Asks the kernel to keep idle CPUs in states with no exit latency while the returned
    /// value lives. Never fails: without the device or the permission, the status says why.
    pub fn hold() -> WakeLatency {
        let held = File::options().write(true).open(DEVICE).and_then(|mut f| {
            // The device takes the target latency as a native-endian s32, in µs.
            f.write_all(&0i32.to_ne_bytes())?;
            Ok(f)
        });
        match held {
            Ok(f) => WakeLatency {
                _open: Some(f),
                status: WakeStatus {
                    held: true,
                    max_us: Some(0),
                    via: Some(DEVICE.to_owned()),
                    ..WakeStatus::default()
                },
            },
            Err(e) => WakeLatency::not_held(format!("{DEVICE}: {e}")),
        }
    }

    /// Leaves the idle states alone (`--no-wake-latency-hold`).
    pub fn declined() -> WakeLatency {
        WakeLatency::not_held("declined (--no-wake-latency-hold)".to_owned())
    }

    fn not_held(why: String) -> WakeLatency {
        WakeLatency {
            _open: None,
            status: WakeStatus {
                held: false,
                why: Some(why),
                ..WakeStatus::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// The kernel's current limit, which reading the device returns (an s32, µs).
    fn limit() -> Option<i32> {
        let mut b = [0u8; 4];
        File::open(DEVICE).ok()?.read_exact(&mut b).ok()?;
        Some(i32::from_ne_bytes(b))
    }

    #[test]
    fn holds_zero_where_the_kernel_takes_the_request_and_says_why_not_elsewhere() {
        let w = WakeLatency::hold();
        if File::options().write(true).open(DEVICE).is_ok() {
            assert!(w.status.held);
            // The request is in force: the machine-wide limit is now 0 µs.
            assert_eq!(limit(), Some(0));
        } else {
            assert!(!w.status.held);
            assert!(w.status.why.as_deref().unwrap().contains(DEVICE));
        }
        let d = WakeLatency::declined();
        assert!(d._open.is_none() && !d.status.held);
    }
}
