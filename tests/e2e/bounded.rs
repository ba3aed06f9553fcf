//! Issue #70, items 5 to 11: no input can hang or abort a command, and what a command reads
//! from elsewhere is checked before it is vouched for. Each test names its item; every goodput
//! process is held to the hostile cases' memory bound ([`common::output_within_memory`]).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn goodput(args: &[&str], dir: &Path) -> Output {
    common::output_within_memory(
        Command::new(env!("CARGO_BIN_EXE_goodput"))
            .args(args)
            .current_dir(dir),
    )
}

fn stderr(out: &Output) -> String {
    common::unwrapped(&String::from_utf8_lossy(&out.stderr))
}

/// A copy of the small fixture bundle under `dir`.
fn bundle_copy(dir: &Path, name: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundles/small");
    let to = dir.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(&from).unwrap().flatten() {
        if e.path().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    to
}

/// A bundle of a few requests against the embedded simulator, under `dir/runs/tiny`.
fn tiny_bundle(dir: &Path) -> PathBuf {
    std::fs::write(
        dir.join("c.toml"),
        "name = \"tiny\"\n[workload]\noutput_tokens = { dist = \"fixed\", value = 4 }\n[load]\nkind = \"open\"\nrate = 50\nrequests = 5\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n",
    )
    .unwrap();
    let out = goodput(&["run", "c.toml", "-q", "--out", "runs"], dir);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::read_dir(dir.join("runs/tiny"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// Item 5: a `requests.jsonl` of one 4 GiB line (no newline) aborted `report` ("memory
/// allocation of 1073741824 bytes failed", exit 134). It is named, within the memory bound.
#[test]
fn a_records_file_of_one_huge_line_is_named_never_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let b = bundle_copy(dir.path(), "huge-line");
    // Sparse: 4 GiB of zero bytes, none of them a newline, costing no disk.
    let f = std::fs::File::create(b.join("requests.jsonl")).unwrap();
    f.set_len(4 << 30).unwrap();
    drop(f);
    let started = std::time::Instant::now();
    let out = goodput(&["report", b.to_str().unwrap()], dir.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("requests.jsonl:1") && err.contains("a line longer than 60 MiB"),
        "{err}"
    );
    // Named after reading one line's limit, not after scanning the file once per block.
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
}

/// Item 6: a named pipe as `target.tls.ca_file`, given to `audit`, or as the compared file
/// waited for a writer forever; each is refused by name at once. (`compare` called it "not a
/// goodput bundle", item 10.)
#[test]
fn a_named_pipe_is_refused_by_name_never_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.json");
    mkfifo(&fifo);
    std::fs::write(
        dir.path().join("c.toml"),
        "name = \"ca\"\n[target]\nurl = \"https://127.0.0.1:9\"\n[target.tls]\nca_file = \"pipe.json\"\n[load]\nkind = \"open\"\nrate = 1\nrequests = 2\n",
    )
    .unwrap();
    let b = bundle_copy(dir.path(), "b");
    let b = b.to_str().unwrap();
    for (args, names) in [
        (vec!["run", "c.toml", "-q"], "target.tls.ca_file"),
        (vec!["audit", "pipe.json"], "pipe.json"),
        (vec!["compare", "pipe.json", b], "pipe.json"),
        (vec!["compare", b, "pipe.json"], "pipe.json"),
    ] {
        let started = std::time::Instant::now();
        let out = goodput(&args, dir.path());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(names) && err.contains("a named pipe (FIFO)"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("not a goodput bundle (needs"),
            "{args:?}: {err}"
        );
        assert!(started.elapsed().as_secs() < 10, "{args:?} waited");
    }
}

/// Item 6: `history show` against a port that accepts and never answers waited forever; it
/// names the store within seconds.
#[test]
fn a_history_store_that_never_answers_is_named_within_seconds() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts, reads, and never writes a byte.
    let held = std::thread::spawn(move || {
        let mut conns = Vec::new();
        for c in listener.incoming().take(4).flatten() {
            conns.push(c);
        }
        std::thread::park_timeout(std::time::Duration::from_secs(60));
    });
    let dir = tempfile::tempdir().unwrap();
    let store = format!("postgres://goodput@127.0.0.1:{port}/history");
    let started = std::time::Instant::now();
    let out = goodput(&["history", "show", "--store", &store], dir.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.contains("no answer within 10 s"),
        "{err}"
    );
    let took = started.elapsed().as_secs_f64();
    assert!((9.0..30.0).contains(&took), "{took} s");
    drop(held);
}

/// Item 10: a store that is a device, or in a directory nobody may write, is named as such
/// ("holds no history yet", "unable to open database file (code 14)" before).
#[test]
fn a_store_that_is_a_device_or_cannot_be_written_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let b = tiny_bundle(dir.path());
    let out = goodput(&["history", "show", "--store", "/dev/zero"], dir.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("/dev/zero") && err.contains("a device, not a file"),
        "{err}"
    );
    // A read-only file system (this test may run as root, whom a directory's mode does not
    // stop): a tmpfs mounted read-only in a mount namespace of its own.
    std::fs::create_dir(dir.path().join("ro")).unwrap();
    let script = format!(
        "mount -t tmpfs -o ro tmpfs ro || exit 99; {} history add {} --store ro/history.sqlite",
        env!("CARGO_BIN_EXE_goodput"),
        b.display()
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ro/history.sqlite") && err.contains("cannot write in ro"),
        "{err}"
    );
    assert!(!err.contains("code 14"), "{err}");
}

