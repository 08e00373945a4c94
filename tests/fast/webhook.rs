//! The webhook end to end over real TLS: a server on 127.0.0.1:0 with a test CA, a real
//! HTTPS client that verifies it, the AdmissionReview fixtures, patches applied by the JSON
//! Patch oracle (`tests/support/oracle.rs`), and a table of bad input that must each get a clear answer.

use crate::support;

use std::time::Duration;

use bootimage_webhook::core::decision::BOOT_IMAGE_ANNOTATION;
use bootimage_webhook::serve::server::{MAX_HEAD, MAX_HEADERS};
use bootimage_webhook::serve::tls::MinVersion;
use serde_json::{Value, json};
use support::{
    CURRENT_X86, Https, Reply, TestServer, fixture, oracle, request, review_object, send_on,
    start_server,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn review_bytes(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// Send `review`, check the envelope, apply the patch with the oracle and return the result.
async fn admit(server: &TestServer, review: &Value) -> (Reply, Value) {
    let reply = server.post_review(&review_bytes(review)).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(reply.headers["content-type"], "application/json");
    let v = reply.json();
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(v["kind"], "AdmissionReview");
    assert_eq!(v["response"]["uid"], review["request"]["uid"], "uid echoed");
    assert_eq!(
        v["response"]["allowed"], true,
        "never denies a well-formed write"
    );
    let object = review_object(review);
    let patched = match reply.patch() {
        Some(patch) => {
            assert_eq!(v["response"]["patchType"], "JSONPatch");
            oracle::apply(&object, &patch).unwrap_or_else(|e| panic!("{}: {e}", oracle::NAME))
        }
        None => object,
    };
    (reply, patched)
}

/// After abuse, a good review still gets its patch.
async fn assert_still_serving(server: &TestServer) {
    let review = fixture("admissionreview-v1-machineset-gcp-create.assembled.json");
    let (reply, _) = admit(server, &review).await;
    assert!(reply.patch().is_some());
}

fn with_object(review: &Value, object: Value) -> Value {
    let mut r = review.clone();
    r["request"]["object"] = object;
    r
}

#[tokio::test]
async fn create_and_update_fixtures_are_patched_and_reinvocation_is_a_no_op() {
    let _parallel = support::parallel();
    let server = start_server().await;
    for name in [
        "admissionreview-v1-machineset-gcp-create.assembled.json",
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ] {
        let review = fixture(name);
        let (reply, patched) = admit(&server, &review).await;
        let v = reply.json();
        let r = &v["response"];
        assert_eq!(r["auditAnnotations"]["reason"], "Updated", "{name}");
        assert_eq!(r["auditAnnotations"]["boot-image"], CURRENT_X86, "{name}");
        let warnings = r["warnings"].as_array().unwrap();
        assert_eq!(warnings.len(), 1);
        let w = warnings[0].as_str().unwrap();
        assert!(
            w.len() <= 120 && w.contains("rhcos-9-8-20260428-0-gcp-x86-64"),
            "{w}"
        );
        let disk = &patched["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0];
        assert_eq!(disk["image"], CURRENT_X86);
        assert_eq!(
            patched["metadata"]["annotations"][BOOT_IMAGE_ANNOTATION],
            CURRENT_X86
        );
        assert_eq!(
            support::without_image_fields(&patched),
            support::without_image_fields(&review_object(&review)),
            "{name}: nothing else changes"
        );
        // reinvocationPolicy IfNeeded: our own output comes back and is left alone.
        let (again, _) = admit(&server, &with_object(&review, patched)).await;
        assert!(again.patch().is_none(), "{name}: second pass patched");
        assert_eq!(
            again.json()["response"]["auditAnnotations"]["reason"],
            "UpToDate"
        );
        assert!(again.json()["response"].get("warnings").is_none());
    }
}

#[tokio::test]
async fn dry_run_gets_the_same_answer() {
    let _parallel = support::parallel();
    let server = start_server().await;
    let mut review = fixture("admissionreview-v1-machineset-gcp-update.assembled.json");
    let (wet, _) = admit(&server, &review).await;
    review["request"]["dryRun"] = json!(true);
    let (dry, _) = admit(&server, &review).await;
    assert_eq!(wet.patch(), dry.patch());
    assert!(dry.patch().is_some());
}

#[tokio::test]
async fn keep_alive_and_the_full_chain() {
    let _parallel = support::parallel();
    let server = start_server().await;
    let tls = server.client.connect(server.addr()).await.unwrap();
    let chain = tls.get_ref().1.peer_certificates().unwrap().len();
    assert_eq!(chain, 2, "leaf and CA are served");
    assert_eq!(
        support::peer_leaf(&tls),
        support::leaf_der(&server.certs.chain_pem)
    );
    drop(tls);
    let body = review_bytes(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ));
    let mut conn = server.client.conn(server.addr()).await.unwrap();
    for _ in 0..50 {
        let r = send_on(
            &mut conn,
            request(
                "POST",
                "/mutate-machinesets",
                Some("application/json"),
                body.clone(),
            ),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 200);
        assert!(r.headers.get("connection").is_none(), "keep-alive");
    }
}

#[tokio::test]
async fn admin_port_health_and_metrics() {
    let _parallel = support::parallel();
    let server = start_server().await;
    assert_eq!(server.admin_get("/healthz").await, (200, "ok\n".into()));
    assert_eq!(server.admin_get("/readyz").await, (200, "ready\n".into()));
    server
        .post_review(&review_bytes(&fixture(
            "admissionreview-v1-machineset-gcp-update.assembled.json",
        )))
        .await;
    server.post_review(b"nope").await;
    let (code, text) = server.admin_get("/metrics").await;
    assert_eq!(code, 200);
    for want in [
        r#"bootimage_webhook_requests_total{reason="Updated",code="200"} 1"#,
        r#"bootimage_webhook_requests_total{reason="InvalidReview",code="400"} 1"#,
        "bootimage_webhook_request_duration_seconds_count 2",
        "bootimage_webhook_requests_in_flight 0",
        "bootimage_webhook_certificate_reloads_total 0",
        "bootimage_webhook_snapshot_age_seconds",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
    assert_eq!(server.admin_get("/nope").await.0, 404);
}

/// One row of the bad-input table, sent over HTTPS.
struct Case {
    name: &'static str,
    method: &'static str,
    path: &'static str,
    content_type: Option<&'static str>,
    body: Vec<u8>,
    status: u16,
    /// In the response's status.message.
    says: &'static str,
}

fn review_with(f: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut v = fixture("admissionreview-v1-machineset-gcp-update.assembled.json");
    f(&mut v);
    review_bytes(&v)
}

/// The whole table: bodies that are not a review we take, requests refused for their
/// path, method, content type or size, then well-formed reviews, which are allowed.
fn cases() -> Vec<Case> {
    let mut all = bodies_that_are_not_a_v1_review();
    all.extend(refused_for_path_method_content_type_or_size());
    all.extend(reviews_that_are_allowed());
    all
}

/// A POST of `body` as JSON to the webhook's path; rows that differ elsewhere override
/// the rest with struct update syntax.
fn post(name: &'static str, body: Vec<u8>, status: u16, says: &'static str) -> Case {
    Case {
        name,
        method: "POST",
        path: "/mutate-machinesets",
        content_type: Some("application/json"),
        body,
        status,
        says,
    }
}

/// 400: not JSON, JSON that is not an AdmissionReview, a review without a request or a
/// uid, another version or kind, nesting past the parser's limit.
fn bodies_that_are_not_a_v1_review() -> Vec<Case> {
    vec![
        post("not JSON", b"hello there".to_vec(), 400, "not JSON"),
        post("empty body", Vec::new(), 400, "not JSON"),
        post("invalid UTF-8", vec![b'{', 0xff, 0xfe, b'}'], 400, "not JSON"),
        post("JSON array", b"[1,2,3]".to_vec(), 400, "not an AdmissionReview"),
        post("JSON string", b"\"AdmissionReview\"".to_vec(), 400, "not an AdmissionReview"),
        post(
            "request of the wrong type",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"x"}"#.to_vec(),
            400,
            "not an AdmissionReview",
        ),
        post(
            "missing request",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
            400,
            "has no request",
        ),
        post("missing uid", review_with(|v| drop(v["request"].as_object_mut().unwrap().remove("uid"))), 400, "no uid"),
        post("empty uid", review_with(|v| v["request"]["uid"] = json!("")), 400, "no uid"),
        post("v1beta1 review", review_with(|v| v["apiVersion"] = json!("admission.k8s.io/v1beta1")), 400, "only admission.k8s.io/v1"),
        post("not a review kind", review_with(|v| v["kind"] = json!("ConfigMap")), 400, "only admission.k8s.io/v1"),
        post(
            "object nested 100k deep",
            format!(
                r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","object":{}{}}}}}"#,
                "[".repeat(100_000),
                "]".repeat(100_000)
            )
            .into_bytes(),
            400,
            "recursion limit",
        ),
        post("truncated JSON", review_with(|_| {}).split_at(500).0.to_vec(), 400, "not JSON"),
    ]
}

/// 404, 405, 415, 413: the wrong path, method or content type, a body over the limit.
fn refused_for_path_method_content_type_or_size() -> Vec<Case> {
    vec![
        Case {
            name: "wrong path",
            path: "/mutate",
            ..post("", b"{}".to_vec(), 404, "no such path /mutate")
        },
        Case {
            name: "GET",
            method: "GET",
            ..post("", Vec::new(), 405, "method GET not allowed")
        },
        Case {
            name: "PUT",
            method: "PUT",
            ..post("", review_with(|_| {}), 405, "method PUT not allowed")
        },
        Case {
            name: "text/plain",
            content_type: Some("text/plain"),
            ..post(
                "",
                review_with(|_| {}),
                415,
                "must be application/json, got text/plain",
            )
        },
        Case {
            name: "no content type",
            content_type: None,
            ..post("", review_with(|_| {}), 415, "got none")
        },
        post(
            "9 MiB body",
            {
                let mut b = review_with(|_| {});
                b.resize(9 * 1024 * 1024, b' ');
                b
            },
            413,
            "larger than the",
        ),
    ]
}

/// 200: well-formed reviews are allowed, also of things we do not mutate (the message
/// says why), and `application/json` is matched as a media type, parameters and all.
fn reviews_that_are_allowed() -> Vec<Case> {
    let provider = "/request/object/spec/template/spec/providerSpec/value";
    vec![
        // Well-formed reviews of things we do not mutate: allowed, no patch.
        post(
            "object of another kind",
            review_bytes(&fixture("admissionreview-v1-pod-create.gke.kube-rs.json")),
            200,
            "not a MachineSet",
        ),
        post(
            "providerSpec value not an object",
            review_with(|v| *v.pointer_mut(provider).unwrap() = json!([1])),
            200,
            "is not an object",
        ),
        post(
            "disks not an array",
            review_with(|v| v.pointer_mut(provider).unwrap()["disks"] = json!("pd-ssd")),
            200,
            "disks is not an array",
        ),
        post(
            "image not a string",
            review_with(|v| v.pointer_mut(provider).unwrap()["disks"][0]["image"] = json!(7)),
            200,
            "image is not a string",
        ),
        post(
            "DELETE",
            review_with(|v| v["request"]["operation"] = json!("DELETE")),
            200,
            "operation DELETE is not mutated",
        ),
        post(
            "scale subresource",
            review_with(|v| v["request"]["subResource"] = json!("scale")),
            200,
            "subresource",
        ),
        post(
            "no object",
            review_with(|v| v["request"]["object"] = Value::Null),
            200,
            "no object",
        ),
        Case {
            name: "content type with charset",
            content_type: Some("Application/JSON; charset=utf-8"),
            ..post("", review_with(|_| {}), 200, "boot image")
        },
    ]
}

#[tokio::test]
async fn bad_input_table() {
    let _parallel = support::parallel();
    let server = start_server().await;
    let table = cases();
    assert!(table.len() >= 20);
    for case in table {
        let req = request(case.method, case.path, case.content_type, case.body);
        let mut conn = server.client.conn(server.addr()).await.unwrap();
        let reply = send_on(&mut conn, req)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(
            reply.status,
            case.status,
            "{}: {}",
            case.name,
            String::from_utf8_lossy(&reply.body)
        );
        let v = reply.json();
        let message = v["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            message.contains(case.says),
            "{}: message {message:?} lacks {:?}",
            case.name,
            case.says
        );
        if case.status == 200 {
            assert_eq!(v["response"]["allowed"], true, "{}", case.name);
        } else {
            assert_eq!(
                v["response"]["status"]["code"], case.status,
                "{}",
                case.name
            );
            assert_eq!(
                reply.headers["content-type"], "application/json",
                "{}",
                case.name
            );
        }
        if case.status == 405 {
            assert_eq!(reply.headers["allow"], "POST");
        }
    }
    assert_still_serving(&server).await;
}

/// The raw answer to `head` sent by hand on a new TLS connection, within 5 s.
async fn raw_answer(server: &TestServer, head: &[u8]) -> String {
    let mut tls = server.client.connect(server.addr()).await.unwrap();
    tls.write_all(head).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut buf)).await;
    String::from_utf8_lossy(&buf).into_owned()
}

