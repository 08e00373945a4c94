//! A canned-response server on the webhook's own stack, for `scripts/bench-e2e`: what the
//! stack costs when the handler costs nothing.
//!
//!     cargo run --release --example canned -- --tls-cert-file certs/tls.crt \
//!         --tls-private-key-file certs/tls.key --bind-address 127.0.0.1:9444 \
//!         --response-file response.json
//!
//! Same as `bootimage-webhook serve`: an axum 0.8 router served by hyper 1's HTTP/1.1
//! connection (through hyper-util, with keep-alive and a 5 s header-read timeout: hyper's
//! own timer here, where the webhook times heads and idle connections in its IO instead),
//! over tokio-rustls on ring with TLS 1.3 and 1.2 and ALPN `http/1.1`, on a multi-thread
//! tokio runtime with the default worker count (`TOKIO_WORKER_THREADS` applies to both).
//! `POST /mutate-machinesets` reads the body whole and answers 200 with the bytes of
//! `--response-file` (the bench captures them from the real server for the same review), as
//! `application/json`. Nothing else: no review parsing, no metrics, no logging, no
//! connection cap, no graceful drain, no plain-HTTP sniffing. With `--bare` it does not even
//! keep the body (its frames are dropped as they come, so that the connection stays open):
//! the floor of the stack itself.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::post;
use clap::Parser;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// The webhook's defaults for the same limits (`--body-timeout`, `--header-read-timeout`).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Parser)]
#[command(about = "Canned AdmissionReview responses on the webhook's stack (benchmark floor)")]
struct Args {
    /// Serving certificate chain (PEM).
    #[arg(long)]
    tls_cert_file: PathBuf,
    /// Serving private key (PEM).
    #[arg(long)]
    tls_private_key_file: PathBuf,
    /// HTTPS address.
    #[arg(long, default_value = "127.0.0.1:9444")]
    bind_address: SocketAddr,
    /// The response body to send to every review.
    #[arg(long)]
    response_file: PathBuf,
    /// Answer with the request's uid in place of the response file's.
    #[arg(long)]
    echo_uid: bool,
    /// The response body for requests whose body contains `--alt-if-body-contains`.
    #[arg(long, requires = "alt_if_body_contains")]
    alt_response_file: Option<PathBuf>,
    #[arg(long, requires = "alt_response_file")]
    alt_if_body_contains: Option<String>,
    /// Answer without reading the body (no uid echo, no alternative answer).
    #[arg(long, conflicts_with_all = ["echo_uid", "alt_response_file"])]
    bare: bool,
    /// Set TCP_NODELAY on accepted connections (the webhook does not, so neither does this
    /// by default).
    #[arg(long)]
    tcp_nodelay: bool,
}

/// A canned answer, split around its uid when the request's is echoed.
#[derive(Clone)]
struct Canned {
    before_uid: Bytes,
    after_uid: Bytes,
    whole: Bytes,
}

impl Canned {
    fn read(path: &PathBuf, echo_uid: bool) -> anyhow::Result<Canned> {
        let whole = Bytes::from(
            std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
        );
        let (before_uid, after_uid) = match echo_uid {
            true => {
                let (start, end) = uid_span(&whole)
                    .with_context(|| format!("{}: no \"uid\":\"...\"", path.display()))?;
                (whole.slice(..start), whole.slice(end..))
            }
            false => (Bytes::new(), Bytes::new()),
        };
        Ok(Canned {
            before_uid,
            after_uid,
            whole,
        })
    }

    fn answer(&self, review: &[u8], echo_uid: bool) -> Bytes {
        match uid_span(review).filter(|_| echo_uid) {
            Some((start, end)) => [
                &self.before_uid[..],
                &review[start..end],
                &self.after_uid[..],
            ]
            .concat()
            .into(),
            None => self.whole.clone(),
        }
    }
}

/// Where the value of the first `"uid":"` is.
fn uid_span(json: &[u8]) -> Option<(usize, usize)> {
    const KEY: &[u8] = br#""uid":""#;
    let start = json.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let len = json[start..].iter().position(|&b| b == b'"')?;
    Some((start, start + len))
}

#[derive(Clone)]
struct Answers {
    main: Canned,
    alt: Option<(Vec<u8>, Canned)>,
    echo_uid: bool,
}

async fn mutate(State(a): State<Arc<Answers>>, review: Bytes) -> impl IntoResponse {
    let canned = match &a.alt {
        Some((needle, alt)) if review.windows(needle.len()).any(|w| w == needle) => alt,
        _ => &a.main,
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        canned.answer(&review, a.echo_uid),
    )
}

/// The answer, the body never kept: its frames dropped as they come (hyper closes a
/// connection whose request body was left unread, which would cost a handshake a request).
async fn bare(State(a): State<Arc<Answers>>, body: axum::body::Body) -> impl IntoResponse {
    let mut body = body;
    while let Some(Ok(_)) = http_body_util::BodyExt::frame(&mut body).await {}
    (
        [(header::CONTENT_TYPE, "application/json")],
        a.main.whole.clone(),
    )
}

fn tls_config(args: &Args) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = CertificateDer::pem_file_iter(&args.tls_cert_file)
        .with_context(|| format!("reading {}", args.tls_cert_file.display()))?
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(&args.tls_private_key_file)
        .with_context(|| format!("reading {}", args.tls_private_key_file.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let main = Canned::read(&args.response_file, args.echo_uid)?;
    let size = main.whole.len();
    let alt = match (&args.alt_response_file, &args.alt_if_body_contains) {
        (Some(file), Some(needle)) => Some((
            needle.as_bytes().to_vec(),
            Canned::read(file, args.echo_uid)?,
        )),
        _ => None,
    };
    let answers = Arc::new(Answers {
        main,
        alt,
        echo_uid: args.echo_uid,
    });
    let acceptor = TlsAcceptor::from(tls_config(&args)?);
    let handler = if args.bare { post(bare) } else { post(mutate) };
    let router = Router::new()
        .route("/mutate-machinesets", handler)
        .with_state(answers);
    let listener = TcpListener::bind(args.bind_address)
        .await
        .with_context(|| format!("binding {}", args.bind_address))?;
    eprintln!(
        "canned: serving {} bytes on https://{}/mutate-machinesets",
        size,
        listener.local_addr()?
    );
    loop {
        let (tcp, _peer) = match listener.accept().await {
            Ok(a) => a,
            Err(e) => {
                eprintln!("canned: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if args.tcp_nodelay {
            let _ = tcp.set_nodelay(true);
        }
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
            else {
                return;
            };
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(true);
            let _ = http.serve_connection(TokioIo::new(tls), service).await;
        });
    }
}
