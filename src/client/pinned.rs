//! `target.tls.ca_file` naming the server's own certificate. TLS verifies a chain to a trust
//! anchor, and a certificate that is itself a CA (basicConstraints CA:TRUE, what
//! `openssl req -x509` makes by default) is refused as a server's own (webpki's
//! `CaUsedAsEndEntity`) even when it is the anchor. curl and browsers accept a self-signed
//! certificate the user pinned; so does goodput: when the server presents a certificate
//! byte-for-byte identical to one in `ca_file`, it is trusted as pinned, its name still checked
//! against the target's host. Everything else is verified as before (the platform's store and
//! `ca_file`'s certificates as roots), and the handshake's signatures always are.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

#[derive(Debug)]
pub struct PinnedOrVerified {
    provider: Arc<rustls::crypto::CryptoProvider>,
    inner: Arc<dyn ServerCertVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    /// `target.tls.insecure`: any certificate is accepted (the handshake's signatures are
    /// still checked against it).
    accept_any: bool,
}

impl PinnedOrVerified {
    /// Verifies against `pinned` as roots (and the platform's store unless `roots_only`),
    /// and accepts a server certificate identical to one of them.
    pub fn new(pinned: Vec<CertificateDer<'static>>, roots_only: bool) -> anyhow::Result<Self> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let inner: Arc<dyn ServerCertVerifier> = if roots_only {
            let mut roots = rustls::RootCertStore::empty();
            let (_, _) = roots.add_parsable_certificates(pinned.iter().cloned());
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()?
        } else {
            match rustls_platform_verifier::Verifier::new_with_extra_roots(
                pinned.iter().cloned(),
                provider.clone(),
            ) {
                Ok(v) => Arc::new(v),
                // A machine with no certificate store (a container from scratch): ca_file's
                // certificates alone.
                Err(_) => return Self::new(pinned, true),
            }
        };
        Ok(PinnedOrVerified {
            provider,
            inner,
            pinned,
            accept_any: false,
        })
    }

    /// Accepts any certificate (`target.tls.insecure`), as reqwest's
    /// `danger_accept_invalid_certs` does.
    pub fn accepting_any(mut self) -> Self {
        self.accept_any = true;
        self
    }

    /// A rustls client configuration that verifies with this.
    pub fn client_config(self) -> anyhow::Result<rustls::ClientConfig> {
        Ok(
            rustls::ClientConfig::builder_with_provider(self.provider.clone())
                .with_protocol_versions(rustls::DEFAULT_VERSIONS)?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(self))
                .with_no_client_auth(),
        )
    }
}

impl ServerCertVerifier for PinnedOrVerified {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.accept_any {
            return Ok(ServerCertVerified::assertion());
        }
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(v) => Ok(v),
            Err(e) => {
                if !self
                    .pinned
                    .iter()
                    .any(|p| p.as_ref() == end_entity.as_ref())
                {
                    return Err(e);
                }
                // The very certificate the user named: trusted as pinned, for its own names.
                let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&cert, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        false
    }
}