/// The vLLM result fixture as JSON, for a test to edit.
fn vllm_result() -> serde_json::Value {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/audit/vllm-bench-serve.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Item 7: `compare` vouched for a result whose settings were absurd ("Their recorded settings
/// match this run's contract"), compared a file of strings as zero figures with exit 0,
/// dropped NaN figures silently and printed -1e308 as 309 digits; a 300 MB file cost 824 MB.
#[test]
fn compare_checks_what_it_reads_from_another_tool() {
    let dir = tempfile::tempdir().unwrap();
    let b = bundle_copy(dir.path(), "b");
    let b = b.to_str().unwrap();
    let write = |name: &str, v: &serde_json::Value| {
        std::fs::write(dir.path().join(name), serde_json::to_string(v).unwrap()).unwrap();
    };
    let mut absurd = vllm_result();
    absurd["num_prompts"] = serde_json::json!(1e20);
    absurd["request_rate"] = serde_json::json!("fast");
    absurd["max_concurrency"] = serde_json::json!(-1);
    absurd["mean_ttft_ms"] = serde_json::json!(-1e308);
    write("absurd.json", &absurd);
    let out = goodput(&["compare", "absurd.json", b], dir.path());
    let text = common::unwrapped(&String::from_utf8_lossy(&out.stdout));
    assert!(out.status.code().is_some(), "{}", stderr(&out));
    assert!(text.contains("NOT THE SAME WORKLOAD"), "{text}");
    for named in [
        "num_prompts: 1.000e20 is not a request count",
        "request_rate: \"fast\" is not a request rate",
        "max_concurrency: -1 is not a concurrency",
        "mean_ttft_ms (-1.000e308)",
    ] {
        assert!(text.contains(named), "no `{named}` in:\n{text}");
    }
    assert!(!text.contains("settings match"), "{text}");
    // -1e308 once printed as 309 digits.
    let longest_number = text
        .split(|c: char| !c.is_ascii_digit())
        .map(str::len)
        .max()
        .unwrap_or(0);
    assert!(longest_number < 20, "a number too wide:\n{text}");
    // A NaN figure is named, not dropped: Python's json writes NaN.
    let nan = serde_json::to_string(&vllm_result()).unwrap().replacen(
        "\"median_ttft_ms\":",
        "\"median_ttft_ms\":NaN,\"x_was\":",
        1,
    );
    std::fs::write(dir.path().join("nan.json"), nan).unwrap();
    let out = goodput(&["compare", "nan.json", b], dir.path());
    let text = common::unwrapped(&String::from_utf8_lossy(&out.stdout));
    assert!(
        text.contains(
            "Their figures that are not numbers, left out of the table: median_ttft_ms (NaN)"
        ),
        "{text}\n{}",
        stderr(&out)
    );
    // Every number a string: nothing to put beside the run, refused.
    let mut strings = vllm_result();
    for (_, v) in strings.as_object_mut().unwrap().iter_mut() {
        if v.is_number() {
            *v = serde_json::Value::String(v.to_string());
        }
    }
    write("strings.json", &strings);
    let out = goodput(&["compare", "strings.json", b], dir.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("with no figure that is a number"), "{err}");
    // A file over the peer limit is refused before it is read.
    let f = std::fs::File::create(dir.path().join("big.json")).unwrap();
    f.set_len(300 << 20).unwrap();
    drop(f);
    let out = goodput(&["compare", "big.json", b], dir.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("big.json") && err.contains("larger than 64 MiB"),
        "{err}"
    );
}

/// Item 8: a prompt larger than the simulator takes (its 2 MB body limit) ended "the target
/// stopped answering: 20 requests in a row could not connect (… Broken pipe)"; the server's
/// early 413 is read and named again.
#[test]
fn a_body_the_server_refuses_early_is_named_by_its_status() {
    let dir = tempfile::tempdir().unwrap();
    let prompt = "word ".repeat(12 << 18);
    let line = serde_json::json!({ "prompt": prompt }).to_string();
    std::fs::write(dir.path().join("big.jsonl"), format!("{line}\n")).unwrap();
    std::fs::write(
        dir.path().join("c.toml"),
        "name = \"big-prompt\"\n[target.simulator]\nmax_body_mb = 2\n[workload]\nprompt_source = \"dataset\"\ndataset = \"big.jsonl\"\noutput_tokens = { dist = \"fixed\", value = 4 }\n[load]\nkind = \"closed\"\nconcurrency = 1\nrequests = 3\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n[quality]\nmode = \"none\"\n",
    )
    .unwrap();
    let out = goodput(&["run", "c.toml", "-q", "--out", "runs"], dir.path());
    let text = common::unwrapped(&format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ));
    assert!(text.contains("413"), "{text}");
    assert!(!text.contains("could not connect"), "{text}");
    let bundle = std::fs::read_dir(dir.path().join("runs/big-prompt"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let records = std::fs::read_to_string(bundle.join("requests.jsonl")).unwrap();
    assert!(
        records.lines().all(|l| l.contains("\"http_status\":413")),
        "{}",
        &records[..records.len().min(2000)]
    );
}

/// Items 9 and 10: waits without a sane bound, and a task node's amounts whose only error was
/// "data did not match any variant of untagged enum Amount", each refused naming the file,
/// line, key and reason.
#[test]
fn waits_are_capped_and_amounts_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let node = |field: &str| {
        format!(
            "name = \"t\"\n[load]\nkind = \"open\"\nrate = 1\nrequests = 2\n[workload.task]\n[[workload.task.node]]\nname = \"plan\"\n[[workload.task.node]]\nname = \"search\"\nkind = \"tool\"\nafter = [\"plan\"]\nresult_tokens = 8\n{field}\n"
        )
    };
    let cases = [
        (node("latency_ms = 4294967295"), "latency_ms", "at most 3600000 ms"),
        (node("latency_ms = 1e15"), "latency_ms", "more than 4294967295"),
        (node("latency_ms = -100"), "latency_ms", "-100 is negative"),
        (node("latency_ms = nan"), "latency_ms", "NaN is not a count"),
        (
            node("latency_ms = 10\nthink_ms = -50"),
            "think_ms",
            "-50 is negative",
        ),
        (
            node("latency_ms = 10\ninput_tokens = 4294967296"),
            "input_tokens",
            "more than 4294967295",
        ),
        (
            "name = \"d\"\n[load]\nkind = \"open\"\nrate = 1\nduration = 1e9\n".to_owned(),
            "load.duration",
            "at most 604800 s",
        ),
        (
            "name = \"s\"\n[load]\nkind = \"open\"\n[[load.stage]]\nrate = 1\nduration = \"300h\"\n"
                .to_owned(),
            "load.stage[0].duration",
            "at most 604800 s",
        ),
    ];
    for (text, key, says) in cases {
        std::fs::write(dir.path().join("c.toml"), &text).unwrap();
        let out = goodput(&["plan", "c.toml"], dir.path());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{text}\n{err}");
        assert!(
            err.contains("c.toml") && err.contains(key) && err.contains(says),
            "{text}\n→ {err}"
        );
        assert!(!err.contains("untagged enum"), "{err}");
    }
}

/// Item 11: `history add` took a bundle whose `summary.json` was edited (a figure the few
/// checked ones leave out); the guide says such a bundle is refused.
#[test]
fn history_refuses_a_bundle_whose_summary_was_edited() {
    let dir = tempfile::tempdir().unwrap();
    let b = tiny_bundle(dir.path());
    let path = b.join("summary.json");
    let mut s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let p50 = s["steady"]["e2e_ms"]["p50"].as_f64().unwrap();
    s["steady"]["e2e_ms"]["p50"] = serde_json::json!(p50 / 2.0);
    std::fs::write(&path, serde_json::to_string_pretty(&s).unwrap()).unwrap();
    let b = b.to_str().unwrap();
    let out = goodput(&["history", "add", b, "--store", "h.sqlite"], dir.path());
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("refused") && err.contains("steady.e2e_ms.p50"),
        "{err}"
    );
}

/// Item 11: importing GuideLLM's synchronous profile dropped `--rate` without a word, and
/// `--result` took a result whose figures were NaN or negative.
#[test]
fn import_names_what_it_drops_and_what_it_cannot_read() {
    let args: Vec<String> = [
        "guidellm",
        "benchmark",
        "--target",
        "http://localhost:8000",
        "--profile",
        "synchronous",
        "--rate",
        "5",
        "--data",
        "prompt_tokens=8,output_tokens=8",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let i = goodput::peers::guidellm::import(&args).unwrap();
    assert!(
        i.breaks
            .iter()
            .any(|b| b.contains("--rate 5: dropped: a synchronous profile has no rate")),
        "{:#?}",
        i.breaks
    );
    let dir = tempfile::tempdir().unwrap();
    let mut v = vllm_result();
    v["completed"] = serde_json::json!(-5);
    let text = serde_json::to_string(&v).unwrap().replacen(
        "\"mean_ttft_ms\":",
        "\"mean_ttft_ms\":NaN,\"x_was\":",
        1,
    );
    let path = dir.path().join("theirs.json");
    std::fs::write(&path, text).unwrap();
    let c = common::parse(
        "name = \"x\"\n[load]\nkind = \"closed\"\nconcurrency = 16\nrequests = 200\n",
    );
    let (_, differs) = goodput::peers::beside::check_result(&path, &c).unwrap();
    let all = differs.join("\n");
    assert!(
        all.contains("figures that are not numbers")
            && all.contains("mean_ttft_ms (NaN)")
            && all.contains("completed (-5)"),
        "{all}"
    );
}
