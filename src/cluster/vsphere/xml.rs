//! The XML of the vim25 SOAP API that needs no session: managed object references, the
//! helpers that read answers and write requests (with `quick-xml`'s writer, which escapes),
//! and `CreateImportSpec`'s arguments and the import spec passed back to `ImportVApp` with
//! our marker in it.

use std::io::{self, Write};

use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesText, Event};
use roxmltree::Node;

pub const VIM25: &str = "urn:vim25";
const SOAP_ENV: &str = "http://schemas.xmlsoap.org/soap/envelope/";
const XSD: &str = "http://www.w3.org/2001/XMLSchema";
const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";

/// A request being written.
pub type Xml = Writer<Vec<u8>>;

/// A managed object reference: `<x type="VirtualMachine">vm-42</x>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moref {
    pub kind: String,
    pub value: String,
}

impl Moref {
    pub fn new(kind: &str, value: &str) -> Moref {
        Moref {
            kind: kind.into(),
            value: value.into(),
        }
    }

    pub fn of(node: Node<'_, '_>) -> Option<Moref> {
        Some(Moref::new(node.attribute("type")?, node.text()?.trim()))
    }

    /// Writes the reference as the element `name`.
    pub fn write(&self, w: &mut Xml, name: &str) -> io::Result<()> {
        w.create_element(name)
            .with_attribute(("type", self.kind.as_str()))
            .write_text_content(BytesText::new(&self.value))?;
        Ok(())
    }
}

/// `<name>value</name>`.
pub fn element(w: &mut Xml, name: &str, value: &str) -> io::Result<()> {
    w.create_element(name)
        .write_text_content(BytesText::new(value))?;
    Ok(())
}

/// The arguments of a call that takes none but `_this`.
pub fn no_args(_: &mut Xml) -> io::Result<()> {
    Ok(())
}

/// The SOAP envelope of a call of `method` on `this`, `args` written after `_this`.
pub fn envelope(
    method: &str,
    this: &Moref,
    args: impl FnOnce(&mut Xml) -> io::Result<()>,
) -> io::Result<Vec<u8>> {
    let mut w = Writer::new(Vec::new());
    w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)))?;
    w.create_element("soapenv:Envelope")
        .with_attributes([
            ("xmlns:soapenv", SOAP_ENV),
            ("xmlns:xsd", XSD),
            ("xmlns:xsi", XSI),
        ])
        .write_inner_content(|w| {
            w.create_element("soapenv:Body").write_inner_content(|w| {
                w.create_element(method)
                    .with_attribute(("xmlns", VIM25))
                    .write_inner_content(|w| {
                        this.write(w, "_this")?;
                        args(w)
                    })?;
                Ok(())
            })?;
            Ok(())
        })?;
    Ok(w.into_inner())
}

/// Where and how an OVA is imported.
pub struct ImportTarget<'a> {
    pub name: &'a str,
    pub pool: &'a Moref,
    pub datastore: &'a Moref,
    /// `thin`, `thick` or `eagerZeroedThick`; empty: the datastore's default.
    pub disk_provisioning: &'a str,
}

/// `CreateImportSpec`'s arguments, in the order of the vim25 schema (vCenter checks it):
/// the descriptor, pool, datastore, then `OvfCreateImportSpecParams` (its
/// `OvfManagerCommonParams` first).
pub fn import_spec_args(
    w: &mut Xml,
    ovf: &str,
    target: &ImportTarget<'_>,
    networks: &[(String, Moref)],
) -> io::Result<()> {
    element(w, "ovfDescriptor", ovf)?;
    target.pool.write(w, "resourcePool")?;
    target.datastore.write(w, "datastore")?;
    w.create_element("cisp").write_inner_content(|w| {
        element(w, "locale", "")?;
        element(w, "deploymentOption", "")?;
        element(w, "entityName", target.name)?;
        for (ovf_name, network) in networks {
            w.create_element("networkMapping")
                .write_inner_content(|w| {
                    element(w, "name", ovf_name)?;
                    network.write(w, "network")
                })?;
        }
        match target.disk_provisioning {
            "" => Ok(()),
            p => element(w, "diskProvisioning", p),
        }
    })?;
    Ok(())
}