#[tokio::test]
async fn a_body_without_a_length_is_411_before_a_byte_of_it_is_read() {
    let _parallel = support::parallel();
    let server = start_server().await;
    // Chunked, and not one chunk sent: the answer comes all the same.
    let head = "POST /mutate-machinesets HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut tls = server.client.connect(server.addr()).await.unwrap();
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(1), tls.read(&mut buf))
        .await
        .expect("answered at once")
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 411"), "{text}");
    assert!(text.contains("Content-Length"), "{text}");
    let (_, metrics) = server.admin_get("/metrics").await;
    assert!(
        metrics
            .contains(r#"bootimage_webhook_requests_total{reason="LengthRequired",code="411"} 1"#),
        "{metrics}"
    );
    assert_still_serving(&server).await;
}

#[tokio::test]
async fn heads_beyond_their_bounds_are_431() {
    let _parallel = support::parallel();
    let server = start_server().await;
    // As many bytes as a head may take, and it is not over yet.
    let mut long = b"POST /mutate-machinesets HTTP/1.1\r\nHost: localhost\r\nX-Pad: ".to_vec();
    long.resize(MAX_HEAD, b'a');
    let text = raw_answer(&server, &long).await;
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    // A short head with one field too many.
    let mut many = b"POST /mutate-machinesets HTTP/1.1\r\nHost: localhost\r\n".to_vec();
    for i in 0..MAX_HEADERS {
        many.extend(format!("X-{i}: {i}\r\n").as_bytes());
    }
    many.extend(b"\r\n");
    let text = raw_answer(&server, &many).await;
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    // One field fewer is a request like any other (no body, so no review: 400).
    let mut fewer =
        b"POST /mutate-machinesets HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n".to_vec();
    for i in 0..MAX_HEADERS - 3 {
        fewer.extend(format!("X-{i}: {i}\r\n").as_bytes());
    }
    fewer.extend(b"Content-Type: application/json\r\n\r\n");
    let text = raw_answer(&server, &fewer).await;
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert_still_serving(&server).await;
}

