//! The CLI's HTTP client, plain or over TLS (`https://`), for an API served
//! with `tls.api` (docs/security.md "The CLI over TLS").
//!
//! ureq 2 is built here without its own TLS (its `tls` feature would pull
//! in a second set of trust roots); its [`ureq::TlsConnector`] hook is
//! given a rustls client with the ring provider the rest of the elector
//! already uses, trusting only the CA file the operator names, and
//! presenting a client certificate when the API asks for one
//! (`tls.api.client_ca_file`). A handshake is completed before the request
//! is written so a refusal is reported as such, not as a garbled response.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{AlertDescription, ClientConfig, ClientConnection, StreamOwned};

use super::{CliError, CONNECT_TIMEOUT};
use crate::tls::files::{provider, read_identity, read_roots, IdentityKeys};

/// The TLS flags every API command takes.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct ApiTlsArgs {
    /// PEM CA certificate(s) the API's certificate must chain to; needed
    /// for an `https://` address (default with --config: that config's
    /// `tls.api.ca_file`).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate (chain) to present when the API requires one
    /// (its `tls.api.client_ca_file` is set); needs --key-file.
    #[arg(long, value_name = "FILE", requires = "key_file")]
    pub cert_file: Option<PathBuf>,
    /// PEM private key of --cert-file (mode 0600 or 0400).
    #[arg(long, value_name = "FILE", requires = "cert_file")]
    pub key_file: Option<PathBuf>,
}

const CA_FLAG: &str = "--ca-file";
const IDENTITY_FLAGS: IdentityKeys = IdentityKeys {
    cert: "--cert-file",
    key: "--key-file",
};

/// The TLS an `https://` API is reached with: the CA it must chain to and
/// whether a client certificate is presented.
#[derive(Clone)]
struct ClientTls {
    config: Arc<ClientConfig>,
    ca_file: PathBuf,
    with_identity: bool,
}

/// The CLI's HTTP client: plain for `http://` and a bare `HOST:PORT`,
/// TLS for `https://` when a CA file is given.
#[derive(Clone, Default)]
pub struct ApiClient {
    tls: Option<ClientTls>,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("ca_file", &self.tls.as_ref().map(|t| &t.ca_file))
            .finish()
    }
}

impl ApiClient {
    /// A client for plain HTTP only (an `https://` address is refused with
    /// [`CliError::HttpsNeedsCa`]).
    pub fn plain() -> ApiClient {
        ApiClient::default()
    }

    /// Reads the files the flags name; without --ca-file the client speaks
    /// plain HTTP only.
    pub fn new(args: &ApiTlsArgs) -> Result<ApiClient, CliError> {
        let Some(ca_file) = &args.ca_file else {
            if args.cert_file.is_some() || args.key_file.is_some() {
                return Err(CliError::Usage(
                    "--cert-file and --key-file need --ca-file (the CA the API's certificate chains to)"
                        .into(),
                ));
            }
            return Ok(ApiClient::plain());
        };
        let roots = read_roots(CA_FLAG, ca_file)?;
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| CliError::Usage(format!("TLS setup: {e}")))?
            .with_root_certificates(roots);
        let (mut config, with_identity) = match (&args.cert_file, &args.key_file) {
            (Some(cert), Some(key)) => {
                let (certs, key) = read_identity(IDENTITY_FLAGS, cert, key)?;
                let config = builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| CliError::Usage(format!("--cert-file/--key-file: {e}")))?;
                (config, true)
            }
            (None, None) => (builder.with_no_client_auth(), false),
            _ => {
                return Err(CliError::Usage(
                    "--cert-file and --key-file go together".into(),
                ))
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ApiClient {
            tls: Some(ClientTls {
                config: Arc::new(config),
                ca_file: ca_file.clone(),
                with_identity,
            }),
        })
    }

    /// Like [`ApiClient::new`], a node's config filling in --ca-file when
    /// it serves its API with `tls.api` and names a `ca_file`
    /// ([`config_ca_file`]).
    pub fn for_config(
        args: &ApiTlsArgs,
        config: Option<&crate::config::Config>,
    ) -> Result<ApiClient, CliError> {
        let mut args = args.clone();
        if let Some(config) = config.filter(|c| c.tls.api.is_some()) {
            if args.ca_file.is_none() {
                args.ca_file = config_ca_file(config).map(Path::to_path_buf);
            }
        }
        ApiClient::new(&args)
    }

    /// An agent for `url`; an `https://` one without a CA is refused here,
    /// before anything is sent.
    pub(super) fn agent(&self, url: &str, read_timeout: Duration) -> Result<ureq::Agent, CliError> {
        let mut builder = ureq::AgentBuilder::new()
            .timeout_connect(CONNECT_TIMEOUT)
            .timeout_read(read_timeout);
        if url.starts_with("https://") {
            let Some(tls) = &self.tls else {
                return Err(CliError::HttpsNeedsCa { url: url.into() });
            };
            builder = builder.tls_connector(Arc::new(Connector(Arc::clone(&tls.config))));
        }
        Ok(builder.build())
    }

    /// A ureq transport error as a [`CliError`]: a TLS refusal in plain
    /// words (an untrusted server, a client certificate missing or
    /// refused), anything else as ureq says it.
    pub(super) fn transport_error(&self, url: &str, t: &ureq::Transport) -> CliError {
        let url = url.to_string();
        let (Some(tls), Some(e)) = (&self.tls, rustls_error(t)) else {
            return CliError::Transport {
                url,
                message: super::transport_message(t),
            };
        };
        let detail = e.to_string();
        match e {
            rustls::Error::InvalidCertificate(_) => CliError::Untrusted {
                url,
                ca_file: tls.ca_file.clone(),
                detail,
            },
            rustls::Error::AlertReceived(
                AlertDescription::CertificateRequired | AlertDescription::HandshakeFailure,
            ) if !tls.with_identity => CliError::ClientCertRequired { url },
            rustls::Error::AlertReceived(
                AlertDescription::BadCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::CertificateExpired
                | AlertDescription::CertificateUnknown
                | AlertDescription::DecryptError,
            ) if tls.with_identity => CliError::ClientCertRefused { url, detail },
            _ => CliError::Handshake { url, detail },
        }
    }
}