/// The fields of `VirtualMachineConfigSpec` that come before `extraConfig` in the vim25
/// schema: the new entries go after the last of these (or of `extraConfig`) the spec has.
const BEFORE_EXTRA_CONFIG: &[&str] = &[
    "changeVersion",
    "name",
    "version",
    "createDate",
    "uuid",
    "instanceUuid",
    "npivNodeWorldWideName",
    "npivPortWorldWideName",
    "npivWorldWideNameType",
    "npivDesiredNodeWwns",
    "npivDesiredPortWwns",
    "npivTemporaryDisabled",
    "npivOnNonRdmDisks",
    "npivWorldWideNameOp",
    "locationId",
    "guestId",
    "alternateGuestName",
    "annotation",
    "files",
    "tools",
    "flags",
    "consolePreferences",
    "powerOpInfo",
    "rebootPowerOff",
    "numCPUs",
    "vcpuConfig",
    "numCoresPerSocket",
    "memoryMB",
    "memoryHotAddEnabled",
    "cpuHotAddEnabled",
    "cpuHotRemoveEnabled",
    "virtualICH7MPresent",
    "virtualSMCPresent",
    "deviceChange",
    "cpuAllocation",
    "memoryAllocation",
    "latencySensitivity",
    "cpuAffinity",
    "memoryAffinity",
    "networkShaper",
    "cpuFeatureMask",
    "extraConfig",
];

/// An `importSpec` as vCenter wrote it, to pass back to `ImportVApp` with entries added to
/// its `configSpec`'s `extraConfig`: no field of it is lost in a type of ours.
#[derive(Debug)]
pub struct WrittenSpec {
    /// `xsi:type` of `importSpec`.
    kind: String,
    /// The prefixed namespaces in scope at `importSpec`, as `xmlns:` attributes: its content
    /// may use prefixes declared outside it (vcsim's `_XMLSchema-instance:type`).
    namespaces: Vec<(String, String)>,
    /// Its content up to where the new entries go, in schema order, and the rest.
    before: String,
    after: String,
    extra: Vec<(String, String)>,
}

impl WrittenSpec {
    /// The spec at `spec` of the answer `text`, to get `extra`; `None` when it has no
    /// `configSpec`.
    pub fn read(text: &str, spec: Node<'_, '_>, extra: &[(String, String)]) -> Option<Self> {
        let config = child(spec, "configSpec")?;
        let at = config
            .children()
            .rev()
            .find(|n| n.is_element() && BEFORE_EXTRA_CONFIG.contains(&n.tag_name().name()))
            .map(|n| n.range().end)
            .or_else(|| config.first_child().map(|n| n.range().start))?;
        let start = spec.first_child()?.range().start;
        let end = spec.last_child()?.range().end;
        Some(WrittenSpec {
            kind: spec
                .attribute((XSI, "type"))
                .unwrap_or("VirtualMachineImportSpec")
                .to_owned(),
            namespaces: declarations(spec),
            before: text.get(start..at)?.to_owned(),
            after: text.get(at..end)?.to_owned(),
            extra: extra.to_vec(),
        })
    }

    /// Writes the spec as the element `name`: its content as it came, and the new entries.
    pub fn write(&self, w: &mut Xml, name: &str) -> io::Result<()> {
        let namespaces = self.namespaces.iter();
        w.create_element(name)
            .with_attributes(namespaces.map(|(k, v)| (k.as_str(), v.as_str())))
            .with_attribute(("xsi:type", self.kind.as_str()))
            .write_inner_content(|w| {
                w.get_mut().write_all(self.before.as_bytes())?;
                for (key, value) in &self.extra {
                    w.create_element("extraConfig").write_inner_content(|w| {
                        element(w, "key", key)?;
                        w.create_element("value")
                            .with_attribute(("xsi:type", "xsd:string"))
                            .write_text_content(BytesText::new(value))?;
                        Ok(())
                    })?;
                }
                w.get_mut().write_all(self.after.as_bytes())
            })?;
        Ok(())
    }
}

