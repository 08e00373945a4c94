//! A test double of Prism Central's v3 image API, for tests/e2e/nutanix_prism.rs. No Prism
//! Central emulator exists; this one is written from Nutanix's published v3 API
//! (prism-go-client's `v3/swagger.json` and structs) and what the machine API's Nutanix
//! provider and the installer call. It is a double, not Prism Central: where the published
//! API is silent it does what docs/nutanix-research.md says.
//!
//! It keeps what it is given: an image created with a `source_uri` really is fetched over
//! HTTP and stored, and its checksum checked, in a task that finishes after the create has
//! answered (`202`, the task's uuid in `status.execution_context`). Like Prism Central it
//! lets several images share a name, lists only images created successfully, refuses a
//! create whose `metadata.uuid` is taken, reads `name==` as a regular expression, and
//! answers a 401 with a page, not JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use base64::Engine;
use serde_json::{Value, json};

/// One image as the double keeps it.
#[derive(Debug, Clone, Default)]
struct Stored {
    uuid: String,
    name: String,
    description: Option<String>,
    image_type: String,
    source_uri: Option<String>,
    /// What the create asked to be checked: algorithm and value.
    checksum: Option<(String, String)>,
    categories: BTreeMap<String, String>,
    state: String,
    data: Option<Vec<u8>>,
    tasks: Vec<String>,
    messages: Vec<String>,
    created: u64,
    /// The uuid of the user who made it.
    owner: String,
}

#[derive(Debug, Clone)]
struct TaskRec {
    status: String,
    detail: String,
    operation: String,
    image: String,
}

#[derive(Default)]
struct World {
    images: BTreeMap<String, Stored>,
    tasks: BTreeMap<String, TaskRec>,
    categories: BTreeSet<(String, String)>,
    counter: u64,
}

/// The user the double's credentials log in as, and someone else.
pub const ME: &str = "6d3c1a42-0b7e-4c1d-9a55-3f2e8b0c7d11";
pub const SOMEONE_ELSE: &str = "0f4e2b77-91aa-4e0b-8c3d-5a6b7c8d9e0f";

struct Shared {
    world: Mutex<World>,
    authorization: String,
    user: String,
    /// How long a task stays queued, then running.
    delay: Duration,
    /// How much longer a create's task runs, as an import of a large qcow2.
    create_delay: Mutex<Duration>,
    fetches: AtomicUsize,
    /// URLs (by prefix) Prism Central cannot reach, as behind a site's firewall.
    unreachable: Mutex<Vec<String>>,
    /// Deletes still to refuse (500), as a Prism Central that is failing.
    failing_deletes: AtomicUsize,
    /// Creates refused because their uuid was taken.
    conflicts: AtomicUsize,
    /// How long a category lookup takes, as a Prism Central that answers slowly.
    category_delay: Mutex<Duration>,
    /// Filler added to every list answer.
    padding: AtomicUsize,
}

type St = Arc<Shared>;

/// Prism Central's v3 image API on loopback (plain HTTP), as `user` and `password`.
pub struct PrismDouble {
    pub addr: std::net::SocketAddr,
    shared: St,
    runtime: Option<tokio::runtime::Runtime>,
    /// With `PRISM_DOUBLE_VALIDATE=1`: the validating proxy in front of it
    /// (`scripts/prism-validator`), its port and process id.
    validator: Option<(u16, u32)>,
}

impl Drop for PrismDouble {
    fn drop(&mut self) {
        if let Some((_, pid)) = self.validator {
            let _ = std::process::Command::new("kill").arg(pid.to_string()).status();
        }
        // Dropped from async tests too, where a runtime may not block.
        if let Some(r) = self.runtime.take() {
            r.shutdown_background();
        }
    }
}

