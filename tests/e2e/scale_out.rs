//! Past one client and one server (issue #24). One plan sent by several client machines:
//! `goodput run --shard I/N --start-at T` on each, `goodput merge` of their bundles. One run
//! spread over several replicas with no router: `target.urls`.
//!
//! Shards: Three shards run as separate processes, each in a
//! network namespace of its own with its own address, against one simulator; the merged bundle
//! must be the unsharded plan, every request once, its percentiles those of the union of the
//! shards' raw values. The namespaces are this test's own hosts on a loopback range
//! (127.211.0.0/16, bridged), made and removed by the test; where the kernel (or a missing
//! `ip`) refuses them, the test says so and skips.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use goodput::analyze::Dist;
use goodput::record::Record;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn sysctl_on(ns: Option<&str>, iface: &str) -> Result<(), String> {
    let key = format!("net.ipv4.conf.{iface}.route_localnet=1");
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "sysctl", "-qw", &key]);
            c
        }
        None => {
            let mut c = Command::new("sysctl");
            c.args(["-qw", &key]);
            c
        }
    };
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        other => Err(format!("sysctl {key}: {other:?}")),
    }
}

/// Test hosts: a bridge holding the server's address (127.211.0.1) and one namespace per
/// client, each with its own address (127.211.1.10 + i) on a veth into the bridge. Loopback
/// addresses leave no machine; `route_localnet` lets them cross the veths.
struct Hosts {
    bridge: String,
    namespaces: Vec<String>,
}

const SERVER: [u8; 4] = [127, 211, 0, 1];

impl Hosts {
    fn make(n: usize) -> Result<Hosts, String> {
        let tag = std::process::id() % 1_000_000;
        let mut hosts = Hosts {
            bridge: format!("gp{tag}b"),
            namespaces: Vec::new(),
        };
        let br = hosts.bridge.clone();
        ip(&["link", "add", &br, "type", "bridge"])?;
        ip(&["addr", "add", "127.211.0.1/16", "dev", &br])?;
        ip(&["link", "set", &br, "up"])?;
        sysctl_on(None, &br)?;
        for i in 0..n {
            let ns = format!("gp{tag}n{i}");
            let (host_end, ns_end) = (format!("gp{tag}h{i}"), format!("gp{tag}v{i}"));
            ip(&["netns", "add", &ns])?;
            hosts.namespaces.push(ns.clone());
            ip(&[
                "link", "add", &host_end, "type", "veth", "peer", "name", &ns_end,
            ])?;
            ip(&["link", "set", &host_end, "master", &br])?;
            ip(&["link", "set", &host_end, "up"])?;
            ip(&["link", "set", &ns_end, "netns", &ns])?;
            let addr = format!("127.211.1.{}/16", 10 + i);
            ip(&["-n", &ns, "addr", "add", &addr, "dev", &ns_end])?;
            ip(&["-n", &ns, "link", "set", &ns_end, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            sysctl_on(Some(&ns), &ns_end)?;
        }
        Ok(hosts)
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veth end and so the pair.
        for ns in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

fn contract(dir: &Path, port: u16) -> PathBuf {
    let path = dir.join("c.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"shards\"\n[target]\nurl = \"http://127.211.0.1:{port}\"\n[workload]\nseed = 11\noutput_tokens = {{ dist = \"uniform\", min = 8, max = 24 }}\n[load]\nrate = 45\nrequests = 150\n[warmup]\nrequests = 30\n[slo]\nttft_ms = 500\n[quality]\nmode = \"consistency\"\nprobes = 2\n"
        ),
    )
    .unwrap();
    path
}

/// The only bundle under `dir` (recursively, one level of contract name).
fn bundle_in(dir: &Path) -> PathBuf {
    let name = std::fs::read_dir(dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut b: Vec<PathBuf> = std::fs::read_dir(name)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(b.len(), 1, "{b:?}");
    b.pop().unwrap()
}

/// Runs shard `i` of `n` of `contract` into `out`, in namespace `ns` when given.
fn shard(ns: Option<&str>, contract: &Path, i: usize, n: usize, at: &str, out: &Path) -> Command {
    let args = [
        "run".to_owned(),
        contract.display().to_string(),
        "-q".into(),
        "--shard".into(),
        format!("{i}/{n}"),
        "--start-at".into(),
        at.into(),
        "--out".into(),
        out.display().to_string(),
        "--format".into(),
        "json".into(),
    ];
    match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, BIN]).args(args);
            c
        }
        None => {
            let mut c = Command::new(BIN);
            c.args(args);
            c
        }
    }
}