#[tokio::test]
async fn truncated_and_stalled_bodies() {
    let _parallel = support::parallel();
    let server = start_server().await;
    // The client promises 1000 bytes, sends 10 and closes its side.
    let mut tls = server.client.connect(server.addr()).await.unwrap();
    tls.write_all(b"POST /mutate-machinesets HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"apiVersi")
        .await
        .unwrap();
    tls.shutdown().await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(text.contains("truncated"), "{text}");

    // The client sends the head and then nothing: 408 once the grace for a body's first
    // bytes is over, well before the body timeout (2 s here).
    let mut tls = server.client.connect(server.addr()).await.unwrap();
    tls.write_all(b"POST /mutate-machinesets HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(6), tls.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let waited = started.elapsed();
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("too slow: 0 of 100 bytes"), "{text}");
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_millis(1800),
        "408 after {waited:?}"
    );
}

// Paused time, as the idle test below says why: the cut-offs are the server's timers.
#[tokio::test(start_paused = true)]
async fn slow_headers_are_cut_off() {
    let _parallel = support::parallel();
    let server = start_server().await;
    let mut tls = server.client.connect(server.addr()).await.unwrap();
    tls.write_all(b"POST /mutate-machinesets HTTP/1.1\r\nHost: loc")
        .await
        .unwrap();
    // header_read_timeout is 800ms in the test settings.
    let mut buf = vec![0u8; 1024];
    let started = tokio::time::Instant::now();
    let read = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf))
        .await
        .expect("server hung up");
    assert!(started.elapsed() >= Duration::from_millis(600));
    match read {
        Ok(0) | Err(_) => {}
        Ok(n) => {
            let text = String::from_utf8_lossy(&buf[..n]);
            assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        }
    }
    // A silent TCP client (no TLS hello at all) is dropped after the handshake timeout.
    let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf))
        .await
        .expect("not dropped");
    assert!(matches!(n, Ok(0) | Err(_)));
}