impl PrismDouble {
    pub fn start(user: &str, password: &str) -> PrismDouble {
        // Plain http on loopback, as no Prism Central may be.
        bootimage_webhook::cluster::egress::allow_plain_http_for_tests();
        let pair = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let shared = Arc::new(Shared {
            world: Mutex::new(World::default()),
            authorization: format!("Basic {pair}"),
            user: ME.to_owned(),
            delay: Duration::from_millis(100),
            create_delay: Mutex::new(Duration::ZERO),
            fetches: AtomicUsize::new(0),
            unreachable: Mutex::new(Vec::new()),
            failing_deletes: AtomicUsize::new(0),
            conflicts: AtomicUsize::new(0),
            category_delay: Mutex::new(Duration::ZERO),
            padding: AtomicUsize::new(0),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new()
            .route("/api/nutanix/v3/images/list", post(list))
            .route("/api/nutanix/v3/images", post(create))
            .route(
                "/api/nutanix/v3/images/{uuid}",
                get(read).delete(delete),
            )
            .route("/api/nutanix/v3/images/{uuid}/file", put(upload))
            .route("/api/nutanix/v3/tasks/{uuid}", get(task))
            .route("/api/nutanix/v3/categories/{key}/{value}", get(category))
            .route("/api/nutanix/v3/users/me", get(me))
            .layer(axum::extract::DefaultBodyLimit::disable())
            .with_state(shared.clone());
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
        let validator = (std::env::var("PRISM_DOUBLE_VALIDATE").as_deref() == Ok("1"))
            .then(|| validator(addr));
        PrismDouble {
            addr,
            shared,
            runtime: Some(runtime),
            validator,
        }
    }

    /// `http://127.0.0.1:<port>`, where the importer's endpoint would be `https://...:9440`
    /// (the validating proxy's, with `PRISM_DOUBLE_VALIDATE=1`).
    pub fn endpoint(&self) -> String {
        match self.validator {
            Some((port, _)) => format!("http://127.0.0.1:{port}"),
            None => format!("http://{}", self.addr),
        }
    }

    /// A category value, as the installer makes `kubernetes-io-cluster-<infra-id>: owned`.
    pub fn add_category(&self, key: &str, value: &str) {
        let mut w = self.shared.world.lock().unwrap();
        w.categories.insert((key.to_owned(), value.to_owned()));
    }

    /// An image made by someone else, complete, holding `data`.
    pub fn add_image(&self, name: &str, description: &str, data: &[u8]) -> String {
        self.add_image_by(SOMEONE_ELSE, name, description, data)
    }

    /// An image made by the user `owner`, complete, holding `data`.
    pub fn add_image_by(&self, owner: &str, name: &str, description: &str, data: &[u8]) -> String {
        let mut w = self.shared.world.lock().unwrap();
        let uuid = new_uuid(&mut w);
        let created = w.counter;
        w.images.insert(
            uuid.clone(),
            Stored {
                uuid: uuid.clone(),
                name: name.to_owned(),
                description: Some(description.to_owned()),
                image_type: "DISK_IMAGE".into(),
                state: "COMPLETE".into(),
                data: Some(data.to_vec()),
                created,
                owner: owner.to_owned(),
                ..Stored::default()
            },
        );
        uuid
    }

    /// Makes Prism Central report no checksum of the image `uuid` (as for an image whose
    /// checksum it never computed).
    pub fn forget_checksum(&self, uuid: &str) {
        let mut w = self.shared.world.lock().unwrap();
        if let Some(i) = w.images.get_mut(uuid) {
            i.checksum = Some(("NONE".into(), String::new()));
        }
    }

    /// Every image called `name`, as `GET /images/{uuid}` answers, whatever its state.
    pub fn images_named(&self, name: &str) -> Vec<Value> {
        let w = self.shared.world.lock().unwrap();
        let mut found: Vec<&Stored> = w.images.values().filter(|i| i.name == name).collect();
        found.sort_by_key(|i| i.created);
        found.into_iter().map(intent).collect()
    }

    /// Deletes the image `uuid` at once, as a person would in Prism Central's console.
    pub fn remove_image(&self, uuid: &str) {
        self.shared.world.lock().unwrap().images.remove(uuid);
    }

    /// The bytes the image `uuid` holds.
    pub fn data(&self, uuid: &str) -> Option<Vec<u8>> {
        let w = self.shared.world.lock().unwrap();
        w.images.get(uuid).and_then(|i| i.data.clone())
    }

    /// Makes the URLs that start with `prefix` unreachable from Prism Central.
    pub fn cannot_reach(&self, prefix: &str) {
        self.shared.unreachable.lock().unwrap().push(prefix.to_owned());
    }

    /// Makes every URL reachable again.
    pub fn reach_everything(&self) {
        self.shared.unreachable.lock().unwrap().clear();
    }

    /// Refuses the next `n` deletes.
    pub fn fail_deletes(&self, n: usize) {
        self.shared.failing_deletes.store(n, Ordering::SeqCst);
    }

    /// How many `source_uri` fetches it made.
    pub fn fetches(&self) -> usize {
        self.shared.fetches.load(Ordering::SeqCst)
    }

    /// Pads every list answer with `bytes` of filler, as a Prism Central whose answers are
    /// larger than the importer reads.
    pub fn pad_lists(&self, bytes: usize) {
        self.shared.padding.store(bytes, Ordering::SeqCst);
    }

    /// Makes each create's task run `d` longer.
    pub fn slow_creates(&self, d: Duration) {
        *self.shared.create_delay.lock().unwrap() = d;
    }

    /// Answers each category lookup after `d`.
    pub fn slow_categories(&self, d: Duration) {
        *self.shared.category_delay.lock().unwrap() = d;
    }

    /// How many creates it refused because their uuid was taken.
    pub fn conflicts(&self) -> usize {
        self.shared.conflicts.load(Ordering::SeqCst)
    }

    /// How many images it holds.
    pub fn count(&self) -> usize {
        self.shared.world.lock().unwrap().images.len()
    }
}

/// Eight, four, four, four and twelve hex digits.
fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `scripts/prism-validator proxy` in front of the double: its port and process id.
fn validator(upstream: std::net::SocketAddr) -> (u16, u32) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/prism-validator");
    let out = std::process::Command::new(script)
        .args(["proxy", &format!("http://{upstream}")])
        .output()
        .expect("scripts/prism-validator");
    assert!(out.status.success(), "prism-validator: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.parse::<u32>().ok())
            .expect("PORT= and PID=")
    };
    (value("PORT=") as u16, value("PID="))
}

fn new_uuid(w: &mut World) -> String {
    w.counter += 1;
    let n = w.counter;
    format!("{:08x}-0000-4000-8000-{:012x}", n, n * 7919)
}

/// v3's error body.
fn error(status: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({"api_version": "3.1", "code": status.as_u16(), "kind": "image",
        "state": "ERROR", "message_list": [{"reason": reason, "message": message}]});
    (status, axum::Json(body)).into_response()
}

/// The refusal of a call without the user's basic auth, if it is one.
fn refused(s: &Shared, headers: &HeaderMap) -> Option<Response> {
    let given = headers.get("authorization").and_then(|v| v.to_str().ok());
    // Not v3's error body: prism-go-client reads a 401 apart, as "non-json".
    (given != Some(s.authorization.as_str())).then(|| {
        let page = "<html><head><title>401 Unauthorized</title></head><body><h1>401 Unauthorized</h1></body></html>";
        (StatusCode::UNAUTHORIZED, [("content-type", "text/html")], page).into_response()
    })
}

fn sha256(data: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, data);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// An image as v3's `image_intent_response`.
fn intent(i: &Stored) -> Value {
    let mut resources = json!({"image_type": i.image_type});
    if let Some(uri) = &i.source_uri {
        resources["source_uri"] = json!(uri);
    }
    let mut spec_resources = resources.clone();
    if let Some((alg, value)) = &i.checksum {
        spec_resources["checksum"] = json!({"checksum_algorithm": alg, "checksum_value": value});
    }
    if let Some(data) = &i.data {
        resources["size_bytes"] = json!(data.len());
        let (alg, value) = i.checksum.clone().unwrap_or(("SHA_256".into(), sha256(data)));
        if alg != "NONE" {
            resources["checksum"] = json!({"checksum_algorithm": alg, "checksum_value": value});
        }
        resources["retrieval_uri_list"] = json!([format!("https://pe.invalid:9440/api/nutanix/v3/images/{}/file", i.uuid)]);
    }
    let task_uuid = match i.tasks.as_slice() {
        [one] => json!(one),
        many => json!(many),
    };
    let messages: Vec<Value> = i.messages.iter().map(|m| json!({"reason": "INTERNAL_ERROR", "message": m})).collect();
    json!({
        "api_version": "3.1",
        "metadata": {"kind": "image", "uuid": i.uuid, "spec_version": 0,
            "categories": i.categories, "name": i.name,
            "owner_reference": {"kind": "user", "uuid": i.owner}},
        "spec": {"name": i.name, "description": i.description, "resources": spec_resources},
        "status": {"name": i.name, "description": i.description, "state": i.state,
            "resources": resources, "execution_context": {"task_uuid": task_uuid},
            "message_list": messages},
    })
}

async fn list(State(s): State<St>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "INVALID_REQUEST", "the body is not JSON");
    };
    let offset = req.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let length = req.get("length").and_then(Value::as_u64).unwrap_or(20) as usize;
    if !(1..=500).contains(&length) {
        return error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "length must be between 1 and 500");
    }
    let filter = req.get("filter").and_then(Value::as_str).filter(|f| !f.is_empty());
    let name = match filter.map(|f| f.strip_prefix("name==")) {
        None => None,
        Some(Some(n)) => Some(n.to_owned()),
        Some(None) => return error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", "the double filters on name== only"),
    };
    // `name==` is a regular expression to Prism Central (a deprecated filter), found
    // anywhere in the name.
    let pattern = match name.as_deref().map(regex::Regex::new) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => return error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", &format!("bad filter: {e}")),
    };
    let w = s.world.lock().unwrap();
    // "Entities that have not been created successfully are not listed."
    let mut all: Vec<&Stored> = w
        .images
        .values()
        .filter(|i| i.state == "COMPLETE" || i.state == "DELETE_PENDING")
        .filter(|i| pattern.as_ref().is_none_or(|p| p.is_match(&i.name)))
        .collect();
    all.sort_by_key(|i| i.created);
    let page: Vec<Value> = all.iter().skip(offset).take(length).map(|i| intent(i)).collect();
    let mut metadata = json!({"kind": "image", "offset": offset, "length": page.len(), "total_matches": all.len()});
    if let Some(f) = filter {
        metadata["filter"] = json!(f);
    }
    let mut answer = json!({"api_version": "3.1", "metadata": metadata, "entities": page});
    let padding = s.padding.load(Ordering::SeqCst);
    if padding > 0 {
        metadata_pad(&mut answer, padding);
    }
    axum::Json(answer).into_response()
}

