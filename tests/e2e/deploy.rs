//! `deploy/k8s/`: the manifests validate against the Kubernetes API's schemas offline
//! (`scripts/k8s.sh validate`, which installs the validator from PyPI), and the fields the
//! scale-out guide's walkthrough (docs/guide/scale-out.md) relies on hold: an Indexed Job whose completions, parallelism and
//! `--shard` agree, the shard index from `JOB_COMPLETION_INDEX`, one start instant, the
//! ConfigMap and volume the pods mount. Then the Job's own arguments are run as three shard
//! processes against a simulator (only the target and the run's length changed) and merged
//! with the merge Job's arguments, so the walkthrough's commands are known to work.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_goodput");

/// Runs `cmd`, which must succeed; its standard output.
fn ok(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}{}",
        cmd,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn manifest(name: &str) -> Value {
    let out = ok(Command::new("scripts/k8s.sh").args(["json", &format!("deploy/k8s/{name}")]));
    let docs: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        docs.as_array().map(Vec::len),
        Some(1),
        "{name}: one document"
    );
    docs[0].clone()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_manifests_validate_and_agree_with_each_other_and_the_cli() {
    ok(Command::new("scripts/k8s.sh").arg("validate"));
    let config = manifest("contract.yaml");
    let pvc = manifest("bundles.yaml");
    let shards = manifest("shards.yaml");
    let merge = manifest("merge.yaml");
    let collect = manifest("collect.yaml");

    // The shard Job: Indexed, N pods at once, never retried into the same run.
    let spec = &shards["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    let n = spec["completions"].as_u64().unwrap();
    assert_eq!(spec["parallelism"].as_u64(), Some(n));
    assert_eq!(spec["backoffLimit"], 0);
    let pod = &spec["template"]["spec"];
    let c = &pod["containers"][0];
    let args = strings(&c["args"]);
    let at = |flag: &str| args[args.iter().position(|a| a == flag).unwrap() + 1].clone();
    assert_eq!(args[0], "run");
    assert_eq!(at("--shard"), format!("$(JOB_COMPLETION_INDEX)/{n}"));
    assert_eq!(at("--start-at"), "$(START_AT)");
    let env = c["env"].as_array().unwrap();
    assert!(
        env.iter()
            .any(|e| e["name"] == "START_AT" && e["value"] == "@START_AT@")
    );
    // One shard per node.
    let anti =
        &pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(anti["topologyKey"], "kubernetes.io/hostname");
    for (k, v) in anti["labelSelector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&spec["template"]["metadata"]["labels"][k], v);
    }
    // The contract file the args name is the ConfigMap's key, mounted where they say.
    let contract_path = Path::new(&args[1]);
    let mounts = c["volumeMounts"].as_array().unwrap();
    let mount_of = |name: &str| {
        mounts.iter().find(|m| m["name"] == name).unwrap()["mountPath"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let volume = |pod: &Value, name: &str| {
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        contract_path.parent().unwrap(),
        Path::new(&mount_of("contract"))
    );
    assert_eq!(
        volume(pod, "contract")["configMap"]["name"],
        config["metadata"]["name"]
    );
    let key = contract_path.file_name().unwrap().to_str().unwrap();
    let toml = config["data"][key].as_str().unwrap();
    assert_eq!(at("--out"), mount_of("bundles"));
    let claim = &pvc["metadata"]["name"];
    assert_eq!(pvc["spec"]["accessModes"][0], "ReadWriteMany");
    assert_eq!(
        volume(pod, "bundles")["persistentVolumeClaim"]["claimName"],
        *claim
    );
    let mpod = &merge["spec"]["template"]["spec"];
    assert_eq!(
        volume(mpod, "bundles")["persistentVolumeClaim"]["claimName"],
        *claim
    );
    assert_eq!(
        volume(&collect["spec"], "bundles")["persistentVolumeClaim"]["claimName"],
        *claim
    );
    let margs = strings(&mpod["containers"][0]["args"]);
    assert_eq!(margs[0], "merge");
    let contract = goodput::contract::parse(toml, Path::new("contract.toml")).unwrap();
    // The merge Job reads the shards' bundles where `run --out` puts them: under the
    // contract's name.
    assert_eq!(margs[1], format!("{}/{}", at("--out"), contract.name));

    // The Job's arguments, run: three shards (the index and start filled in as Kubernetes
    // does), then the merge Job's.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sim = rt.block_on(goodput::sim::SimServer::start(
        goodput::sim::SimConfig::default(),
        ([127, 0, 0, 1], 0).into(),
        None,
    ));
    let sim = sim.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The pod's paths, in this test's directory.
    let local = |a: &str| match a.strip_prefix('/') {
        Some(rest) if ["contract", "bundles"].iter().any(|m| rest.starts_with(m)) => {
            d.join(rest).to_str().unwrap().to_owned()
        }
        _ => a.to_owned(),
    };
    std::fs::create_dir_all(d.join("contract")).unwrap();
    std::fs::write(d.join("contract").join(key), toml).unwrap();
    let start = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(6))
        .unwrap()
        .to_string();
    let children: Vec<_> = (0..n)
        .map(|i| {
            let args: Vec<String> = args
                .iter()
                .map(|a| {
                    local(a)
                        .replace("$(JOB_COMPLETION_INDEX)", &i.to_string())
                        .replace("$(START_AT)", &start)
                })
                .collect();
            Command::new(BIN)
                .args(&args)
                // This machine's engine, and a short run.
                .args(["--url", &sim.base_url(), "--rate", "20", "--duration", "2s"])
                .args([
                    "--set",
                    "warmup.duration=0.5s",
                    "--set",
                    "workload.input_tokens.max=256",
                    "--set",
                    "workload.output_tokens.max=24",
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for ch in children {
        let o = ch.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let margs: Vec<String> = margs
        .iter()
        .map(|a| local(a).replace("@START_AT@", &start))
        .collect();
    let out = ok(Command::new(BIN).args(&margs).args(["--format", "json"]));
    let s: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(s["shards"]["count"].as_u64(), Some(n), "{s}");
}