/// A TLS 1.1 ClientHello, by hand: no TLS library here will still send one.
fn tls11_client_hello() -> Vec<u8> {
    let mut body = vec![0x03, 0x02];
    body.extend([0x42u8; 32]);
    body.push(0);
    body.extend([0x00, 0x04, 0xc0, 0x13, 0x00, 0x2f]);
    body.extend([0x01, 0x00]);
    let mut hs = vec![0x01, 0x00, (body.len() >> 8) as u8, body.len() as u8];
    hs.extend(body);
    let mut rec = vec![0x16, 0x03, 0x01, (hs.len() >> 8) as u8, hs.len() as u8];
    rec.extend(hs);
    rec
}

#[tokio::test]
async fn old_tls_plain_http_and_garbage_are_refused_cleanly() {
    let _parallel = support::parallel();
    let server = start_server().await;
    // TLS 1.1: a fatal alert (rustls says handshake_failure, 40) and no ServerHello.
    let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
    tcp.write_all(&tls11_client_hello()).await.unwrap();
    let mut buf = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(n >= 7, "{:?}", &buf[..n]);
    assert_eq!(buf[0], 0x15, "an alert record: {:?}", &buf[..n]);
    assert_eq!(buf[5], 2, "fatal: {:?}", &buf[..n]);
    assert!(
        [40, 70].contains(&buf[6]),
        "handshake_failure or protocol_version: {:?}",
        &buf[..n]
    );

    // Plain HTTP to the TLS port: told so in plain HTTP.
    let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
    tcp.write_all(b"POST /mutate-machinesets HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.starts_with("HTTP/1.1 400") && text.contains("HTTP request to an HTTPS server"),
        "{text}"
    );

    // Binary garbage: the connection is closed.
    let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
    tcp.write_all(&[0u8, 1, 2, 3, 0xff, 0x16, 0x03])
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut out))
        .await
        .unwrap();

    // An HTTP/2-only client: no common ALPN protocol.
    let mut h2 = support::client_config(&server.certs.ca_pem, &[&rustls::version::TLS13]);
    h2.alpn_protocols = vec![b"h2".to_vec()];
    assert!(Https::with_config(h2).connect(server.addr()).await.is_err());

    assert_still_serving(&server).await;
}