/// Filler in the list's metadata (`user_query`, a free-text field of v3's list metadata).
fn metadata_pad(answer: &mut Value, bytes: usize) {
    answer["metadata"]["user_query"] = json!("x".repeat(bytes));
}

fn new_task(w: &mut World, operation: &str, image: &str) -> String {
    let uuid = new_uuid(w);
    w.tasks.insert(
        uuid.clone(),
        TaskRec {
            status: "QUEUED".into(),
            detail: String::new(),
            operation: operation.into(),
            image: image.into(),
        },
    );
    uuid
}

async fn create(State(s): State<St>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    let Ok(input) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "INVALID_REQUEST", "the body is not JSON");
    };
    let name = input.pointer("/spec/name").and_then(Value::as_str).filter(|n| !n.is_empty());
    let kind = input.pointer("/metadata/kind").and_then(Value::as_str);
    let image_type = input.pointer("/spec/resources/image_type").and_then(Value::as_str).unwrap_or("DISK_IMAGE");
    let (Some(name), Some("image")) = (name, kind) else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "INVALID_REQUEST", "spec.name and metadata.kind image are required");
    };
    if !["DISK_IMAGE", "ISO_IMAGE"].contains(&image_type) {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "INVALID_ARGUMENT", "image_type must be DISK_IMAGE or ISO_IMAGE");
    }
    let checksum = input.pointer("/spec/resources/checksum").and_then(|c| {
        Some((c.get("checksum_algorithm")?.as_str()?.to_owned(), c.get("checksum_value")?.as_str()?.to_ascii_lowercase()))
    });
    let categories: BTreeMap<String, String> = input
        .pointer("/metadata/categories")
        .and_then(Value::as_object)
        .map(|c| c.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    let chosen = input.pointer("/metadata/uuid").and_then(Value::as_str).map(str::to_ascii_lowercase);
    if chosen.as_deref().is_some_and(|u| !is_uuid(u)) {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "INVALID_ARGUMENT", "metadata.uuid is not a UUID");
    }
    let mut w = s.world.lock().unwrap();
    if let Some((k, v)) = categories.iter().find(|(k, v)| !w.categories.contains(&((*k).clone(), (*v).clone()))) {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "INVALID_ARGUMENT", &format!("Category {k}:{v} does not exist"));
    }
    // The client's uuid makes the create idempotent: a second one is refused.
    if let Some(u) = chosen.as_ref().filter(|u| w.images.contains_key(*u)) {
        s.conflicts.fetch_add(1, Ordering::SeqCst);
        return error(StatusCode::CONFLICT, "ENTITY_ALREADY_EXISTS", &format!("Image {u} already exists"));
    }
    let uuid = match chosen {
        Some(u) => u,
        None => new_uuid(&mut w),
    };
    let task = new_task(&mut w, "create_image", &uuid);
    let stored = Stored {
        uuid: uuid.clone(),
        name: name.to_owned(),
        description: input.pointer("/spec/description").and_then(Value::as_str).map(str::to_owned),
        image_type: image_type.to_owned(),
        source_uri: input.pointer("/spec/resources/source_uri").and_then(Value::as_str).map(str::to_owned),
        checksum,
        categories,
        state: "PENDING".into(),
        tasks: vec![task.clone()],
        created: w.counter,
        owner: s.user.clone(),
        ..Stored::default()
    };
    let answer = intent(&stored);
    w.images.insert(uuid.clone(), stored);
    drop(w);
    tokio::spawn(run_create(s.clone(), uuid, task));
    (StatusCode::ACCEPTED, axum::Json(answer)).into_response()
}

