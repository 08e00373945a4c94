//! The AWS credentials of the standard chain, end to end against moto's STS and EC2 (PyPI,
//! in server mode), through `preview`: a web identity of the process's own (the variables
//! a pod with a projected token has, and the CredentialsRequest Secret's STS form mounted
//! as `AWS_SHARED_CREDENTIALS_FILE`) is exchanged at STS for the keys EC2 is then asked
//! with, as moto's record of the requests shows; and a profile that assumes a role with
//! another profile's keys signs requests that moto, checking every signature and IAM
//! permission, accepts, while a wrong key or the source's own keys are refused.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};

use base64::Engine;
use serde_json::{Value, json};
use support::binary;
use support::fixture;
use support::moto::{Moto, venv_bin};
use support::stream_ami;

const REGION: &str = "us-east-1";
const RED_HAT: &str = "ami-0redhat0000000001";
const ROLE: &str = "arn:aws:iam::123456789012:role/bootimage-webhook-ec2";
const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJib290aW1hZ2Utd2ViaG9vayJ9.c2ln";

/// What EC2 holds: one Red Hat AMI that is not in the stream.
fn amis() -> Value {
    json!([{
        "ami_id": RED_HAT, "state": "available", "public": true, "owner_id": "531415883065",
        "name": "rhcos-9.6.20250826-1-x86_64", "description": "OpenShift 4.20",
        "image_type": "machine", "architecture": "x86_64", "virtualization_type": "hvm",
        "root_device_type": "ebs", "root_device_name": "/dev/xvda", "hypervisor": "xen"
    }])
}

/// `preview` of one AWS MachineSet on the Red Hat AMI, EC2 and STS at `moto`, with none of
/// this machine's AWS setup and `env` added: its result and standard error.
fn preview(dir: &Path, moto: &Moto, env: &[(&str, &str)]) -> (Value, String) {
    let mut ms = fixture("machineset-aws-build01-ci-tests-worker-us-east-1a.yaml");
    ms["metadata"] = json!({"name": "redhat", "namespace": "openshift-machine-api"});
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = json!({"id": RED_HAT});
    let file = dir.join("machineset.json");
    std::fs::write(&file, ms.to_string()).unwrap();
    let mut cmd = Command::new(binary::BIN);
    cmd.args([
        "preview",
        "--control-plane-arch",
        "amd64",
        "--machineset-file",
    ])
    .arg(&file);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("AWS_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("HOME", dir)
        .env("AWS_ENDPOINT_URL", moto.url())
        .env("AWS_REGION", REGION)
        .envs(env.iter().copied());
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "preview failed: {err}");
    (serde_json::from_slice(&out.stdout).unwrap(), err)
}

fn moved(result: &Value) -> bool {
    result["reason"] == "Updated"
        && support::ami_of(&result["machineSet"]) == json!({"id": stream_ami(REGION)})
}

/// The requests moto recorded: (headers, form body).
fn recorded(file: &Path) -> Vec<(Value, String)> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|e| {
            let body = e["body"].as_str().unwrap_or_default();
            let body = match e["body_encoded"].as_bool() {
                Some(true) => {
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(body)
                        .unwrap();
                    String::from_utf8(raw).unwrap()
                }
                _ => body.to_owned(),
            };
            (e["headers"].clone(), body)
        })
        .collect()
}

fn header<'a>(headers: &'a Value, name: &str) -> Option<&'a str> {
    headers
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_str())
}

/// The one AssumeRoleWithWebIdentity request asked the role with the token, unsigned; every
/// DescribeImages request after it was signed with a session's keys and token, not the
/// environment's.
fn exchanged_at_sts(record: &[(Value, String)]) {
    let sts: Vec<_> = record
        .iter()
        .filter(|(_, b)| b.contains("Action=AssumeRoleWithWebIdentity"))
        .collect();
    assert_eq!(sts.len(), 1, "{record:?}");
    let (headers, body) = sts[0];
    let role = form_urlencoded::byte_serialize(ROLE.as_bytes()).collect::<String>();
    assert!(body.contains(&format!("RoleArn={role}")), "{body}");
    assert!(
        body.contains(&format!("WebIdentityToken={TOKEN}")),
        "{body}"
    );
    assert_eq!(header(headers, "authorization"), None, "{headers}");
    let ec2: Vec<_> = record
        .iter()
        .filter(|(_, b)| b.contains("Action=DescribeImages"))
        .collect();
    assert!(!ec2.is_empty(), "{record:?}");
    for (headers, _) in ec2 {
        let auth = header(headers, "authorization").unwrap_or_default();
        assert!(
            auth.contains("Credential=ASIA"),
            "not a session's key: {auth}"
        );
        assert!(
            auth.contains(&format!("/{REGION}/ec2/aws4_request")),
            "{auth}"
        );
        let token = header(headers, "x-amz-security-token").unwrap_or_default();
        assert!(!token.is_empty(), "{headers}");
    }
}