pub fn child<'a, 't>(node: Node<'a, 't>, name: &str) -> Option<Node<'a, 't>> {
    node.children().find(|n| n.has_tag_name((VIM25, name)))
}

pub fn deep_text<'a>(node: Node<'a, '_>, name: &str) -> Option<&'a str> {
    node.descendants()
        .find(|n| n.tag_name().name() == name)
        .and_then(|n| n.text())
}

/// The prefixed namespaces in scope at `node`, as `xmlns:` attributes.
fn declarations(node: Node<'_, '_>) -> Vec<(String, String)> {
    node.namespaces()
        .filter_map(|ns| Some((ns.name()?, ns.uri())))
        .filter(|(prefix, _)| *prefix != "xml")
        .map(|(prefix, uri)| (format!("xmlns:{prefix}"), uri.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use roxmltree::Document;

    /// Names and passwords as a user may write them: markup, entities, both quotes,
    /// non-ASCII, and the white space XML would otherwise normalize.
    const HOSTILE: &[&str] = &[
        r#"<a & "b">"#,
        "it's ]]> &amp; &#60;",
        "Prüfung ☃ 名前 🚀",
        "tab\there\r\nline\rend ",
        "",
    ];

    fn written(args: impl FnOnce(&mut Xml) -> io::Result<()>) -> String {
        let this = Moref::new("SessionManager", "SessionManager");
        String::from_utf8(envelope("Login", &this, args).unwrap()).unwrap()
    }

    #[test]
    fn the_envelope_is_what_vcenter_and_vcsim_read() {
        let body = written(|w| {
            element(w, "userName", "u")?;
            element(w, "password", "p")
        });
        assert_eq!(
            body,
            r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><Login xmlns="urn:vim25"><_this type="SessionManager">SessionManager</_this><userName>u</userName><password>p</password></Login></soapenv:Body></soapenv:Envelope>"#
        );
    }

    #[test]
    fn hostile_strings_come_back_as_they_were_written() {
        for s in HOSTILE {
            let obj = Moref::new(s, s);
            let body = written(|w| {
                element(w, "userName", s)?;
                obj.write(w, "obj")
            });
            let doc = Document::parse(&body).unwrap();
            let login = doc
                .descendants()
                .find(|n| n.has_tag_name((VIM25, "Login")))
                .unwrap();
            let user = child(login, "userName").unwrap();
            assert_eq!(user.text().unwrap_or_default(), *s, "{body}");
            let got = child(login, "obj").unwrap();
            assert_eq!(got.attribute("type"), Some(*s), "{body}");
            assert_eq!(got.text().unwrap_or_default(), *s, "{body}");
        }
        let body = written(|w| element(w, "password", r#"<a & "b">"#));
        assert!(body.contains("<password>&lt;a &amp; &quot;b&quot;&gt;</password>"));
    }

    fn import_spec<'a, 't>(doc: &'a Document<'t>) -> Node<'a, 't> {
        doc.descendants()
            .find(|n| n.has_tag_name((VIM25, "importSpec")))
            .unwrap()
    }

    fn spec_written(spec: &WrittenSpec) -> String {
        let mut w = Writer::new(Vec::new());
        spec.write(&mut w, "spec").unwrap();
        String::from_utf8(w.into_inner()).unwrap()
    }

    #[test]
    fn the_import_spec_is_passed_back_as_written() {
        let text = r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><CreateImportSpecResponse xmlns="urn:vim25"><returnval><importSpec xsi:type="VirtualMachineImportSpec"><configSpec><name>t &amp; u</name></configSpec></importSpec></returnval></CreateImportSpecResponse></soapenv:Body></soapenv:Envelope>"#;
        let doc = Document::parse(text).unwrap();
        let spec = WrittenSpec::read(text, import_spec(&doc), &[]).unwrap();
        // Prefixes its content uses may be declared above it: they go along.
        assert_eq!(
            spec_written(&spec),
            r#"<spec xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="VirtualMachineImportSpec"><configSpec><name>t &amp; u</name></configSpec></spec>"#
        );
    }

    #[test]
    fn the_marker_goes_into_the_config_spec_in_schema_order() {
        let text = r#"<r xmlns="urn:vim25" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><importSpec xsi:type="VirtualMachineImportSpec"><configSpec><name>t</name><deviceChange><x/></deviceChange><vAppConfig><y/></vAppConfig></configSpec><resPoolEntity type="ResourcePool">r</resPoolEntity></importSpec></r>"#;
        let pairs = [("a.b".to_owned(), "c&d".to_owned())];
        let doc = Document::parse(text).unwrap();
        let spec = WrittenSpec::read(text, import_spec(&doc), &pairs).unwrap();
        assert_eq!(
            spec_written(&spec),
            r#"<spec xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="VirtualMachineImportSpec"><configSpec><name>t</name><deviceChange><x/></deviceChange><extraConfig><key>a.b</key><value xsi:type="xsd:string">c&amp;d</value></extraConfig><vAppConfig><y/></vAppConfig></configSpec><resPoolEntity type="ResourcePool">r</resPoolEntity></spec>"#
        );
        let bare = r#"<r xmlns="urn:vim25"><importSpec><resPoolEntity/></importSpec></r>"#;
        let doc = Document::parse(bare).unwrap();
        assert!(WrittenSpec::read(bare, import_spec(&doc), &pairs).is_none());
    }

    #[test]
    fn marker_values_come_back_as_they_were_written() {
        let text = r#"<r xmlns="urn:vim25"><importSpec><configSpec><name>t</name></configSpec></importSpec></r>"#;
        let pairs: Vec<_> = HOSTILE
            .iter()
            .map(|s| (format!("k{s}"), s.to_string()))
            .collect();
        let doc = Document::parse(text).unwrap();
        let spec = WrittenSpec::read(text, import_spec(&doc), &pairs).unwrap();
        let this = Moref::new("ResourcePool", "resgroup-9");
        let body = envelope("ImportVApp", &this, |w| spec.write(w, "spec")).unwrap();
        let body = String::from_utf8(body).unwrap();
        let doc = Document::parse(&body).unwrap();
        let got: Vec<_> = doc
            .descendants()
            .filter(|n| n.has_tag_name((VIM25, "extraConfig")))
            .map(|o| {
                let value = child(o, "value").unwrap();
                assert_eq!(value.attribute((XSI, "type")), Some("xsd:string"));
                (
                    child(o, "key").unwrap().text().unwrap().to_owned(),
                    value.text().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert_eq!(got, pairs);
    }

    #[test]
    fn import_spec_arguments_are_in_schema_order() {
        let (pool, datastore) = (
            Moref::new("ResourcePool", "resgroup-9"),
            Moref::new("Datastore", "datastore-1"),
        );
        let target = ImportTarget {
            name: "t",
            pool: &pool,
            datastore: &datastore,
            disk_provisioning: "thin",
        };
        let networks = [("VM Network".into(), Moref::new("Network", "network-7"))];
        let mut w = Writer::new(Vec::new());
        import_spec_args(&mut w, "<Envelope/>", &target, &networks).unwrap();
        assert_eq!(
            String::from_utf8(w.into_inner()).unwrap(),
            r#"<ovfDescriptor>&lt;Envelope/&gt;</ovfDescriptor><resourcePool type="ResourcePool">resgroup-9</resourcePool><datastore type="Datastore">datastore-1</datastore><cisp><locale></locale><deploymentOption></deploymentOption><entityName>t</entityName><networkMapping><name>VM Network</name><network type="Network">network-7</network></networkMapping><diskProvisioning>thin</diskProvisioning></cisp>"#
        );
    }
}