/// Moves a task along; `Err` ends the task FAILED and the image ERROR with that message.
fn finish(s: &Shared, task: &str, image: &str, result: Result<Option<Vec<u8>>, String>) {
    let mut w = s.world.lock().unwrap();
    let status = match &result {
        Ok(_) => "SUCCEEDED",
        Err(_) => "FAILED",
    };
    if let Some(t) = w.tasks.get_mut(task) {
        t.status = status.into();
        t.detail = result.as_ref().err().cloned().unwrap_or_default();
    }
    if let Some(i) = w.images.get_mut(image) {
        match result {
            Ok(data) => {
                i.state = "COMPLETE".into();
                if data.is_some() {
                    i.data = data;
                }
            }
            Err(why) => {
                i.state = "ERROR".into();
                i.messages = vec![why];
            }
        }
    }
}

fn set_running(s: &Shared, task: &str) {
    if let Some(t) = s.world.lock().unwrap().tasks.get_mut(task) {
        t.status = "RUNNING".into();
    }
}

/// The create's task: the `source_uri` fetched and stored, its checksum checked.
async fn run_create(s: St, image: String, task: String) {
    tokio::time::sleep(s.delay).await;
    set_running(&s, &task);
    let (uri, checksum) = {
        let w = s.world.lock().unwrap();
        let i = &w.images[&image];
        (i.source_uri.clone(), i.checksum.clone())
    };
    let result = match uri {
        None => Ok(None),
        Some(uri) => {
            s.fetches.fetch_add(1, Ordering::SeqCst);
            let blocked = s.unreachable.lock().unwrap().iter().any(|p| uri.starts_with(p));
            match blocked {
                true => Err(format!("Could not access the URL {uri}: connection timed out")),
                false => fetch(&uri)
                    .await
                    .and_then(|data| verify(&data, checksum.as_ref()).map(|()| Some(data))),
            }
        }
    };
    tokio::time::sleep(s.delay).await;
    let longer = *s.create_delay.lock().unwrap();
    tokio::time::sleep(longer).await;
    finish(&s, &task, &image, result);
}