/// A pod's web identity: `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`; then the
/// CredentialsRequest Secret's STS form, mounted and named by `AWS_SHARED_CREDENTIALS_FILE`.
/// Each time STS gives the keys EC2 is asked with, and the MachineSet moves. Without the
/// token file, nothing moves and the error names it.
#[test]
fn a_web_identity_of_its_own_is_exchanged_at_sts_for_the_keys_ec2_is_asked_with() {
    let _parallel = support::parallel();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    let token_path = token.to_str().unwrap();
    let record = dir.path().join("record.jsonl");
    let moto = Moto::start_with(
        &amis(),
        &[
            ("MOTO_ENABLE_RECORDING", "true"),
            ("MOTO_RECORDER_FILEPATH", record.to_str().unwrap()),
        ],
    );
    let pod = [
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token_path),
        ("AWS_ROLE_ARN", ROLE),
    ];
    let (result, err) = preview(dir.path(), &moto, &pod);
    assert!(!moved(&result), "{result}");
    assert!(err.contains("reading the web identity token file"), "{err}");
    assert!(
        err.contains(token_path) && err.contains("No such file"),
        "{err}"
    );

    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let (result, err) = preview(dir.path(), &moto, &pod);
    assert!(moved(&result), "{result} {err}");
    exchanged_at_sts(&recorded(&record));

    std::fs::write(&record, "").unwrap();
    let secret = dir.path().join("credentials");
    std::fs::write(
        &secret,
        format!(
            "[default]\nsts_regional_endpoints = regional\nrole_arn = {ROLE}\nweb_identity_token_file = {token_path}\n"
        ),
    )
    .unwrap();
    let mounted = [("AWS_SHARED_CREDENTIALS_FILE", secret.to_str().unwrap())];
    let (result, err) = preview(dir.path(), &moto, &mounted);
    assert!(moved(&result), "{result} {err}");
    exchanged_at_sts(&recorded(&record));
}

/// moto's IAM, made by boto3 (from the same venv) in the calls before it checks any: a
/// user whose keys may only assume ROLE, and ROLE, which may describe images. The user's
/// keys.
fn iam_user_and_role(moto: &Moto) -> (String, String) {
    let script = format!(
        r#"
import boto3, json
kw = dict(endpoint_url="{url}", region_name="{REGION}", aws_access_key_id="x", aws_secret_access_key="x")
iam = boto3.client("iam", **kw)
iam.create_user(UserName="assumer")
key = iam.create_access_key(UserName="assumer")["AccessKey"]
allow = lambda action, resource: json.dumps({{"Version": "2012-10-17", "Statement": [{{"Effect": "Allow", "Action": action, "Resource": resource}}]}})
iam.put_user_policy(UserName="assumer", PolicyName="assume", PolicyDocument=allow("sts:AssumeRole", "{ROLE}"))
trust = {{"Version": "2012-10-17", "Statement": [{{"Effect": "Allow", "Principal": {{"AWS": "arn:aws:iam::123456789012:user/assumer"}}, "Action": "sts:AssumeRole"}}]}}
iam.create_role(RoleName="bootimage-webhook-ec2", AssumeRolePolicyDocument=json.dumps(trust))
iam.put_role_policy(RoleName="bootimage-webhook-ec2", PolicyName="ec2", PolicyDocument=allow("ec2:DescribeImages", "*"))
print(key["AccessKeyId"], key["SecretAccessKey"])
"#,
        url = moto.url()
    );
    let out = Command::new(venv_bin("python"))
        .args(["-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (id, secret) = text.trim().split_once(' ').unwrap();
    (id.to_owned(), secret.to_owned())
}

/// The IAM calls [`iam_user_and_role`] makes: moto checks every request after these.
const SETUP_CALLS: &str = "5";

/// `AWS_PROFILE` naming a profile of the config file that assumes ROLE with the keys of a
/// profile of the credentials file: moto checks the signature of the AssumeRole request
/// (the user's keys) and of each DescribeImages (the role session's keys and token) and
/// the permissions of each, and the MachineSet moves. With a wrong secret key, STS refuses
/// the signature; with the user's own keys, EC2 refuses the call: nothing moves.
#[test]
fn a_role_assumed_from_a_profile_signs_what_moto_checks() {
    let _parallel = support::parallel();
    let dir = tempfile::tempdir().unwrap();
    let moto = Moto::start_with(&amis(), &[("INITIAL_NO_AUTH_ACTION_COUNT", SETUP_CALLS)]);
    let (id, secret) = iam_user_and_role(&moto);
    let config = dir.path().join("config");
    std::fs::write(
        &config,
        format!(
            "[default]\nregion = {REGION}\n\n[profile ec2]\nrole_arn = {ROLE}\nsource_profile = assumer\n\n\
             [profile assumer]\nregion = {REGION}\n"
        ),
    )
    .unwrap();
    let credentials = dir.path().join("credentials");
    let files = |profile: &'static str, secret: &str| {
        std::fs::write(
            &credentials,
            format!("[assumer]\naws_access_key_id = {id}\naws_secret_access_key = {secret}\n"),
        )
        .unwrap();
        [
            ("AWS_CONFIG_FILE", config.to_str().unwrap().to_owned()),
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                credentials.to_str().unwrap().to_owned(),
            ),
            ("AWS_PROFILE", profile.to_owned()),
        ]
    };
    let run = |env: [(&str, String); 3]| {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        preview(dir.path(), &moto, &env)
    };

    let (result, err) = run(files("ec2", &secret));
    assert!(moved(&result), "{result} {err}");

    let (result, err) = run(files("ec2", "not-the-secret"));
    assert!(!moved(&result), "{result}");
    assert!(err.contains("SignatureDoesNotMatch"), "{err}");

    let (result, err) = run(files("assumer", &secret));
    assert!(!moved(&result), "{result}");
    assert!(err.contains("AccessDenied"), "{err}");
}
