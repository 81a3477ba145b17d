use super::*;
use crate::jsjson;

/// What the parse path writes: `body` parsed, the members set as a parsed object gets them
/// (an existing key keeps its position, a new one goes last), serialised.
fn reference(body: &[u8], sets: &[(&str, Vec<u8>)]) -> Option<Vec<u8>> {
    let mut v = jsjson::parse(body).ok()?;
    let obj = v.as_object_mut()?;
    for (k, value) in sets {
        obj.insert((*k).to_owned(), serde_json::from_slice(value).unwrap());
    }
    Some(jsjson::to_string_compact(&v).into_bytes())
}

/// The spliced line, made both ways when the splice can be made in place.
fn spliced(body: &[u8], sets: &[(&str, Vec<u8>)]) -> Option<Vec<u8>> {
    let s = set_members(body, sets)?;
    let mut out = Vec::new();
    s.write_to(body, &mut out);
    assert_eq!(out.len(), s.len());
    let mut in_place = body.to_vec();
    if s.apply_in_place(&mut in_place) {
        assert_eq!(in_place, out);
    } else {
        assert_ne!(out.len(), body.len());
        assert_eq!(in_place, body, "left as it was");
    }
    Some(out)
}

fn sets_of_every_kind() -> Vec<Vec<(&'static str, Vec<u8>)>> {
    vec![
        vec![("parentId", b"\"p2\"".to_vec())],
        vec![("parentId", b"\"q\"".to_vec())],
        vec![("parentId", b"null".to_vec())],
        vec![("parentId", b"\"a \\\" \\\\ \\n id\"".to_vec())],
        vec![
            ("parentId", b"\"x\"".to_vec()),
            ("firstKeptEntryId", b"\"k\"".to_vec()),
        ],
        vec![("firstKeptEntryId", b"\"k\"".to_vec())],
    ]
}

