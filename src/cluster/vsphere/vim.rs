//! The few vSphere API calls the importer makes, as vim25 SOAP over HTTPS: log in, find
//! inventory paths, read properties, `CreateImportSpec`, `ImportVApp` and its NFC lease,
//! `MarkAsTemplate`, `Destroy_Task`.
//!
//! Not `vim_rs`: it generates the whole vim25 API, and building it took longer than
//! everything else in this crate together, for a dozen calls. Requests are written with
//! `quick-xml`'s writer, each as the elements of its call; responses are read with
//! `roxmltree`. The import spec vCenter returns is passed back to `ImportVApp` as the XML it
//! came as, so that no field of it is lost in a type of ours.

use std::collections::BTreeMap;
use std::io;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use hyper::{Request, StatusCode, header};
use k8s_openapi::jiff::Timestamp;
use roxmltree::{Document, Node};

use super::https::{Https, HttpsError};
pub use super::xml::{ImportTarget, Moref};
use super::xml::{
    VIM25, WrittenSpec, Xml, child, deep_text, element, envelope, import_spec_args, no_args,
};
use crate::cluster::cause::{Cause, cause};

/// The version the requests are written for; vCenter 7 and 8 both answer it.
const SOAP_ACTION: &str = "urn:vim25/7.0.3.0";
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
const LEASE_WAIT: Duration = Duration::from_secs(300);
const UPLOAD_BASE: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub enum VimError {
    #[error(transparent)]
    Http(#[from] HttpsError),
    #[error("{method}: {message}")]
    Fault { method: String, message: String },
    #[error("{method}: the answer is not what the vSphere API answers: {cause}")]
    Answer {
        method: String,
        #[source]
        cause: Cause,
    },
    #[error("{method}: no answer in time")]
    Timeout { method: String },
    #[error("{method}: cannot write the request")]
    Request {
        method: String,
        #[source]
        source: io::Error,
    },
}

/// `CreateImportSpec`'s answer: the spec to pass back, and which OVA file goes to which
/// device of the lease.
#[derive(Debug)]
pub struct ImportSpec {
    spec: WrittenSpec,
    pub files: Vec<FileItem>,
}

#[derive(Debug, Clone)]
pub struct FileItem {
    /// Matches a lease device's `importKey`.
    pub device_id: String,
    /// The file's name in the OVA.
    pub path: String,
    /// A new file (PUT) rather than a disk to stream (POST).
    pub create: bool,
}

/// A ready NFC lease: the VM it creates and where each device's file goes.
#[derive(Debug)]
pub struct LeaseInfo {
    pub entity: Moref,
    pub devices: Vec<(String, String)>,
}

/// One logged-in session with a vCenter.
pub struct Vim {
    http: Https,
    server: String,
    cookie: String,
    property_collector: Moref,
    search_index: Moref,
    ovf_manager: Moref,
    session_manager: Moref,
}

impl Vim {
    /// `RetrieveServiceContent`, then `Login` with the machine API's credentials.
    pub async fn login(
        http: &Https,
        server: &str,
        user: &str,
        password: &str,
    ) -> Result<Vim, VimError> {
        let mut vim = Vim {
            http: http.clone(),
            server: server.to_owned(),
            cookie: String::new(),
            property_collector: Moref::new("PropertyCollector", "propertyCollector"),
            search_index: Moref::new("SearchIndex", "SearchIndex"),
            ovf_manager: Moref::new("OvfManager", "OvfManager"),
            session_manager: Moref::new("SessionManager", "SessionManager"),
        };
        let instance = Moref::new("ServiceInstance", "ServiceInstance");
        let (text, _) = vim
            .call("RetrieveServiceContent", &instance, no_args)
            .await?;
        let doc = parse("RetrieveServiceContent", &text)?;
        let content = returnval("RetrieveServiceContent", &doc)?;
        let moref = |name: &str| {
            child(content, name)
                .and_then(Moref::of)
                .ok_or_else(|| answer("RetrieveServiceContent", format!("no {name}")))
        };
        vim.property_collector = moref("propertyCollector")?;
        vim.search_index = moref("searchIndex")?;
        vim.ovf_manager = moref("ovfManager")?;
        vim.session_manager = moref("sessionManager")?;
        let args = |w: &mut Xml| {
            element(w, "userName", user)?;
            element(w, "password", password)
        };
        let session_manager = vim.session_manager.clone();
        let (_, cookie) = vim.call("Login", &session_manager, args).await?;
        vim.cookie = cookie.ok_or_else(|| answer("Login", "no session cookie"))?;
        Ok(vim)
    }

    /// `host[:port]` of the vCenter.
    pub fn server(&self) -> &str {
        &self.server
    }

    pub async fn logout(&self) {
        let _ = self.call("Logout", &self.session_manager, no_args).await;
    }

    /// `FindByInventoryPath`: the object at `/datacenter/vm/folder/name` and the like.
    pub async fn find(&self, path: &str) -> Result<Option<Moref>, VimError> {
        let args = |w: &mut Xml| element(w, "inventoryPath", path);
        let (text, _) = self
            .call("FindByInventoryPath", &self.search_index, args)
            .await?;
        let doc = parse("FindByInventoryPath", &text)?;
        Ok(doc
            .descendants()
            .find(|n| n.has_tag_name((VIM25, "returnval")))
            .and_then(Moref::of))
    }

    /// `RetrievePropertiesEx` of one property of one object; `read` takes its `val`.
    pub async fn property<T>(
        &self,
        obj: &Moref,
        path: &str,
        read: impl FnOnce(Option<Node<'_, '_>>) -> T,
    ) -> Result<T, VimError> {
        let args = |w: &mut Xml| {
            w.create_element("specSet").write_inner_content(|w| {
                w.create_element("propSet").write_inner_content(|w| {
                    element(w, "type", &obj.kind)?;
                    element(w, "pathSet", path)
                })?;
                w.create_element("objectSet")
                    .write_inner_content(|w| obj.write(w, "obj"))?;
                Ok(())
            })?;
            element(w, "options", "")
        };
        let (text, _) = self
            .call("RetrievePropertiesEx", &self.property_collector, args)
            .await?;
        let doc = parse("RetrievePropertiesEx", &text)?;
        let val = doc
            .descendants()
            .filter(|n| n.has_tag_name((VIM25, "propSet")))
            .find(|p| child(*p, "name").and_then(|n| n.text()) == Some(path))
            .and_then(|p| child(p, "val"));
        Ok(read(val))
    }

    /// Whether the VM is marked as a template (`config.template`): `None` when vCenter does
    /// not say (no `config`: the VM is inaccessible, or we may not read it).
    pub async fn is_template(&self, vm: &Moref) -> Result<Option<bool>, VimError> {
        self.property(vm, "config.template", |v| match v.and_then(|v| v.text()) {
            Some("true") => Some(true),
            Some("false") => Some(false),
            _ => None,
        })
        .await
    }

    /// When the VM was made (`config.createDate`), if vCenter says.
    pub async fn created(&self, vm: &Moref) -> Result<Option<Timestamp>, VimError> {
        self.property(vm, "config.createDate", |v| {
            v.and_then(|v| v.text()).and_then(|t| t.trim().parse().ok())
        })
        .await
    }

    /// The VM's `config.extraConfig` as keys and values; `None` when vCenter does not say
    /// (no `config`).
    pub async fn extra_config(
        &self,
        vm: &Moref,
    ) -> Result<Option<BTreeMap<String, String>>, VimError> {
        self.property(vm, "config.extraConfig", |v| {
            let pairs = v?.children().filter_map(|o| {
                Some((
                    child(o, "key")?.text()?.to_owned(),
                    child(o, "value")?.text().unwrap_or_default().to_owned(),
                ))
            });
            Some(pairs.collect())
        })
        .await
    }

    /// The VM's name (`name`), if it still exists.
    pub async fn name(&self, vm: &Moref) -> Result<Option<String>, VimError> {
        self.property(vm, "name", |v| v.and_then(|v| v.text()).map(str::to_owned))
            .await
    }

    /// vCenter's own clock (`CurrentTime`): what its dates are compared with.
    pub async fn current_time(&self) -> Result<Timestamp, VimError> {
        const METHOD: &str = "CurrentTime";
        let instance = Moref::new("ServiceInstance", "ServiceInstance");
        let (text, _) = self.call(METHOD, &instance, no_args).await?;
        let doc = parse(METHOD, &text)?;
        let time = returnval(METHOD, &doc)?.text().unwrap_or_default().trim();
        time.parse()
            .map_err(|e| answer(METHOD, format!("{time:?} is not a time: {e}")))
    }

    /// The provisioning of the VM's first disk (`thin`, `thick`, `eagerZeroedThick`), as
    /// `CreateImportSpec` takes it; `None` when it has no disk vCenter describes.
    pub async fn disk_provisioning(&self, vm: &Moref) -> Result<Option<String>, VimError> {
        self.property(vm, "config.hardware.device", |v| {
            let backing = v?
                .descendants()
                .filter(|n| n.has_tag_name((VIM25, "backing")))
                .find(|b| child(*b, "thinProvisioned").is_some())?;
            let flag = |name: &str| child(backing, name).and_then(|n| n.text()) == Some("true");
            Some(
                match (flag("thinProvisioned"), flag("eagerlyScrub")) {
                    (true, _) => "thin",
                    (false, true) => "eagerZeroedThick",
                    (false, false) => "thick",
                }
                .to_owned(),
            )
        })
        .await
    }

    /// A property that is a list of references (`childEntity`, `host`, `datastore`).
    pub async fn morefs(&self, obj: &Moref, path: &str) -> Result<Vec<Moref>, VimError> {
        self.property(obj, path, |v| {
            v.map(|v| v.children().filter_map(Moref::of).collect())
                .unwrap_or_default()
        })
        .await
    }

    /// The VMs directly in a folder, with their names.
    pub async fn folder_vms(&self, folder: &Moref) -> Result<Vec<(Moref, String)>, VimError> {
        let children = self.morefs(folder, "childEntity").await?;
        let mut out = Vec::new();
        for vm in children.into_iter().filter(|c| c.kind == "VirtualMachine") {
            let name = self
                .property(&vm, "name", |v| v.and_then(|v| v.text()).map(str::to_owned))
                .await?;
            if let Some(name) = name {
                out.push((vm, name));
            }
        }
        Ok(out)
    }

    /// `CreateImportSpec` for the OVF descriptor, each of its networks mapped to `network`;
    /// the spec's `configSpec` gets `extra_config`, so the VM carries it from its creation.
    pub async fn create_import_spec(
        &self,
        ovf: &str,
        target: &ImportTarget<'_>,
        networks: &[(String, Moref)],
        extra_config: &[(String, String)],
    ) -> Result<ImportSpec, VimError> {
        const METHOD: &str = "CreateImportSpec";
        let args = |w: &mut Xml| import_spec_args(w, ovf, target, networks);
        let (text, _) = self.call(METHOD, &self.ovf_manager, args).await?;
        let doc = parse(METHOD, &text)?;
        let result = returnval(METHOD, &doc)?;
        if let Some(e) = child(result, "error") {
            let message = deep_text(e, "localizedMessage").unwrap_or("an error");
            return Err(fault(METHOD, message.to_owned()));
        }
        let spec = child(result, "importSpec").ok_or_else(|| answer(METHOD, "no importSpec"))?;
        let spec = WrittenSpec::read(&text, spec, extra_config)
            .ok_or_else(|| answer(METHOD, "an importSpec without configSpec"))?;
        let files = result
            .children()
            .filter(|n| n.has_tag_name((VIM25, "fileItem")))
            .filter_map(|f| {
                Some(FileItem {
                    device_id: child(f, "deviceId")?.text()?.to_owned(),
                    path: child(f, "path")?.text()?.to_owned(),
                    create: child(f, "create").and_then(|c| c.text()) == Some("true"),
                })
            })
            .collect();
        Ok(ImportSpec { spec, files })
    }

    /// `ImportVApp` into the pool and folder: the NFC lease.
    pub async fn import_vapp(
        &self,
        pool: &Moref,
        spec: &ImportSpec,
        folder: &Moref,
        host: Option<&Moref>,
    ) -> Result<Moref, VimError> {
        let args = |w: &mut Xml| {
            spec.spec.write(w, "spec")?;
            folder.write(w, "folder")?;
            host.map_or(Ok(()), |h| h.write(w, "host"))
        };
        let (text, _) = self.call("ImportVApp", pool, args).await?;
        let doc = parse("ImportVApp", &text)?;
        Moref::of(returnval("ImportVApp", &doc)?).ok_or_else(|| answer("ImportVApp", "no lease"))
    }

    /// Waits for the lease to be ready (vCenter creates the VM first).
    pub async fn lease_ready(&self, lease: &Moref) -> Result<LeaseInfo, VimError> {
        const METHOD: &str = "HttpNfcLease";
        let deadline = tokio::time::Instant::now() + LEASE_WAIT;
        loop {
            let state = self
                .property(lease, "state", |v| {
                    v.and_then(|v| v.text()).map(str::to_owned)
                })
                .await?;
            match state.as_deref() {
                Some("ready") => break,
                Some("error") => {
                    let why = self
                        .property(lease, "error", |v| {
                            v.and_then(|v| deep_text(v, "localizedMessage"))
                                .map(str::to_owned)
                        })
                        .await?;
                    return Err(fault(
                        METHOD,
                        why.unwrap_or_else(|| "the lease failed".into()),
                    ));
                }
                _ if tokio::time::Instant::now() > deadline => {
                    return Err(VimError::Timeout {
                        method: METHOD.into(),
                    });
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        self.property(lease, "info", |v| {
            let v = v?;
            let entity = child(v, "entity").and_then(Moref::of)?;
            let devices = v
                .children()
                .filter(|n| n.has_tag_name((VIM25, "deviceUrl")))
                .filter_map(|d| {
                    Some((
                        child(d, "importKey")?.text()?.to_owned(),
                        child(d, "url")?.text()?.to_owned(),
                    ))
                })
                .collect();
            Some(LeaseInfo { entity, devices })
        })
        .await?
        .ok_or_else(|| answer(METHOD, "a ready lease without info"))
    }

    /// Sends one file of the OVA to a lease device: a disk is streamed (POST), anything
    /// else created (PUT). A `*` host means the server's (the NFC convention).
    pub async fn upload(
        &self,
        url: &str,
        item: &FileItem,
        body: UnsyncBoxBody<Bytes, std::io::Error>,
        length: u64,
    ) -> Result<(), VimError> {
        let url = device_url(url, &self.server);
        let mut req = Request::builder()
            .uri(&url)
            .header(header::CONTENT_LENGTH, length)
            .header(header::COOKIE, &self.cookie);
        req = if item.create {
            req.method("PUT").header("Overwrite", "t")
        } else {
            req.method("POST")
                .header(header::CONTENT_TYPE, "application/x-vnd.vmware-streamVmdk")
        };
        let req = req.body(body).map_err(|e| answer("upload", e))?;
        // Generous for the slowest link a datastore is behind (a mebibyte a second), and
        // bounded: the lease is kept alive while this runs.
        let limit = UPLOAD_BASE + Duration::from_secs(length >> 20);
        let sent = tokio::time::timeout(limit, self.http.send(req, None)).await;
        let (status, text) = sent.map_err(|_| VimError::Timeout {
            method: "upload".into(),
        })??;
        if !status.is_success() {
            return Err(fault("upload", format!("{url}: HTTP {status}: {text}")));
        }
        Ok(())
    }

    pub async fn lease_complete(&self, lease: &Moref) -> Result<(), VimError> {
        self.call("HttpNfcLeaseComplete", lease, no_args)
            .await
            .map(drop)
    }

    /// Tells vCenter the lease is in use: it aborts a lease that reports nothing for its
    /// timeout (five minutes), however long an upload takes.
    pub async fn lease_progress(&self, lease: &Moref, percent: u8) -> Result<(), VimError> {
        let args = |w: &mut Xml| element(w, "percent", &percent.to_string());
        self.call("HttpNfcLeaseProgress", lease, args)
            .await
            .map(drop)
    }

    pub async fn lease_abort(&self, lease: &Moref) -> Result<(), VimError> {
        self.call("HttpNfcLeaseAbort", lease, no_args)
            .await
            .map(drop)
    }

    pub async fn mark_as_template(&self, vm: &Moref) -> Result<(), VimError> {
        self.call("MarkAsTemplate", vm, no_args).await.map(drop)
    }

    /// `Destroy_Task`, waited for.
    pub async fn destroy(&self, vm: &Moref) -> Result<(), VimError> {
        const METHOD: &str = "Destroy_Task";
        let (text, _) = self.call(METHOD, vm, no_args).await?;
        let doc = parse(METHOD, &text)?;
        let task = Moref::of(returnval(METHOD, &doc)?).ok_or_else(|| answer(METHOD, "no task"))?;
        let deadline = tokio::time::Instant::now() + LEASE_WAIT;
        loop {
            let state = self
                .property(&task, "info.state", |v| {
                    v.and_then(|v| v.text()).map(str::to_owned)
                })
                .await?;
            match state.as_deref() {
                Some("success") => return Ok(()),
                Some("error") => {
                    let why = self
                        .property(&task, "info.error", |v| {
                            v.and_then(|v| deep_text(v, "localizedMessage"))
                                .map(str::to_owned)
                        })
                        .await?;
                    return Err(fault(METHOD, why.unwrap_or_else(|| "failed".into())));
                }
                _ if tokio::time::Instant::now() > deadline => {
                    return Err(VimError::Timeout {
                        method: METHOD.into(),
                    });
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// One SOAP call: the response's text, and the session cookie it set, if any.
    async fn call(
        &self,
        method: &str,
        this: &Moref,
        args: impl FnOnce(&mut Xml) -> io::Result<()>,
    ) -> Result<(String, Option<String>), VimError> {
        let body = envelope(method, this, args).map_err(|source| VimError::Request {
            method: method.into(),
            source,
        })?;
        let mut req = Request::post(format!("https://{}/sdk", self.server))
            .header(header::CONTENT_TYPE, "text/xml; charset=utf-8")
            .header("SOAPAction", SOAP_ACTION);
        if !self.cookie.is_empty() {
            req = req.header(header::COOKIE, &self.cookie);
        }
        let req = req
            .body(
                Full::new(Bytes::from(body))
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .map_err(|e| answer(method, e))?;
        let mut cookie = None;
        let sent = tokio::time::timeout(CALL_TIMEOUT, self.http.send(req, Some(&mut cookie))).await;
        let (status, text) = sent.map_err(|_| VimError::Timeout {
            method: method.into(),
        })??;
        if status == StatusCode::OK {
            return Ok((text, cookie));
        }
        let message = Document::parse(&text)
            .ok()
            .and_then(|d| {
                d.descendants()
                    .find(|n| n.tag_name().name() == "faultstring")
                    .and_then(|n| n.text().map(str::to_owned))
            })
            .unwrap_or_else(|| format!("HTTP {status}"));
        Err(fault(method, message))
    }
}

/// An NFC device URL with the vCenter's host: a `*` host (and any port with it) is the
/// server the session talks to.
fn device_url(url: &str, server: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    match host {
        "*" => format!("{scheme}://{server}{path}"),
        _ => url.to_owned(),
    }
}

fn parse<'t>(method: &str, text: &'t str) -> Result<Document<'t>, VimError> {
    Document::parse(text).map_err(|e| answer(method, e))
}

fn returnval<'a, 't>(method: &str, doc: &'a Document<'t>) -> Result<Node<'a, 't>, VimError> {
    doc.descendants()
        .find(|n| n.has_tag_name((VIM25, "returnval")))
        .ok_or_else(|| answer(method, "no returnval"))
}

fn answer(method: &str, why: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> VimError {
    VimError::Answer {
        method: method.into(),
        cause: cause(why),
    }
}

fn fault(method: &str, message: String) -> VimError {
    VimError::Fault {
        method: method.into(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_host_is_the_server_port_and_all() {
        for (url, want) in [
            (
                "https://*/nfc/52a/disk-0.vmdk",
                "https://vc.example:8443/nfc/52a/disk-0.vmdk",
            ),
            (
                "https://*:443/nfc/52a/disk-0.vmdk",
                "https://vc.example:8443/nfc/52a/disk-0.vmdk",
            ),
            (
                "https://esx1.example/nfc/52a/disk-0.vmdk",
                "https://esx1.example/nfc/52a/disk-0.vmdk",
            ),
        ] {
            assert_eq!(device_url(url, "vc.example:8443"), want);
        }
    }
}