/// An instant `secs` from now, RFC 3339.
fn soon(secs: i64) -> String {
    jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(secs))
        .unwrap()
        .to_string()
}

/// Runs the shards side by side and returns their bundles, in shard order.
fn run_shards(nss: &[Option<&str>], c: &Path, dir: &Path, lead_s: i64) -> Vec<PathBuf> {
    let at = soon(lead_s);
    let children: Vec<_> = nss
        .iter()
        .enumerate()
        .map(|(i, ns)| {
            let out = dir.join(format!("s{i}"));
            let child = shard(*ns, c, i, nss.len(), &at, &out)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    children
        .into_iter()
        .map(|(child, out)| {
            let o = child.wait_with_output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            bundle_in(&out)
        })
        .collect()
}

fn goodput(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn records(bundle: &Path) -> Vec<Record> {
    goodput::record::read_jsonl(&bundle.join("requests.jsonl")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_on_their_own_hosts_merge_into_the_unsharded_plan() {
    let hosts = match Hosts::make(3) {
        Ok(h) => h,
        Err(why) => {
            eprintln!("SKIPPED: this machine refuses test hosts in network namespaces: {why}");
            return;
        }
    };
    // A quick engine: the shards' schedule, not a queue, sets how long the test takes.
    let quick = goodput::sim::SimConfig {
        prefill_tokens_per_s: 100_000.0,
        decode_base_ms: 4.0,
        decode_per_seq_ms: 0.0,
        ..Default::default()
    };
    let sim = goodput::sim::SimServer::start(quick, (SERVER, 0).into(), None)
        .await
        .expect("the simulator binds the bridge's address");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let c = contract(d, sim.addr().port());
    let nss: Vec<Option<&str>> = hosts.namespaces.iter().map(|s| Some(s.as_str())).collect();
    let shards = tokio::task::spawn_blocking({
        let (c, d) = (c.clone(), d.to_owned());
        let nss: Vec<Option<String>> = nss.iter().map(|s| s.map(str::to_owned)).collect();
        move || {
            let nss: Vec<Option<&str>> = nss.iter().map(|s| s.as_deref()).collect();
            run_shards(&nss, &c, &d, 8)
        }
    })
    .await
    .unwrap();

    let out = goodput(&[
        "merge",
        shards[2].to_str().unwrap(),
        shards[0].to_str().unwrap(),
        shards[1].to_str().unwrap(),
        "--out",
        d.join("merged").to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let merged_dir = bundle_in(&d.join("merged"));
    let merged = goodput::bundle::Bundle::load(&merged_dir).unwrap();
    // The summary `merge` printed is the one the bundle alone recomputes.
    assert_eq!(printed, serde_json::to_value(&merged.summary).unwrap());

    // The merged plan is the unsharded plan: the same requests with the same intended
    // offsets from the common start (the shards' prompts are the plan's: `plan` lists each
    // shard's, and they partition the whole one, checked in the library's tests).
    let plan = goodput(&["plan", c.to_str().unwrap()]);
    assert!(plan.status.success());
    let planned: std::collections::BTreeMap<u64, u64> = String::from_utf8_lossy(&plan.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["index"].as_u64().unwrap(),
                v["intended_us"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(planned.len(), 180);
    // Each shard's own listing (its contract as the bundle kept it, nonce and all) holds the
    // prompts it sent; together they are the unsharded listing of the same contract.
    let listing = |contract: &Path| {
        let out = goodput(&["plan", contract.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|v| (v["index"].as_u64().unwrap(), v))
            .collect::<std::collections::BTreeMap<u64, serde_json::Value>>()
    };
    let mut union = std::collections::BTreeMap::new();
    for b in &shards {
        union.extend(listing(&b.join("contract.toml")));
    }
    assert_eq!(union, listing(&merged_dir.join("contract.toml")));
    assert_eq!(union.len(), 180);
    let env: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(merged_dir.join("environment.json")).unwrap(),
    )
    .unwrap();
    let start = env["shards"][0]["origin_us"].as_u64().unwrap()
        + env["shards"][0]["shifted_us"].as_u64().unwrap();
    use goodput::plan::Phase;
    let measured: std::collections::BTreeMap<u64, u64> = merged
        .records
        .iter()
        .filter(|r| matches!(r.phase, Phase::Warmup | Phase::Steady))
        .map(|r| (r.index, r.intended_us.unwrap() - start))
        .collect();
    assert_eq!(measured, planned);
    // Every request once: no index twice, and the server saw each request id once.
    let mut ids: Vec<&str> = merged
        .records
        .iter()
        .map(|r| r.request_id.as_str())
        .collect();
    let mut indices: Vec<u64> = merged.records.iter().map(|r| r.index).collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(indices.len(), merged.records.len());
    let truth = common::truth_by_id(&sim);
    ids.retain(|id| !truth.contains_key(*id));
    assert!(ids.is_empty(), "requests the server never saw: {ids:?}");
    assert_eq!(truth.len(), merged.records.len());
    // Each shard sent its own arrivals, from its own host.
    for (i, b) in shards.iter().enumerate() {
        for r in records(b) {
            if matches!(r.phase, Phase::Warmup | Phase::Steady | Phase::Drain) {
                assert_eq!(r.index % 3, i as u64, "shard {i} sent request {}", r.index);
            }
        }
    }
    let s = &merged.summary;
    let sh = s
        .shards
        .as_ref()
        .expect("the merged summary lists its shards");
    assert_eq!(
        sh.shards.iter().map(|x| x.steady_requests).sum::<u64>(),
        150
    );
    assert!(
        sh.shards
            .iter()
            .all(|x| x.dispatch_lag_p99_ms.is_some() && x.clock_offset_ms.is_some())
    );
    assert!(
        s.validity
            .reasons
            .iter()
            .all(|r| !r.contains("clocks disagree")),
        "{:?}",
        s.validity.reasons
    );
    // Quality probes were sent once, by shard 0.
    assert_eq!(s.phases["quality"].requests, 4);

    // The merged percentiles are those of the union of the shards' raw values (each shard's
    // on its own clock: latencies are differences, untouched by the merge's shift).
    let source = merged.contract.measurement.output_tokens;
    let origin = merged.contract.measurement.latency_origin;
    let union: Vec<Record> = shards
        .iter()
        .flat_map(|b| records(b))
        .filter(|r| r.phase == Phase::Steady && r.is_ok())
        .collect();
    let m: Vec<_> = union
        .iter()
        .map(|r| goodput::analyze::request_metrics(r, origin, source))
        .collect();
    let ttft = Dist::of(m.iter().filter_map(|x| x.ttft_ms()).collect()).unwrap();
    let e2e = Dist::of(m.iter().filter_map(|x| x.e2e_ms()).collect()).unwrap();
    let stats = &s.steady.stats;
    let (mt, me) = (
        stats.ttft_ms.as_ref().unwrap(),
        stats.e2e_ms.as_ref().unwrap(),
    );
    assert_eq!(
        (mt.count, mt.p50, mt.p90, mt.p99, mt.max),
        (ttft.count, ttft.p50, ttft.p90, ttft.p99, ttft.max)
    );
    assert_eq!((me.p50, me.p99), (e2e.p50, e2e.p99));

    // The report shows each shard's line.
    let report = goodput(&["report", merged_dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("Shards: 3 client machines"), "{text}");
    assert!(text.contains("sent by 3 shards"), "{text}");
    drop(hosts);
}

/// What `goodput merge` refuses, each naming the shard: another plan, a shard twice, a missing
/// shard, another start instant, a bundle that is no shard.
#[test]
fn merging_shards_that_are_not_one_run_is_refused_naming_the_shard() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt.block_on(common::sim(goodput::sim::SimConfig::default()));
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let path = d.join("c.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"two\"\n[target]\nurl = \"http://{}\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 4 }}\n[load]\nrate = 40\nrequests = 10\n[warmup]\nrequests = 0\n[quality]\nmode = \"none\"\n",
            sim.addr()
        ),
    )
    .unwrap();
    let b = run_shards(&[None, None], &path, d, 5);
    let (b0, b1) = (b[0].to_str().unwrap(), b[1].to_str().unwrap());
    let refuse = |args: &[&str], says: &[&str]| {
        let mut all = vec!["merge"];
        all.extend(args);
        all.extend(["--out", d.to_str().unwrap()]);
        let out = goodput(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        for s in says {
            assert!(err.contains(s), "{args:?} should say {s:?}: {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    };
    refuse(&[b0, b0, b1], &["shard 0/2 is given twice", b0]);
    refuse(&[b1], &["shard 0/2 missing", b1]);
    // Another plan: the same shard 1 with another seed.
    let other = d.join("other");
    copy_dir(&b[1], &other);
    let text = std::fs::read_to_string(other.join("contract.toml")).unwrap();
    std::fs::write(
        other.join("contract.toml"),
        text.replacen("seed = ", "seed = 9", 1),
    )
    .unwrap();
    let o = other.to_str().unwrap();
    refuse(&[b0, o], &["belongs to a different plan", "workload", o]);
    // Another start instant.
    let late = d.join("late");
    copy_dir(&b[1], &late);
    let text = std::fs::read_to_string(late.join("contract.toml")).unwrap();
    let at = text
        .lines()
        .find(|l| l.starts_with("start_at"))
        .unwrap()
        .to_owned();
    std::fs::write(
        late.join("contract.toml"),
        text.replace(&at, "start_at = \"2030-01-01T00:00:00Z\""),
    )
    .unwrap();
    let l = late.to_str().unwrap();
    refuse(&[b0, l], &["started at 2030-01-01T00:00:00Z", l]);
    // The same instant spelt another way is the same run: a volume holding both merges, and
    // a --start-at that is no instant is refused by its reason.
    let vol = d.join("vol");
    copy_dir(&b[0], &vol.join("s0"));
    copy_dir(&b[1], &vol.join("s1"));
    let text = std::fs::read_to_string(vol.join("s1/contract.toml")).unwrap();
    let at: jiff::Timestamp = text
        .lines()
        .find_map(|l| l.strip_prefix("start_at = "))
        .unwrap()
        .trim_matches('"')
        .parse()
        .unwrap();
    let spelt = at.display_with_offset(jiff::tz::Offset::constant(1));
    std::fs::write(
        vol.join("s1/contract.toml"),
        text.replace(&at.to_string(), &spelt.to_string()),
    )
    .unwrap();
    assert!(
        std::fs::read_to_string(vol.join("s1/contract.toml"))
            .unwrap()
            .contains("+01:00")
    );
    let v = vol.to_str().unwrap();
    let joined = goodput(&["merge", v, "--out", d.join("vol-merged").to_str().unwrap()]);
    assert!(
        joined.status.success(),
        "{}",
        String::from_utf8_lossy(&joined.stderr)
    );
    refuse(&[v, "--start-at", "tomorrow"], &["--start-at", "RFC 3339"]);
    // Not a shard at all.
    let whole = goodput(&[
        "run",
        path.to_str().unwrap(),
        "-q",
        "--out",
        d.join("whole").to_str().unwrap(),
    ]);
    assert!(whole.status.success());
    let w = bundle_in(&d.join("whole"));
    refuse(&[b0, w.to_str().unwrap()], &["is not a shard's bundle"]);
    // Issue #46: a shard whose records lie days from its own run, a request in two shards,
    // an empty shard: each refused naming it, before anything is written.
    let edit = |name: &str, f: &dyn Fn(&mut Vec<goodput::record::Record>)| {
        let to = d.join(name);
        copy_dir(&b[1], &to);
        let mut records = goodput::bundle::Bundle::load(&to).unwrap().records;
        f(&mut records);
        goodput::bundle::Bundle::open(&to)
            .unwrap()
            .rewrite_records(&records)
            .unwrap();
        to
    };
    let days = edit("days-off", &|rs| {
        for r in rs.iter_mut() {
            r.shift(1_000_000_000_000);
        }
    });
    let dup = edit("dup", &|rs| {
        let theirs = goodput::bundle::Bundle::load(&b[0]).unwrap().records[0].index;
        rs[0].index = theirs;
    });
    let empty = edit("empty", &|rs| rs.clear());
    let merged_before = std::fs::read_dir(d).unwrap().count();
    let days = days.to_str().unwrap();
    refuse(&[b0, days], &["on the shard's clock", "clock jumped", days]);
    refuse(
        &[b0, dup.to_str().unwrap()],
        &["is in shard 0/2 and in", "once"],
    );
    refuse(
        &[b0, empty.to_str().unwrap()],
        &["holds no record", "--allow-empty"],
    );
    assert_eq!(
        std::fs::read_dir(d).unwrap().count(),
        merged_before,
        "a refused merge wrote nothing"
    );
    // A start instant already past is refused before anything is sent.
    let past = goodput(&[
        "run",
        path.to_str().unwrap(),
        "-q",
        "--shard",
        "0/2",
        "--start-at",
        "2020-01-01T00:00:00Z",
    ]);
    assert_eq!(past.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&past.stderr).contains("passed"));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// `target.urls`: round robin sends plan index `i` to URL `i mod n`, `spread = "session"` keeps a
/// session's every turn on its first turn's URL; each record names its URL, the replica it
/// names is the one that served it (its ground truth), and the summary's per-replica figures
/// count those records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_get_their_requests_by_the_stated_rule_and_each_is_reported() {
    let fast = goodput::sim::SimConfig {
        decode_base_ms: 2.0,
        decode_per_seq_ms: 0.0,
        ..Default::default()
    };
    let sims = [common::sim(fast.clone()).await, common::sim(fast).await];
    let urls = format!("[\"{}\", \"{}\"]", sims[0].base_url(), sims[1].base_url());
    let dir = tempfile::tempdir().unwrap();
    for (spread, sessions) in [
        ("round_robin", ""),
        (
            "session",
            "[workload.sessions]\nturns = { dist = \"fixed\", value = 3 }\nthink_ms = { dist = \"fixed\", value = 10 }\n",
        ),
    ] {
        let c = common::parse(&format!(
            "[target]\nurls = {urls}\nspread = \"{spread}\"\n[workload]\noutput_tokens = {{ dist = \"fixed\", value = 6 }}\n{sessions}[load]\nrate = 40\nrequests = 30\n[warmup]\nrequests = 0\n[slo]\nttft_ms = 1000\n[quality]\nmode = \"none\"\n[measurement]\nserver_metrics_interval = 0\n"
        ));
        let r = common::run_in(c, dir.path()).await;
        let truth = [common::truth_by_id(&sims[0]), common::truth_by_id(&sims[1])];
        let mut sent = [0u64; 2];
        for rec in r
            .records
            .iter()
            .filter(|x| x.phase == goodput::plan::Phase::Steady)
        {
            let k = rec.url.expect("each record names its URL") as usize;
            let expected = match spread {
                "session" => rec.session.expect("a session's turn") % 2,
                _ => rec.index % 2,
            };
            assert_eq!(k as u64, expected, "{spread}: request {}", rec.index);
            assert!(
                truth[k].contains_key(&rec.request_id),
                "{spread}: {} not served by URL {k}",
                rec.request_id
            );
            assert!(!truth[1 - k].contains_key(&rec.request_id));
            sent[k] += 1;
        }
        let reps = r
            .summary
            .steady
            .replicas
            .as_ref()
            .expect("per-replica figures");
        assert_eq!(
            [reps[0].steady_requests, reps[1].steady_requests],
            sent,
            "{spread}"
        );
        assert!(sent[0] > 0 && sent[1] > 0, "{spread}: {sent:?}");
        assert!(
            reps.iter()
                .all(|x| x.attainment == Some(1.0) && x.ttft_p99_ms.is_some())
        );
        let report = goodput::report::document(&r.summary).terminal();
        assert!(report.contains("Replicas: 2 target URLs"), "{report}");
        assert!(report.contains("and 1 more replica"), "{report}");
    }
}