/// The rustls error under a ureq transport error, if there is one (the
/// handshake and every read or write of a TLS stream report theirs inside
/// an `io::Error`).
fn rustls_error(t: &ureq::Transport) -> Option<&rustls::Error> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(t);
    while let Some(e) = next {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(r) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(r);
        }
        next = e.source();
    }
    None
}

/// ureq's TLS hook for `config` (also the watchdog's, `tls::pinned`).
pub(crate) fn connector(config: Arc<ClientConfig>) -> Arc<Connector> {
    Arc::new(Connector(config))
}

/// ureq's TLS hook, driving rustls over the TCP stream ureq opened.
pub(crate) struct Connector(Arc<ClientConfig>);

impl ureq::TlsConnector for Connector {
    fn connect(
        &self,
        dns_name: &str,
        mut io: Box<dyn ureq::ReadWrite>,
    ) -> Result<Box<dyn ureq::ReadWrite>, ureq::Error> {
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        let host = dns_name.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| invalid(format!("{host:?} is not a DNS name or an IP address: {e}")))?;
        let mut conn =
            ClientConnection::new(Arc::clone(&self.0), name).map_err(|e| invalid(e.to_string()))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut io)?;
        }
        Ok(Box::new(TlsStream(StreamOwned::new(conn, io))))
    }
}

#[derive(Debug)]
struct TlsStream(StreamOwned<ClientConnection, Box<dyn ureq::ReadWrite>>);

impl ureq::ReadWrite for TlsStream {
    fn socket(&self) -> Option<&TcpStream> {
        self.0.sock.socket()
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// A peer's API address as reached from `asked`: an address with its own
/// scheme keeps it; a bare `HOST:PORT` (how `/status` lists peers and
/// names the primary) takes `asked`'s, since a cluster serves its API the
/// same way on every member (docs/security.md).
pub fn inherit_scheme(asked: &str, other: &str) -> String {
    if other.starts_with("http://") || other.starts_with("https://") {
        other.to_string()
    } else if asked.starts_with("https://") {
        format!("https://{other}")
    } else {
        other.to_string()
    }
}

/// The CA file a config offers for its own API when no --ca-file is
/// given: `tls.api.ca_file`, the CA the config says the API's clients
/// should trust. Nothing else stands in for it: `client_ca_file` verifies
/// clients and `tls.election.ca_file` the members, and either may be
/// another CA than the one that signed the API's certificate.
pub fn config_ca_file(config: &crate::config::Config) -> Option<&Path> {
    config.tls.api.as_ref().and_then(|a| a.ca_file.as_deref())
}
