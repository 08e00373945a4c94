//! `serve --dev` run as a person runs it: Ctrl-C, and the refusals it logs.

use super::*;

/// Ctrl-C on `serve --dev` stops at once (no shutdown delay there); with a delay, a second
/// Ctrl-C does not wait for it.
#[test]
fn ctrl_c_on_serve_dev_stops_at_once_and_a_second_one_forces_it() {
    let _parallel = support::parallel();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = support::binary::serve_command();
    cmd.arg("--dev").current_dir(dir.path());
    let mut dev = support::binary::Served::spawn(cmd);
    let t = Instant::now();
    dev.signal("INT");
    assert!(dev.wait_exit(Duration::from_secs(10)).success());
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());

    let mut cmd = support::binary::serve_command();
    cmd.args(["--dev", "--shutdown-delay", "60s"])
        .current_dir(dir.path());
    let mut slow = support::binary::Served::spawn(cmd);
    slow.signal("INT");
    slow.wait_for_line(Duration::from_secs(10), |l| {
        l.contains("a second signal exits at once")
    })
    .unwrap_or_else(|| panic!("{}", slow.log_text()));
    let t = Instant::now();
    slow.signal("INT");
    let status = slow.wait_exit(Duration::from_secs(10));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(status.code(), Some(1), "{}", slow.log_text());
}

/// A refused request is one warn line with the status, the reason and the peer, so that
/// `oc logs` shows who sends something wrong; a flood gives at most a burst of lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_are_logged_once_each_and_rate_limited() {
    let _parallel = support::parallel();
    let (_dir, served, client) = serve_dev_with_a_client();
    let mut send = client.conn(served.webhook).await.unwrap();
    let local = our_address_as_the_server_sees_it(&client, served.webhook).await;
    one_refusal_line_per_wrong_request(&served, &mut send, local).await;
    plain_http_on_the_tls_port_is_logged_as_such(&served).await;
    a_flood_is_logged_only_up_to_the_burst(&served, &mut send).await;
}

/// A keep-alive HTTP/1.1 connection to the webhook.
type Conn = hyper::client::conn::http1::SendRequest<http_body_util::Full<hyper::body::Bytes>>;

/// `serve --dev` in a fresh directory (kept alive by the returned guard), and an HTTPS
/// client that trusts the CA it wrote there.
fn serve_dev_with_a_client() -> (tempfile::TempDir, support::binary::Served, support::Https) {
    support::install_provider();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = support::binary::serve_command();
    cmd.arg("--dev").current_dir(dir.path());
    let served = support::binary::Served::spawn(cmd);
    let ca = std::fs::read_to_string(dir.path().join("certs/ca.crt")).unwrap();
    let client = support::Https::new(&ca);
    (dir, served, client)
}

/// The peer the server sees: our side of a fresh connection.
async fn our_address_as_the_server_sees_it(
    client: &support::Https,
    webhook: std::net::SocketAddr,
) -> std::net::IpAddr {
    let tls = client.connect(webhook).await.unwrap();
    tls.get_ref().0.local_addr().unwrap().ip()
}

/// Each kind of wrong request gets its status and exactly one WARN line naming that
/// status and our address.
async fn one_refusal_line_per_wrong_request(
    served: &support::binary::Served,
    send: &mut Conn,
    local: std::net::IpAddr,
) {
    for (method, path, ct, body, code) in [
        (
            "GET",
            "/mutate-machinesets",
            Some("application/json"),
            "",
            405,
        ),
        ("POST", "/nope", Some("application/json"), "{}", 404),
        ("POST", "/mutate-machinesets", Some("text/plain"), "{}", 415),
        (
            "POST",
            "/mutate-machinesets",
            Some("application/json"),
            "{",
            400,
        ),
    ] {
        let reply = support::send_on(
            send,
            support::request(method, path, ct, body.as_bytes().to_vec()),
        )
        .await
        .unwrap();
        assert_eq!(reply.status, code);
        let line = served
            .wait_for_line(Duration::from_secs(5), |l| l.contains("refused a request"))
            .unwrap_or_else(|| panic!("no log line for {code}:\n{}", served.log_text()));
        assert!(line.contains("WARN"), "{line}");
        assert!(line.contains(&format!("with {code}")), "{line}");
        assert!(line.contains(&format!("peer={local}:")), "{line}");
    }
}

/// Plain HTTP on the TLS port: refused, and the line says it was plain HTTP.
async fn plain_http_on_the_tls_port_is_logged_as_such(served: &support::binary::Served) {
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(served.webhook)
            .await
            .unwrap();
        tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = Vec::new();
        let _ = tcp.read_to_end(&mut buf).await;
    }
    let line = served
        .wait_for_line(Duration::from_secs(5), |l| l.contains("refused a request"))
        .unwrap();
    assert!(
        line.contains("plain HTTP") && line.contains("PlainHTTP"),
        "{line}"
    );
}

/// A flood: 50 more refusals, and only the rest of the burst is logged, so the whole log
/// holds exactly [`RefusalLog::BURST`] refusal lines.
///
/// [`RefusalLog::BURST`]: bootimage_webhook::serve::server::RefusalLog::BURST
async fn a_flood_is_logged_only_up_to_the_burst(served: &support::binary::Served, send: &mut Conn) {
    for _ in 0..50 {
        let r = support::send_on(
            send,
            support::request("POST", "/nope", Some("application/json"), Vec::new()),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 404);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let logged = served
        .log()
        .iter()
        .filter(|l| l.contains("refused a request"))
        .count();
    assert_eq!(
        logged,
        bootimage_webhook::serve::server::RefusalLog::BURST as usize,
        "{}",
        served.log_text()
    );
}
