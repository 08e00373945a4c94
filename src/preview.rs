//! `preview`: the webhook's decision, offline, one JSON object per MachineSet on stdout.

use std::io::Read;
use std::path::Path;

use serde_json::{Value, json};

use crate::cluster::{aws_credentials, ec2};
use crate::core::decision::{self, Decision};
use crate::core::platforms::aws::AwsLearned;
use crate::core::snapshot::Snapshot;
use crate::core::stream_choice;
use crate::offline::{Offline, OfflineError};

#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    #[error("reading {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error(transparent)]
    Offline(#[from] OfflineError),
    #[error("the patch does not apply to the MachineSet (a bug): {0}")]
    Apply(String),
}

fn read(path: &Path) -> Result<String, PreviewError> {
    std::fs::read_to_string(path).map_err(|cause| PreviewError::Read {
        path: path.display().to_string(),
        cause,
    })
}

/// Where the MachineSets come from: a file, or standard input for `-`.
fn read_input(path: &Path) -> Result<String, PreviewError> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|cause| PreviewError::Read {
                path: "standard input".into(),
                cause,
            })?;
        Ok(text)
    } else {
        read(path)
    }
}

/// `Kind/name` of a document, for messages.
fn describe(doc: &Value) -> String {
    let kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("<no kind>");
    match doc.pointer("/metadata/name").and_then(Value::as_str) {
        Some(name) => format!("{kind}/{name}"),
        None => kind.to_owned(),
    }
}

/// Why an input holds no MachineSet to preview.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{0}: items is not a list")]
    ItemsNotAList(String),
    #[error("a document is not an object but {0}")]
    NotAnObject(&'static str),
    /// The other objects found, if any.
    #[error("holds no MachineSet ({})", found(.0))]
    NoMachineSet(Vec<String>),
}

fn found(skipped: &[String]) -> String {
    match skipped {
        [] => "it is empty".into(),
        _ => format!("found {}", skipped.join(", ")),
    }
}

/// The MachineSets of a document stream, as administrators have them: one object, a
/// `kind: List` (`oc get machinesets -o yaml`), several YAML documents. Other objects
/// beside MachineSets (a MachineAutoscaler in the same GitOps file) are returned as
/// skipped; an input with no MachineSet at all is an error.
pub fn machinesets(docs: Vec<Value>) -> Result<(Vec<Value>, Vec<String>), InputError> {
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    let mut pending: Vec<Value> = docs.into_iter().rev().collect();
    while let Some(doc) = pending.pop() {
        match &doc {
            Value::Null => {}
            Value::Object(o) if o.get("kind").and_then(Value::as_str) == Some("MachineSet") => {
                found.push(doc)
            }
            Value::Object(o) if is_list(o) => match o.get("items") {
                Some(Value::Array(items)) => pending.extend(items.iter().rev().cloned()),
                Some(Value::Null) | None => {}
                Some(_) => return Err(InputError::ItemsNotAList(describe(&doc))),
            },
            Value::Object(_) => skipped.push(describe(&doc)),
            other => {
                return Err(InputError::NotAnObject(match other {
                    Value::String(_) => "a string",
                    Value::Array(_) => "a list",
                    Value::Number(_) => "a number",
                    _ => "a boolean",
                }));
            }
        }
    }
    if found.is_empty() {
        return Err(InputError::NoMachineSet(skipped));
    }
    Ok((found, skipped))
}

/// `kind: List`, and the typed lists (`MachineSetList`) that `-o json` of a list prints.
fn is_list(o: &serde_json::Map<String, Value>) -> bool {
    o.get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && o.contains_key("items")
}

/// Read the MachineSets from a file (or `-`), with the names of other objects skipped.
pub(crate) fn read_machinesets(path: &Path) -> Result<(Vec<Value>, Vec<String>), PreviewError> {
    let text = read_input(path)?;
    let parse_error = |message: String| PreviewError::Parse {
        path: if path == Path::new("-") {
            "standard input".into()
        } else {
            path.display().to_string()
        },
        message,
    };
    let docs =
        crate::core::document::parse_documents(&text).map_err(|e| parse_error(e.to_string()))?;
    machinesets(docs).map_err(|e| parse_error(e.to_string()))
}

/// `{"reason", "message", "patch", "machineSet"}`: the MachineSet after the patch.
pub fn render(mut machineset: Value, decision: &Decision) -> Result<Value, PreviewError> {
    let patch = decision
        .patch
        .to_json_patch()
        .map_err(|e| PreviewError::Apply(e.to_string()))?;
    json_patch::patch(&mut machineset, &patch).map_err(|e| PreviewError::Apply(e.to_string()))?;
    Ok(json!({
        "reason": decision.reason,
        "message": decision.message,
        "patch": decision.patch,
        "machineSet": machineset,
    }))
}

/// What `preview` found: one result per MachineSet, in input order.
pub struct Preview {
    pub results: Vec<Value>,
    /// Objects in the input that are not MachineSets, as `Kind/name`.
    pub skipped: Vec<String>,
    /// Whether any MachineSet would change (for `--exit-code`).
    pub changes: bool,
}

pub fn run(machineset_file: &Path, offline: &Offline<'_>) -> Result<Preview, PreviewError> {
    let snap = offline.snapshot()?;
    let (machinesets, skipped) = read_machinesets(machineset_file)?;
    let snap = ask_ec2(&machinesets, snap);
    let mut changes = false;
    let results = machinesets
        .into_iter()
        .map(|ms| {
            let d = decision::decide_object(&ms, &snap);
            changes |= !d.patch.0.is_empty();
            // Only a dual-stream ConfigMap has a stream to name.
            let stream = stream_choice::shown(&ms, &snap);
            let mut out = render(ms, &d)?;
            if let Some(stream) = stream {
                out["stream"] = json!(stream);
            }
            Ok(out)
        })
        .collect::<Result<_, PreviewError>>()?;
    Ok(Preview {
        results,
        skipped,
        changes,
    })
}

/// AWS MachineSets whose AMI is not in the stream need EC2 to be decided, as in the server:
/// with credentials in the SDK's standard environment, ask it; without, say so.
fn ask_ec2(machinesets: &[Value], snap: Snapshot) -> Snapshot {
    let json: Vec<Vec<u8>> = machinesets
        .iter()
        .filter_map(|m| serde_json::to_vec(m).ok())
        .collect();
    if ec2::queries_for(json.iter().map(Vec::as_slice), &snap).is_empty() {
        return snap;
    }
    if !aws_credentials::own_configured() {
        let learned = AwsLearned {
            unavailable: Some(
                "no AWS credentials in the environment (AWS_ACCESS_KEY_ID, AWS_PROFILE, AWS_WEB_IDENTITY_TOKEN_FILE or ~/.aws)".into(),
            ),
            ..AwsLearned::default()
        };
        return ec2::with_learned(&snap, learned);
    }
    let asked = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| {
            rt.block_on(async {
                let client = ec2::Ec2::from_env().await.map_err(|e| e.to_string())?;
                Ok(ec2::classify(&client, &json, &snap).await)
            })
        });
    let learned = match asked {
        Ok((learned, None)) => learned,
        Ok((mut learned, Some(e))) => {
            eprintln!("preview: EC2: {e}");
            learned.unavailable = Some(e.to_string());
            learned
        }
        Err(why) => {
            eprintln!("preview: EC2: {why}");
            AwsLearned {
                unavailable: Some(why),
                ..AwsLearned::default()
            }
        }
    };
    ec2::with_learned(&snap, learned)
}