fn verify(data: &[u8], checksum: Option<&(String, String)>) -> Result<(), String> {
    match checksum {
        None => Ok(()),
        Some((alg, want)) if alg == "SHA_256" => {
            let got = sha256(data);
            match &got == want {
                true => Ok(()),
                false => Err(format!("Checksum mismatch: the image data has SHA_256 {got}, expected {want}")),
            }
        }
        Some((alg, _)) => Err(format!("the double checks SHA_256 only, not {alg}")),
    }
}

/// `uri` over plain HTTP, as Prism Central fetches a `source_uri`.
async fn fetch(uri: &str) -> Result<Vec<u8>, String> {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<Bytes>>();
    let parsed: hyper::Uri = uri.parse().map_err(|e| format!("Invalid source URI {uri}: {e}"))?;
    let resp = client
        .get(parsed)
        .await
        .map_err(|e| format!("Could not access the URL {uri}: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("Could not access the URL {uri}: HTTP {}", resp.status()));
    }
    let body = resp.into_body().collect().await.map_err(|e| format!("Reading {uri}: {e}"))?;
    Ok(body.to_bytes().to_vec())
}

async fn read(State(s): State<St>, headers: HeaderMap, Path(uuid): Path<String>) -> Response {
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    let w = s.world.lock().unwrap();
    match w.images.get(&uuid) {
        Some(i) => axum::Json(intent(i)).into_response(),
        None => error(StatusCode::NOT_FOUND, "ENTITY_NOT_FOUND", &format!("Image {uuid} not found")),
    }
}

async fn delete(State(s): State<St>, headers: HeaderMap, Path(uuid): Path<String>) -> Response {
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    let failing = s.failing_deletes.load(Ordering::SeqCst);
    if failing > 0 {
        s.failing_deletes.store(failing - 1, Ordering::SeqCst);
        return error(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL_ERROR", "the double refuses this delete");
    }
    let mut w = s.world.lock().unwrap();
    if !w.images.contains_key(&uuid) {
        return error(StatusCode::NOT_FOUND, "ENTITY_NOT_FOUND", &format!("Image {uuid} not found"));
    }
    let task = new_task(&mut w, "delete_image", &uuid);
    if let Some(i) = w.images.get_mut(&uuid) {
        i.state = "DELETE_PENDING".into();
    }
    drop(w);
    let (shared, image, t) = (s.clone(), uuid.clone(), task.clone());
    tokio::spawn(async move {
        tokio::time::sleep(shared.delay).await;
        let mut w = shared.world.lock().unwrap();
        w.images.remove(&image);
        if let Some(rec) = w.tasks.get_mut(&t) {
            rec.status = "SUCCEEDED".into();
        }
    });
    let body = json!({"api_version": "3.1", "metadata": {"kind": "image", "uuid": uuid},
        "status": {"state": "DELETE_PENDING", "execution_context": {"task_uuid": task}}});
    (StatusCode::ACCEPTED, axum::Json(body)).into_response()
}

async fn upload(State(s): State<St>, headers: HeaderMap, Path(uuid): Path<String>, body: Bytes) -> Response {
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    let header = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let checksum = header("x-nutanix-checksum-type").zip(header("x-nutanix-checksum-bytes").map(|v| v.to_ascii_lowercase()));
    let mut w = s.world.lock().unwrap();
    let Some(i) = w.images.get(&uuid) else {
        return error(StatusCode::NOT_FOUND, "ENTITY_NOT_FOUND", &format!("Image {uuid} not found"));
    };
    if i.source_uri.is_some() || i.data.is_some() || i.state != "COMPLETE" {
        return error(StatusCode::CONFLICT, "INVALID_REQUEST", "once the image has been uploaded the image cannot be changed");
    }
    let task = new_task(&mut w, "upload_image", &uuid);
    if let Some(i) = w.images.get_mut(&uuid) {
        i.tasks = vec![task.clone()];
        i.state = "PENDING".into();
        if checksum.is_some() {
            i.checksum = checksum.clone();
        }
    }
    drop(w);
    let (shared, data) = (s.clone(), body.to_vec());
    tokio::spawn(async move {
        tokio::time::sleep(shared.delay).await;
        set_running(&shared, &task);
        let result = verify(&data, checksum.as_ref()).map(|()| Some(data));
        finish(&shared, &task, &uuid, result);
    });
    StatusCode::OK.into_response()
}

async fn task(State(s): State<St>, headers: HeaderMap, Path(uuid): Path<String>) -> Response {
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    let w = s.world.lock().unwrap();
    let Some(t) = w.tasks.get(&uuid) else {
        return error(StatusCode::NOT_FOUND, "INVALID_UUID", &format!("Task {uuid} not found"));
    };
    let percent = match t.status.as_str() {
        "SUCCEEDED" | "FAILED" => 100,
        "RUNNING" => 50,
        _ => 0,
    };
    let mut body = json!({"api_version": "3.1", "uuid": uuid, "status": t.status,
        "operation_type": t.operation, "percentage_complete": percent,
        "entity_reference_list": [{"kind": "image", "uuid": t.image}]});
    if !t.detail.is_empty() {
        body["error_detail"] = json!(t.detail);
    }
    axum::Json(body).into_response()
}

async fn category(State(s): State<St>, headers: HeaderMap, Path((key, value)): Path<(String, String)>) -> Response {
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    let pause = *s.category_delay.lock().unwrap();
    tokio::time::sleep(pause).await;
    let w = s.world.lock().unwrap();
    match w.categories.contains(&(key.clone(), value.clone())) {
        true => axum::Json(json!({"api_version": "3.1", "name": key, "value": value})).into_response(),
        false => error(StatusCode::NOT_FOUND, "ENTITY_NOT_FOUND", &format!("Category {key}:{value} not found")),
    }
}

async fn me(State(s): State<St>, headers: HeaderMap) -> Response {
    if let Some(r) = refused(&s, &headers) {
        return r;
    }
    axum::Json(json!({"api_version": "3.1", "metadata": {"kind": "user", "uuid": s.user},
        "spec": {"resources": {}}, "status": {"state": "COMPLETE", "name": "admin", "resources": {}}}))
    .into_response()
}