#[tokio::test]
async fn tls_min_version_1_3() {
    let _parallel = support::parallel();
    let server = start_server_13().await;
    let only12 = Https::with_config(support::client_config(
        &server.certs.ca_pem,
        &[&rustls::version::TLS12],
    ));
    assert!(
        only12.connect(server.addr()).await.is_err(),
        "TLS 1.2 refused with --tls-min-version 1.3"
    );
    let tls = server.client.connect(server.addr()).await.unwrap();
    assert_eq!(
        tls.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );
    // And 1.2 works with the default.
    let default = start_server().await;
    let tls = only12.clone();
    let default_ca = Https::with_config(support::client_config(
        &default.certs.ca_pem,
        &[&rustls::version::TLS12],
    ));
    let s = default_ca.connect(default.addr()).await.unwrap();
    assert_eq!(
        s.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    drop(tls);
}

async fn start_server_13() -> TestServer {
    support::start_server_with(|s| s.tls_min_version = Some(MinVersion::Tls13)).await
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_fails_verification() {
    let _parallel = support::parallel();
    let server = start_server().await;
    let other = support::dev_certs();
    let stranger = Https::new(&other.ca_pem);
    let err = stranger.connect(server.addr()).await.unwrap_err();
    assert!(err.to_string().contains("certificate"), "{err}");
}

/// A MachineSet the Cluster API is (becoming) authoritative for is left alone over
/// the wire too; and an UPDATE that puts the old image back is counted, then left as sent.
#[tokio::test]
async fn cluster_api_authoritative_and_revert_loops_over_the_wire() {
    let _parallel = support::parallel();
    let server = start_server().await;
    let review = fixture("admissionreview-v1-machineset-gcp-update.assembled.json");
    let object = review_object(&review);
    for (api, reason) in [
        ("Migrating", "ClusterAPIAuthoritative"),
        ("ClusterAPI", "ClusterAPIAuthoritative"),
        ("MachineAPI", "Updated"),
    ] {
        let mut o = object.clone();
        o["status"] = json!({"authoritativeAPI": api});
        let (reply, _) = admit(&server, &with_object(&review, o)).await;
        let r = &reply.json()["response"];
        assert_eq!(r["auditAnnotations"]["reason"], reason, "{api}");
        assert_eq!(reply.patch().is_some(), reason == "Updated", "{api}");
    }

    // The stored object had the target; the write brings the old image back.
    let (_, moved) = admit(&server, &review).await;
    let reverts = "bootimages.machineconfiguration.openshift.io/reverts";
    let mut revert = review.clone();
    revert["request"]["oldObject"] = moved.clone();
    revert["request"]["object"] = object.clone();
    revert["request"]["object"]["metadata"]["annotations"] =
        moved["metadata"]["annotations"].clone();
    let (reply, patched) = admit(&server, &revert).await;
    assert_eq!(
        reply.json()["response"]["auditAnnotations"]["reason"],
        "Updated"
    );
    assert_eq!(
        patched["metadata"]["annotations"][reverts],
        format!("1 {CURRENT_X86}")
    );
    // Three counted already: the fourth is left as sent, only the count is written.
    let mut old = moved.clone();
    old["metadata"]["annotations"][reverts] = json!(format!("3 {CURRENT_X86}"));
    revert["request"]["oldObject"] = old.clone();
    revert["request"]["object"]["metadata"]["annotations"] = old["metadata"]["annotations"].clone();
    let (reply, patched) = admit(&server, &revert).await;
    let r = &reply.json()["response"];
    assert_eq!(r["allowed"], true);
    assert_eq!(r["auditAnnotations"]["reason"], "RevertLoop");
    assert!(r["auditAnnotations"].get("boot-image").is_none());
    assert!(
        r["warnings"][0].as_str().unwrap().contains("RevertLoop"),
        "{r}"
    );
    assert_eq!(
        patched["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"],
        object["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"],
        "the write stands"
    );
    assert_eq!(
        patched["metadata"]["annotations"][reverts],
        format!("4 {CURRENT_X86}")
    );
}

/// A keep-alive connection waits for its next request well past the header
/// timeout (800 ms here), as the apiserver's pooled connections do between reviews, and is
/// closed by the server once idle for the idle timeout (3 s here).
///
/// On tokio's paused clock: the server's deadlines are tokio timers and client and server
/// share this one-thread runtime, so the clock jumps only when every task waits for a
/// timer. Loopback bytes are in the peer's socket when the write returns, and tokio looks at
/// the sockets before it moves the clock, not moving it if that wakes a task (1.54 on), so
/// no read is cut short by a jump. The idle time is then exact to one poll step, not a
/// bound widened for a loaded machine.
#[tokio::test(start_paused = true)]
async fn idle_keep_alive_connections_are_held_until_the_idle_timeout() {
    let _parallel = support::parallel();
    let server = start_server().await;
    let body = serde_json::to_vec(&fixture(
        "admissionreview-v1-machineset-gcp-update.assembled.json",
    ))
    .unwrap();
    let post = || {
        request(
            "POST",
            "/mutate-machinesets",
            Some("application/json"),
            body.clone(),
        )
    };
    let mut send = server.client.conn(server.addr()).await.unwrap();
    assert_eq!(send_on(&mut send, post()).await.unwrap().status, 200);
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(
        !send.is_closed(),
        "closed while idle for less than the idle timeout"
    );
    assert_eq!(send_on(&mut send, post()).await.unwrap().status, 200);

    let idle = tokio::time::Instant::now();
    let step = Duration::from_millis(20);
    while !send.is_closed() && idle.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(step).await;
    }
    let held = idle.elapsed();
    assert!(
        held >= Duration::from_secs(3) && held <= Duration::from_secs(3) + step,
        "an idle connection was held {held:?}, not the 3 s idle timeout"
    );
}
