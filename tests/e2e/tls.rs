//! Issue #21: HTTPS with the default build. The simulator behind a TLS-terminating proxy whose
//! certificate a certificate authority made here signed: trusted through `target.tls.ca_file`,
//! the run measures as over plain HTTP; without it, every request fails with an error that says
//! the certificate is not trusted and how to fix it; `insecure` runs, loudly.

use crate::common;

use std::sync::Arc;

use goodput::sim::SimConfig;
use tokio::net::TcpListener;
use tokio_rustls::rustls;

/// A test CA's PEM, and a server configuration whose certificate for 127.0.0.1 it signed.
fn certificates() -> (String, Arc<rustls::ServerConfig>) {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "goodput test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let chain = vec![leaf.der().clone(), ca.der().clone()];
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    (ca.pem(), Arc::new(config))
}

/// Terminates TLS on a port of its own and forwards each connection to `to` (plain HTTP).
async fn tls_proxy(config: Arc<rustls::ServerConfig>, to: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (acceptor, to) = (acceptor.clone(), to.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(sock).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(&to).await else {
                    return;
                };
                let _ = plain.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    format!("https://127.0.0.1:{port}")
}

/// The first file named `name` under `dir`.
fn find(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    std::fs::read_dir(dir).ok()?.find_map(|e| {
        let p = e.ok()?.path();
        if p.is_dir() {
            find(&p, name)
        } else {
            p.file_name().is_some_and(|n| n == name).then_some(p)
        }
    })
}

fn contract(url: &str, tls: &str) -> String {
    format!(
        "name = \"tls\"\n[target]\nurl = \"{url}\"\nmax_connect_failures = 3\n{tls}[workload]\ninput_tokens = {{ dist = \"fixed\", value = 16 }}\noutput_tokens = {{ dist = \"fixed\", value = 8 }}\n[load]\nkind = \"open\"\nrate = 20\nrequests = 20\n[warmup]\nrequests = 0\n[measurement]\nserver_metrics_interval = 0\n"
    )
}

/// `goodput run` of `contract`, written into `dir`, off the runtime's threads.
async fn goodput_run(dir: &std::path::Path, contract: String) -> std::process::Output {
    let path = dir.join("c.toml");
    std::fs::write(&path, contract).unwrap();
    let runs = dir.join("runs");
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_goodput"))
            .args([
                "run",
                "-q",
                path.to_str().unwrap(),
                "--format",
                "json",
                "--out",
            ])
            .arg(runs)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_the_default_build_trusting_only_what_the_contract_names() {
    let sim = common::sim(SimConfig {
        decode_base_ms: 2.0,
        decode_per_seq_ms: 0.0,
        ..SimConfig::default()
    })
    .await;
    let (ca_pem, config) = certificates();
    let url = tls_proxy(
        config,
        sim.base_url().trim_start_matches("http://").to_owned(),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), &ca_pem).unwrap();

    // Trusted through the CA file (beside the contract): every request succeeds.
    let out = goodput_run(
        dir.path(),
        contract(&url, "[target.tls]\nca_file = \"ca.pem\"\n"),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["steady"]["ok"], 20, "{s}");
    assert_eq!(s["steady"]["failed"], 0, "{s}");
    // environment.json says what was trusted, and times each connection the load opened
    // (TLS handshake included): at least one, at most one per request.
    let env = find(&dir.path().join("runs"), "environment.json").unwrap();
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env).unwrap()).unwrap();
    let http = &env["client_http"];
    assert!(http["tls"].as_str().unwrap().contains("ca.pem"), "{http}");
    // The load's own pool (the preflight's connections are reqwest's): at least one, at most
    // one per request, each with its handshake timed, and the sessions it negotiated named.
    let opened = http["connections"]["opened"].as_u64().unwrap();
    assert!((1..=20).contains(&opened), "{http}");
    assert!(
        http["connections"]["setup_ms"]["p50"].as_f64().unwrap() > 0.0,
        "{http}"
    );
    let sessions = http["connections"]["tls_sessions"].as_object().unwrap();
    assert!(
        sessions
            .keys()
            .any(|k| k.starts_with("TLSv1_3") && k.ends_with("ALPN none")),
        "{http}"
    );
    assert_eq!(
        sessions.values().filter_map(|v| v.as_u64()).sum::<u64>(),
        opened,
        "{http}"
    );

    // The same without it: the platform's store does not hold the test CA. Every request
    // fails, and the error says why and what to set.
    let bare = tempfile::tempdir().unwrap();
    let out = goodput_run(bare.path(), contract(&url, "")).await;
    assert!(!out.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        all.contains("the server's TLS certificate is not trusted")
            && all.contains("target.tls.ca_file"),
        "{all}"
    );

    // insecure: runs, and says so as a warning in the summary.
    let loose = tempfile::tempdir().unwrap();
    let out = goodput_run(
        loose.path(),
        contract(&url, "[target.tls]\ninsecure = true\n"),
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["steady"]["ok"], 20, "{s}");
    assert!(
        s["warnings"].to_string().contains("NOT verified"),
        "{}",
        s["warnings"]
    );

    // A CA file that is not PEM is a contract error naming the file, line and key.
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(bad.path().join("ca.pem"), "not a certificate\n").unwrap();
    let out = goodput_run(
        bad.path(),
        contract(&url, "[target.tls]\nca_file = \"ca.pem\"\n"),
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && stderr.contains("c.toml:6: `target.tls.ca_file`")
            && stderr.contains("holds no PEM certificate"),
        "{stderr}"
    );
}

/// Issue #46, item 10: a self-signed certificate that is also a CA (CA:TRUE, openssl's
/// default), named in `ca_file`, is trusted as the server's own, pinned, as curl and browsers
/// trust it (webpki alone refuses a CA as a server's certificate); its name is still checked:
/// the same kind of certificate made for another host is refused, with advice that matches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_ca_named_in_ca_file_is_trusted_as_pinned_for_its_own_name() {
    let sim = common::sim(SimConfig::default()).await;
    let serve = |host: &str| {
        let mut params = rcgen::CertificateParams::new(vec![host.to_owned()]).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
        (cert.pem(), Arc::new(config))
    };
    for (host, trusted) in [("127.0.0.1", true), ("other.example", false)] {
        let (pem, config) = serve(host);
        let url = tls_proxy(
            config,
            sim.base_url().trim_start_matches("http://").to_owned(),
        )
        .await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("self.pem"), pem).unwrap();
        let out = goodput_run(
            dir.path(),
            contract(&url, "[target.tls]\nca_file = \"self.pem\"\n"),
        )
        .await;
        let stderr = common::unwrapped(&String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.success(), trusted, "{host}: {stderr}");
        if !trusted {
            assert!(
                stderr.contains("was not made for the host in target.url")
                    && !stderr.contains("set target.tls.ca_file"),
                "{host}: {stderr}"
            );
        }
    }
}
