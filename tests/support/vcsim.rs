//! vcsim (govmomi's vCenter simulator, `tests/go/vcsim`, built by `scripts/build-vcsim`),
//! and the SOAP and vAPI calls the tests make to it themselves (curl).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::cluster::{eventually, text};
use super::vsphere::INFRA_ID;

// ------------------------------------------------------------------------------ vcsim

/// vcsim, stopped when dropped (it exits when its standard input closes).
pub struct VCenter {
    child: Child,
    _stdin: ChildStdin,
    pub port: u16,
    pub url: String,
}

impl VCenter {
    pub fn start(tls: &Path, listen: &str) -> VCenter {
        let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-vcsim"))
            .output()
            .expect("scripts/build-vcsim");
        assert!(out.status.success(), "build-vcsim: {}", text(&out));
        let binary = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        let mut child = Command::new(binary)
            .args(["-listen", listen])
            .arg("-tls-cert-file")
            .arg(tls.join("tls.crt"))
            .arg("-tls-key-file")
            .arg(tls.join("tls.key"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("vcsim");
        let stdin = child.stdin.take().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let about: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("vcsim said {line:?}: {e}"));
        VCenter {
            child,
            _stdin: stdin,
            port: about["host"]
                .as_str()
                .unwrap()
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .unwrap(),
            url: about["url"].as_str().unwrap().to_owned(),
        }
    }

    /// A SOAP call of our own (curl, with the session cookie in a jar): whether the
    /// inventory path exists.
    pub fn soap(&self, jar: &Path, body: &str) -> String {
        let envelope = format!(
            r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"#
        );
        let out = Command::new("curl")
            .args(["-sS", "-k", "-b"])
            .arg(jar)
            .arg("-c")
            .arg(jar)
            .args([
                "-H",
                "Content-Type: text/xml",
                "--data-binary",
                &envelope,
                &self.url,
            ])
            .output()
            .expect("curl");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn session(&self) -> tempfile::NamedTempFile {
        let jar = tempfile::NamedTempFile::new().unwrap();
        self.soap(
            jar.path(),
            r#"<Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>user</userName><password>pass</password></Login>"#,
        );
        jar
    }

    /// The VM at `path`.
    pub fn find(&self, jar: &Path, path: &str) -> Option<String> {
        self.find_kind(jar, path, "VirtualMachine")
    }

    /// `FindByInventoryPath`: the reference of the `kind` object at `path`.
    pub fn find_kind(&self, jar: &Path, path: &str, kind: &str) -> Option<String> {
        let answer = self.soap(
            jar,
            &format!(
                r#"<FindByInventoryPath xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><inventoryPath>{}</inventoryPath></FindByInventoryPath>"#,
                quick_xml::escape::escape(path)
            ),
        );
        let open = format!(r#"<returnval type="{kind}">"#);
        let start = answer.find(&open)? + open.len();
        let end = answer[start..].find('<')? + start;
        Some(answer[start..end].to_owned())
    }

    /// `CreateFolder` in the folder at `parent`, as the installer makes its folder.
    pub fn create_folder(&self, parent: &str, name: &str) {
        let jar = self.session();
        let folder = self.find_kind(jar.path(), parent, "Folder").expect(parent);
        let made = self.soap(
            jar.path(),
            &format!(
                r#"<CreateFolder xmlns="urn:vim25"><_this type="Folder">{folder}</_this><name>{name}</name></CreateFolder>"#
            ),
        );
        assert!(made.contains("<returnval"), "CreateFolder: {made}");
    }

    /// `CreateResourcePool` in the pool at `parent`.
    pub fn create_resource_pool(&self, parent: &str, name: &str) {
        let jar = self.session();
        let pool = self
            .find_kind(jar.path(), parent, "ResourcePool")
            .expect(parent);
        let allocation = "<reservation>0</reservation><expandableReservation>true</expandableReservation><limit>-1</limit><shares><shares>4000</shares><level>normal</level></shares>";
        let made = self.soap(
            jar.path(),
            &format!(
                r#"<CreateResourcePool xmlns="urn:vim25"><_this type="ResourcePool">{pool}</_this><name>{}</name><spec><cpuAllocation>{allocation}</cpuAllocation><memoryAllocation>{allocation}</memoryAllocation></spec></CreateResourcePool>"#,
                quick_xml::escape::escape(name)
            ),
        );
        assert!(made.contains("<returnval"), "CreateResourcePool: {made}");
    }

    /// A tag `name` in a new category `category`: its id.
    pub fn create_tag(&self, category: &str, name: &str) -> String {
        let category = self.rest(
            "POST",
            "/tagging/category",
            json!({"create_spec": {"name": category, "description": "",
                   "cardinality": "MULTIPLE", "associable_types": []}}),
        );
        let tag = self.rest(
            "POST",
            "/tagging/tag",
            json!({"create_spec": {"name": name, "description": "", "category_id": category}}),
        );
        tag.as_str().expect("a tag id").to_owned()
    }

    /// A vAPI (REST) call of our own, with a new session: the answer's `value`.
    pub fn rest(&self, method: &str, path: &str, body: Value) -> Value {
        let base = self.url.replace("/sdk", "/rest/com/vmware/cis");
        let curl = |args: &[&str]| {
            let out = Command::new("curl")
                .args(["-sS", "-k", "-H", "Content-Type: application/json"])
                .args(args)
                .output()
                .expect("curl");
            serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)["value"].clone()
        };
        let session = curl(&["-X", "POST", "-u", "user:pass", &format!("{base}/session")]);
        let header = format!("vmware-api-session-id: {}", session.as_str().unwrap());
        curl(&[
            "-X",
            method,
            "-H",
            &header,
            "--data-binary",
            &body.to_string(),
            &format!("{base}{path}"),
        ])
    }

    /// The installer's cluster tag: `<infra-id>` in category `openshift-<infra-id>`.
    pub fn create_cluster_tag(&self) {
        let category = self.rest(
            "POST",
            "/tagging/category",
            json!({"create_spec": {"name": format!("openshift-{INFRA_ID}"), "description": "",
                   "cardinality": "SINGLE", "associable_types": []}}),
        );
        let tag = self.rest(
            "POST",
            "/tagging/tag",
            json!({"create_spec": {"name": INFRA_ID, "description": "", "category_id": category}}),
        );
        assert!(tag.is_string(), "the tag was not made: {tag}");
    }

    /// The names of the tags attached to the VM at `path`.
    pub fn tags_of(&self, path: &str) -> Vec<String> {
        let vm = self.find(self.session().path(), path).expect(path);
        let ids = self.rest(
            "POST",
            "/tagging/tag-association?~action=list-attached-tags",
            json!({"object_id": {"id": vm, "type": "VirtualMachine"}}),
        );
        ids.as_array()
            .into_iter()
            .flatten()
            .map(|id| {
                let tag = self.rest(
                    "GET",
                    &format!("/tagging/tag/id:{}", id.as_str().unwrap()),
                    Value::Null,
                );
                tag["name"].as_str().unwrap_or_default().to_owned()
            })
            .collect()
    }

    /// A plain VM (not a template) named `name` in the folder at `folder`, in the pool at
    /// `pool`: what an import stopped before `MarkAsTemplate` leaves.
    pub fn create_vm(&self, folder_path: &str, pool: &str, name: &str) {
        self.create_vm_with(folder_path, pool, name, &[]);
    }

    /// The same, with these `extraConfig` keys and values.
    pub fn create_vm_with(
        &self,
        folder_path: &str,
        pool: &str,
        name: &str,
        extra: &[(&str, &str)],
    ) {
        let jar = self.session();
        let moref = |path: &str, kind: &str| self.find_kind(jar.path(), path, kind).expect(path);
        let (folder, pool) = (moref(folder_path, "Folder"), moref(pool, "ResourcePool"));
        let extra: String = extra
            .iter()
            .map(|(k, v)| format!(r#"<extraConfig><key>{k}</key><value xsi:type="xsd:string">{v}</value></extraConfig>"#))
            .collect();
        let made = self.soap(
            jar.path(),
            &format!(
                r#"<CreateVM_Task xmlns="urn:vim25" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema"><_this type="Folder">{folder}</_this><config><name>{name}</name><guestId>otherGuest</guestId><files><vmPathName>[LocalDS_0]</vmPathName></files><numCPUs>1</numCPUs><memoryMB>32</memoryMB>{extra}</config><pool type="ResourcePool">{pool}</pool></CreateVM_Task>"#
            ),
        );
        assert!(made.contains("<returnval"), "CreateVM_Task: {made}");
        let path = format!("{folder_path}/{name}");
        eventually(
            "the VM to exist",
            Duration::from_secs(10),
            String::new,
            || self.find(jar.path(), &path).map(drop),
        );
    }

    /// The VM's `extraConfig` as key=value pairs.
    pub fn extra_config(&self, path: &str) -> BTreeMap<String, String> {
        let answer = self.property(path, "config.extraConfig");
        let doc = roxmltree::Document::parse(&answer).expect("an XML answer");
        doc.descendants()
            .filter(|n| n.tag_name().name() == "OptionValue")
            .filter_map(|o| {
                let text = |name: &str| {
                    o.children()
                        .find(|c| c.tag_name().name() == name)
                        .map(|c| c.text().unwrap_or_default().to_owned())
                };
                Some((text("key")?, text("value")?))
            })
            .collect()
    }

    /// `ReconfigVM_Task`: these `extraConfig` keys set on the VM at `path`.
    pub fn set_extra_config(&self, path: &str, extra: &[(&str, &str)]) {
        let jar = self.session();
        let vm = self.find(jar.path(), path).expect(path);
        let extra: String = extra
            .iter()
            .map(|(k, v)| format!(r#"<extraConfig><key>{k}</key><value xsi:type="xsd:string">{v}</value></extraConfig>"#))
            .collect();
        let answer = self.soap(
            jar.path(),
            &format!(
                r#"<ReconfigVM_Task xmlns="urn:vim25" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema"><_this type="VirtualMachine">{vm}</_this><spec>{extra}</spec></ReconfigVM_Task>"#
            ),
        );
        assert!(answer.contains("<returnval"), "ReconfigVM_Task: {answer}");
        let wanted: Vec<String> = extra
            .split("<key>")
            .skip(1)
            .map(|k| k.split('<').next().unwrap().to_owned())
            .collect();
        eventually(
            "the VM's new extraConfig",
            Duration::from_secs(10),
            String::new,
            || {
                let now = self.extra_config(path);
                wanted.iter().all(|k| now.contains_key(k)).then_some(())
            },
        );
    }

    /// The answer to `RetrievePropertiesEx` of one property of the VM at `path`.
    fn property(&self, path: &str, property: &str) -> String {
        let jar = self.session();
        let vm = self.find(jar.path(), path).expect(path);
        self.soap(
            jar.path(),
            &format!(
                r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>VirtualMachine</type><pathSet>{property}</pathSet></propSet><objectSet><obj type="VirtualMachine">{vm}</obj></objectSet></specSet><options></options></RetrievePropertiesEx>"#
            ),
        )
    }

    pub fn mark_as_template(&self, path: &str) {
        let jar = self.session();
        let vm = self.find(jar.path(), path).expect(path);
        let answer = self.soap(
            jar.path(),
            &format!(
                r#"<MarkAsTemplate xmlns="urn:vim25"><_this type="VirtualMachine">{vm}</_this></MarkAsTemplate>"#
            ),
        );
        assert!(answer.contains("MarkAsTemplateResponse"), "{answer}");
    }

    pub fn exists(&self, path: &str) -> bool {
        self.find(self.session().path(), path).is_some()
    }

    pub fn is_template(&self, path: &str) -> bool {
        let jar = self.session();
        let Some(vm) = self.find(jar.path(), path) else {
            return false;
        };
        let answer = self.soap(
            jar.path(),
            &format!(
                r#"<RetrievePropertiesEx xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this><specSet><propSet><type>VirtualMachine</type><pathSet>config.template</pathSet></propSet><objectSet><obj type="VirtualMachine">{vm}</obj></objectSet></specSet><options></options></RetrievePropertiesEx>"#
            ),
        );
        let doc = roxmltree::Document::parse(&answer).expect("an XML answer");
        doc.descendants()
            .find(|n| n.tag_name().name() == "val")
            .and_then(|v| v.text())
            == Some("true")
    }
}

impl Drop for VCenter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
