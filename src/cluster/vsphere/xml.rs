//! The XML of the vim25 SOAP API that needs no session: managed object references, the
//! helpers that read answers and escape requests, and `CreateImportSpec`'s arguments and the
//! import spec passed back to `ImportVApp` with our marker in it.

use roxmltree::Node;

pub const VIM25: &str = "urn:vim25";

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

    /// The reference as the element `name`.
    pub fn xml(&self, name: &str) -> String {
        format!(
            r#"<{name} type="{}">{}</{name}>"#,
            escape(&self.kind),
            escape(&self.value)
        )
    }
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
    ovf: &str,
    target: &ImportTarget<'_>,
    networks: &[(String, Moref)],
) -> String {
    let mapping: String = networks
        .iter()
        .map(|(ovf_name, net)| {
            format!(
                "<networkMapping><name>{}</name>{}</networkMapping>",
                escape(ovf_name),
                net.xml("network")
            )
        })
        .collect();
    let provisioning = match target.disk_provisioning {
        "" => String::new(),
        p => format!("<diskProvisioning>{}</diskProvisioning>", escape(p)),
    };
    format!(
        "<ovfDescriptor>{}</ovfDescriptor>{}{}<cisp><locale></locale><deploymentOption></deploymentOption><entityName>{}</entityName>{mapping}{provisioning}</cisp>",
        escape(ovf),
        target.pool.xml("resourcePool"),
        target.datastore.xml("datastore"),
        escape(target.name),
    )
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

/// The import spec's content as vCenter wrote it, with `extra` added to its `configSpec`
/// in schema order; `None` when it has no `configSpec`.
pub fn with_extra_config(
    text: &str,
    spec: Node<'_, '_>,
    extra: &[(String, String)],
) -> Option<String> {
    let config = child(spec, "configSpec")?;
    let at = config
        .children()
        .rev()
        .find(|n| n.is_element() && BEFORE_EXTRA_CONFIG.contains(&n.tag_name().name()))
        .map(|n| n.range().end)
        .or_else(|| config.first_child().map(|n| n.range().start))?;
    let added: String = extra
        .iter()
        .map(|(k, v)| {
            format!(
                r#"<extraConfig><key>{}</key><value xsi:type="xsd:string">{}</value></extraConfig>"#,
                escape(k),
                escape(v)
            )
        })
        .collect();
    let inner = inner_xml(text, spec)?;
    let start = spec.first_child()?.range().start;
    let (before, after) = inner.split_at(at.checked_sub(start)?);
    Some(format!("{before}{added}{after}"))
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
pub fn declarations(node: Node<'_, '_>) -> String {
    node.namespaces()
        .filter_map(|ns| Some((ns.name()?, ns.uri())))
        .filter(|(prefix, _)| *prefix != "xml")
        .map(|(prefix, uri)| format!(r#" xmlns:{prefix}="{}""#, escape(uri)))
        .collect()
}

/// The XML between an element's start and end tags, as written.
pub fn inner_xml<'t>(text: &'t str, node: Node<'_, 't>) -> Option<&'t str> {
    let first = node.first_child()?.range().start;
    let last = node.last_child()?.range().end;
    text.get(first..last)
}

/// XML character data and attribute values. Written here rather than with an XML writer
/// crate: the requests are a few fixed elements, and these five characters are all that
/// needs escaping in them.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use roxmltree::Document;

    #[test]
    fn the_import_spec_is_passed_back_as_written() {
        let text = r#"<?xml version="1.0"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><CreateImportSpecResponse xmlns="urn:vim25"><returnval><importSpec xsi:type="VirtualMachineImportSpec"><configSpec><name>t &amp; u</name></configSpec></importSpec></returnval></CreateImportSpecResponse></soapenv:Body></soapenv:Envelope>"#;
        let doc = Document::parse(text).unwrap();
        let spec = doc
            .descendants()
            .find(|n| n.has_tag_name((VIM25, "importSpec")))
            .unwrap();
        assert_eq!(
            inner_xml(text, spec),
            Some("<configSpec><name>t &amp; u</name></configSpec>")
        );
        // Prefixes its content uses may be declared above it: they go along.
        assert!(
            declarations(spec)
                .contains(r#" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance""#)
        );
        assert_eq!(escape(r#"<a & "b">"#), "&lt;a &amp; &quot;b&quot;&gt;");
    }

    #[test]
    fn the_marker_goes_into_the_config_spec_in_schema_order() {
        let text = r#"<r xmlns="urn:vim25" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><importSpec xsi:type="VirtualMachineImportSpec"><configSpec><name>t</name><deviceChange><x/></deviceChange><vAppConfig><y/></vAppConfig></configSpec><resPoolEntity type="ResourcePool">r</resPoolEntity></importSpec></r>"#;
        let doc = Document::parse(text).unwrap();
        let spec = doc
            .descendants()
            .find(|n| n.has_tag_name((VIM25, "importSpec")))
            .unwrap();
        let pairs = [("a.b".to_owned(), "c&d".to_owned())];
        assert_eq!(
            with_extra_config(text, spec, &pairs).unwrap(),
            r#"<configSpec><name>t</name><deviceChange><x/></deviceChange><extraConfig><key>a.b</key><value xsi:type="xsd:string">c&amp;d</value></extraConfig><vAppConfig><y/></vAppConfig></configSpec><resPoolEntity type="ResourcePool">r</resPoolEntity>"#
        );
        let bare = r#"<r xmlns="urn:vim25"><importSpec><resPoolEntity/></importSpec></r>"#;
        let doc = Document::parse(bare).unwrap();
        let spec = doc
            .descendants()
            .find(|n| n.has_tag_name((VIM25, "importSpec")))
            .unwrap();
        assert_eq!(with_extra_config(bare, spec, &pairs), None);
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
        let args = import_spec_args(
            "<Envelope/>",
            &target,
            &[("VM Network".into(), Moref::new("Network", "network-7"))],
        );
        assert_eq!(
            args,
            r#"<ovfDescriptor>&lt;Envelope/&gt;</ovfDescriptor><resourcePool type="ResourcePool">resgroup-9</resourcePool><datastore type="Datastore">datastore-1</datastore><cisp><locale></locale><deploymentOption></deploymentOption><entityName>t</entityName><networkMapping><name>VM Network</name><network type="Network">network-7</network></networkMapping><diskProvisioning>thin</diskProvisioning></cisp>"#
        );
    }
}