/// Lines as `JSON.stringify` writes them: every one is spliced, to exactly its bytes.
#[test]
fn stringify_form_lines_are_spliced_to_the_parse_paths_bytes() {
    let big = "QUJD".repeat(5000);
    let deep = format!("{}1{}", "[".repeat(99), "]".repeat(99));
    let lines = [
        r#"{"type":"message","id":"a","parentId":"p","message":{"role":"user","content":"hi"}}"#.to_string(),
        r#"{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":"text","text":"x"}]}}"#.to_string(),
        r#"{"type":"message","id":"a","message":{"role":"user","content":"no parent"}}"#.to_string(),
        r#"{"parentId":"p","id":"a","type":"message"}"#.to_string(),
        r#"{"type":"compaction","id":"c","parentId":"b","summary":"s","firstKeptEntryId":"b","tokensBefore":1}"#.to_string(),
        format!(r#"{{"type":"message","id":"a","parentId":"p","message":{{"content":[{{"type":"image","data":"{big}"}}]}}}}"#),
        r#"{"id":"a","parentId":"p","n":[0,-1,1.5,-2.5e-7,1e+21,123456789012345680000,0.000001,true,false,null,{},[],[{}],""]}"#.to_string(),
        "{\"id\":\"a\",\"parentId\":\"p\",\"s\":\"\\\" \\\\ \\b \\f \\n \\r \\t \\u0000 \\u001f caf\u{e9} \u{2028} / \u{1f600}\"}".to_string(),
        r#"{"id":"a","parentId":"p","o":{"parentId":"inner","a":{"b":{"c":[1,[2,[3]]]}}},"k1":1,"x0":2}"#.to_string(),
        format!(r#"{{"id":"a","parentId":"p","deep":{deep}}}"#),
    ];
    for line in &lines {
        assert!(members(line.as_bytes()).is_some(), "{line:.120}");
        for sets in sets_of_every_kind() {
            let want = reference(line.as_bytes(), &sets).unwrap();
            let got = spliced(line.as_bytes(), &sets).unwrap_or_else(|| panic!("{line:.120}"));
            assert_eq!(
                String::from_utf8(got).unwrap(),
                String::from_utf8(want).unwrap(),
                "{line:.120} {sets:?}"
            );
        }
    }
}

/// Anything `JSON.stringify` would write otherwise (or that does not parse) is not spliced:
/// the caller parses it. For each, the parse path's bytes differ from the line's, so a splice
/// would have written something else.
#[test]
fn other_forms_are_left_to_the_parser() {
    let too_deep = format!(
        r#"{{"id":"a","deep":{}1{}}}"#,
        "[".repeat(101),
        "]".repeat(101)
    );
    let lines: Vec<Vec<u8>> = [
        r#"{"id":"a", "parentId":"p"}"#,
        r#"{ "id":"a","parentId":"p"}"#,
        r#"{"id":"a","parentId":"p"} "#,
        r#"{"id":"a","parentId":"p","n":[1, 2]}"#,
        r#"{"id":"a","parentId":"p","s":"a\/b"}"#,
        r#"{"id":"a","parentId":"p","s":"caf\u00e9"}"#,
        r#"{"id":"a","parentId":"p","s":"\u001F"}"#,
        r#"{"id":"a","parentId":"p","s":"\u000a"}"#,
        r#"{"id":"a","parentId":"p","n":1.0}"#,
        r#"{"id":"a","parentId":"p","n":1e2}"#,
        r#"{"id":"a","parentId":"p","n":-0}"#,
        r#"{"id":"a","parentId":"p","n":1E+21}"#,
        r#"{"id":"a","parentId":"p","n":12345678901234567890}"#,
        r#"{"id":"a","parentId":"p","n":1e400}"#,
        r#"{"id":"a","parentId":"p","id":"b"}"#,
        r#"{"id":"a","parentId":"p","parentId":"q"}"#,
        r#"{"id":"a","parentId":"p","o":{"x":1,"x":2}}"#,
        r#"{"id":"a","parentId":"p","o":{"b":1,"2":2}}"#,
        r#"{"id":"a","1":"x"}"#,
        r#"["id","parentId"]"#,
        r#""x""#,
        r#"{"id":"a","parentId":"p","t":tru}"#,
        r#"{"id":"a","parentId":"p""#,
        r#"{"id":"a","parentId":"p"}}"#,
        r#"{"id":"a","parentId":"p",}"#,
        r#"{"id":"a","parentId":"p","n":01}"#,
        r#"{"id":"a","parentId":"p","s":"\x"}"#,
        "\u{feff}{\"id\":\"a\",\"parentId\":\"p\"}",
        too_deep.as_str(),
    ]
    .iter()
    .map(|l| l.as_bytes().to_vec())
    .chain([
        b"{\"id\":\"a\",\"parentId\":\"p\",\"s\":\"\xff\"}".to_vec(),
        b"{\"id\":\"a\",\"parentId\":\"p\",\"s\":\"a\tb\"}".to_vec(),
    ])
    .collect();
    let sets = [("parentId", b"\"p\"".to_vec())];
    for line in &lines {
        let shown = String::from_utf8_lossy(line);
        assert!(members(line).is_none(), "{shown:.120}");
        assert!(spliced(line, &sets).is_none(), "{shown:.120}");
        if let Some(want) = reference(line, &sets) {
            assert_ne!(&want, line, "{shown:.120}: already in stringify's form");
        }
    }
}

/// The members are found whole, with keys and values of every kind, in order.
#[test]
fn members_are_the_top_level_ones_in_order() {
    let line = br#"{"a":{"parentId":"x"},"parentId":"p","b":[1,{"c":"}"}],"d":"\"]"}"#;
    let m = members(line).unwrap();
    let shown: Vec<(&str, &str)> = m
        .iter()
        .map(|m| {
            (
                std::str::from_utf8(&line[m.key.clone()]).unwrap(),
                std::str::from_utf8(&line[m.value.clone()]).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("a", r#"{"parentId":"x"}"#),
            ("parentId", r#""p""#),
            ("b", r#"[1,{"c":"}"}]"#),
            ("d", r#""\"]""#)
        ]
    );
}

/// Blocks of `message.content` replaced (with ids set or not) are spliced to what parsing,
/// replacing and serialising writes; a line the parse path would refuse or write otherwise is
/// not spliced.
#[test]
fn content_blocks_are_replaced_as_the_parse_path_replaces_them() {
    let placeholder = serde_json::json!({"type":"text","text":"[image removed: 12 KB]"});
    let new = jsjson::to_string_compact(&placeholder).into_bytes();
    let reference_blocks = |body: &[u8], sets: &[(&str, Vec<u8>)], pos: &[u32]| {
        let mut v = jsjson::parse(body).ok()?;
        let obj = v.as_object_mut()?;
        for (k, value) in sets {
            obj.insert((*k).to_owned(), serde_json::from_slice(value).unwrap());
        }
        let content = obj.get_mut("message")?.get_mut("content")?.as_array_mut()?;
        for p in pos {
            *content.get_mut(*p as usize)? = placeholder.clone();
        }
        Some(jsjson::to_string_compact(&v).into_bytes())
    };
    let big = "QUJD".repeat(3000);
    let lines = [
        format!(r#"{{"type":"message","id":"a","parentId":"p","message":{{"role":"user","content":[{{"type":"text","text":"see"}},{{"type":"image","data":"{big}","mimeType":"image/png"}},"s",7,{{"type":"image","data":""}}],"timestamp":1}}}}"#),
        r#"{"type":"message","id":"a","message":{"content":[{"type":"image","data":"QQ=="}],"role":"toolResult","toolCallId":"c"},"parentId":null}"#.to_string(),
        r#"{"message":{"role":"user","content":[[],{},{"type":"image","content":[{"type":"image"}]},"\"]\\",null]},"id":"a"}"#.to_string(),
    ];
    let (mut spliced_count, mut refused) = (0, 0);
    for line in &lines {
        let body = line.as_bytes();
        for pos in [
            vec![0],
            vec![1],
            vec![0, 2],
            vec![2, 0],
            vec![4],
            vec![1, 1],
            vec![9],
        ] {
            for sets in [vec![], vec![("parentId", b"\"q\"".to_vec())]] {
                let blocks: Vec<(u32, Vec<u8>)> = pos.iter().map(|p| (*p, new.clone())).collect();
                let got = edit(body, &sets, &blocks).map(|s| {
                    let mut out = Vec::new();
                    s.write_to(body, &mut out);
                    assert_eq!(out.len(), s.len());
                    out
                });
                let want = reference_blocks(body, &sets, &pos);
                let repeated = pos.len() == 2 && pos[0] == pos[1];
                match (got, want) {
                    (Some(got), Some(want)) => {
                        assert!(!repeated);
                        assert_eq!(
                            String::from_utf8(got).unwrap(),
                            String::from_utf8(want).unwrap(),
                            "{line:.80} {pos:?} {sets:?}"
                        );
                        spliced_count += 1;
                    }
                    (None, want) => {
                        assert!(repeated || want.is_none(), "{line:.80} {pos:?}");
                        refused += 1;
                    }
                    (Some(_), None) => {
                        panic!("spliced what the parse path refuses: {line:.80} {pos:?}")
                    }
                }
            }
        }
    }
    assert!(
        spliced_count >= 20 && refused >= 6,
        "{spliced_count} {refused}"
    );
    // Not an object message, not an array content, not in stringify's form: left to the parser.
    for line in [
        r#"{"id":"a","message":"m"}"#,
        r#"{"id":"a","message":{"content":"text"}}"#,
        r#"{"id":"a","message":{"content":{"type":"image"}}}"#,
        r#"{"id":"a","message":{"content":[{"type":"image", "data":"QQ=="}]}}"#,
        r#"{"id":"a","message":{"content":[{"type":"image","n":1.0}]}}"#,
    ] {
        assert!(
            edit(line.as_bytes(), &[], &[(0, new.clone())]).is_none(),
            "{line}"
        );
    }
}
