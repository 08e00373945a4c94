//! The patch as written, and the pointer escaping.

use super::*;

#[test]
fn the_patch_is_written_as_json_patch_writes_it() {
    let patch = Patch(vec![
        set("/a~1b/0".into(), true, Value::String("x\"y".into())),
        set(
            "/m".into(),
            false,
            serde_json::json!({"k/~": "v", "n": [1, null]}),
        ),
    ]);
    let ours = serde_json::to_vec(&patch).unwrap();
    assert_eq!(
        String::from_utf8(ours).unwrap(),
        r#"[{"op":"replace","path":"/a~1b/0","value":"x\"y"},{"op":"add","path":"/m","value":{"k/~":"v","n":[1,null]}}]"#
    );
    let applied = patch.to_json_patch().unwrap();
    assert_eq!(
        serde_json::to_vec(&applied).unwrap(),
        serde_json::to_vec(&patch).unwrap()
    );
}

#[test]
fn pointer_tokens_are_escaped() {
    let mut s = String::new();
    escape_token(&mut s, "a/b~c");
    assert_eq!(s, "a~1b~0c");
}
