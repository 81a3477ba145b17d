use super::*;
use crate::transcript::{rewrite, validate};

fn marker(id: &str, parent: &str, ts: &str, provider: &str, model: &str) -> String {
    let parent = if parent.is_empty() {
        "null".to_owned()
    } else {
        format!("\"{parent}\"")
    };
    format!(
        r#"{{"type":"custom","customType":"openclaw.cache-ttl","data":{{"timestamp":{ts},"provider":{provider},"modelId":{model}}},"id":"{id}","parentId":{parent},"timestamp":"2026-03-01T00:00:00.000Z"}}"#
    )
}

fn m(id: &str, parent: &str, provider: &str) -> String {
    marker(
        id,
        parent,
        "1772323200000",
        &format!("\"{provider}\""),
        "\"m\"",
    )
}

fn user(id: &str, parent: &str) -> String {
    format!(
        r#"{{"type":"message","id":"{id}","parentId":"{parent}","timestamp":"2026-03-01T00:00:00.000Z","message":{{"role":"user","content":"hi"}}}}"#
    )
}

fn index_of(lines: &[String]) -> Index {
    let mut all =
        vec![r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_owned()];
    all.extend_from_slice(lines);
    Index::from_reader(all.join("\n").as_bytes()).unwrap()
}

fn removed_ids(lines: &[String]) -> Vec<String> {
    let index = index_of(lines);
    let tree = Tree::build(&index);
    let p = plan(&index, &tree);
    p.remove
        .iter()
        .map(|&i| index.entries[i].id.as_deref().unwrap().to_owned())
        .collect()
}

fn key(line: &str) -> Option<Key> {
    read_marker(line.as_bytes())
}

#[test]
fn markers_and_their_keys() {
    let k = |p: &str, m: &str| (Some(Box::from(p)), Some(Box::from(m)));
    assert_eq!(
        key(&marker("a", "", "5", "\" Anthropic\\t\"", "\"Claude-X\""),),
        Some(k("anthropic", "claude-x"))
    );
    // Non-ASCII text is kept as it is (only trimmed): equal keys must mean equal values.
    assert_eq!(
        key(&marker("a", "", "5", "\"\u{a0}Ä\"", "\"M\"")),
        Some(k("Ä", "m"))
    );
    // Null, absent and blank are all "no value".
    assert_eq!(
        key(&marker("a", "", "5", "null", "\" \\u000b\"")),
        Some((None, None))
    );
    let no_provider = r#"{"type":"custom","customType":"openclaw.cache-ttl","data":{"timestamp":1},"id":"a","parentId":null}"#;
    assert_eq!(key(no_provider), Some((None, None)));
    // What the runtime never reads, or reads differently, is no marker here.
    for ts in ["0", "-0", "1e-400", "1e400", "\"5\"", "null", "true", "[1]"] {
        assert_eq!(
            key(&marker("a", "", ts, "\"p\"", "\"m\"")),
            None,
            "timestamp {ts}"
        );
    }
    assert!(key(&marker("a", "", "-3.5", "\"p\"", "\"m\"")).is_some());
    // Duplicate members resolve as JSON.parse resolves them: the last one wins.
    let dup = r#"{"type":"custom","customType":"openclaw.cache-ttl","data":{"timestamp":1,"provider":"a","provider":"B"},"id":"a"}"#;
    assert_eq!(key(dup), Some((Some("b".into()), None)));
    assert_eq!(key(&marker("a", "", "5", "7", "\"m\"")), None);
    assert_eq!(key(&marker("a", "", "5", "\"p\"", "{}")), None);
    assert_eq!(key(&marker("", "", "5", "\"p\"", "\"m\"")), None);
    for odd in [
        r#"{"type":"custom","customType":"openclaw.cache-ttl","data":[1,"p","m"],"id":"a"}"#,
        r#"{"type":"custom","customType":"openclaw.cache-ttl","data":"x","id":"a"}"#,
        r#"{"type":"custom","customType":"openclaw.cache-ttl","id":"a"}"#,
        r#"{"type":"custom_message","customType":"openclaw.cache-ttl","data":{"timestamp":1},"id":"a"}"#,
        r#"{"type":"custom","customType":"openclaw.cache-ttl ","data":{"timestamp":1},"id":"a"}"#,
        r#"{"type":"custom","customType":"openclaw.cache-ttl","data":{"timestamp":1},"id":7}"#,
    ] {
        assert_eq!(key(odd), None, "{odd}");
    }
}

#[test]
fn a_linear_transcript_keeps_the_newest_per_provider_and_model() {
    let lines = [
        user("u1", "x"),
        m("a", "u1", "p"),
        m("b", "a", "q"),
        user("u2", "b"),
        m("c", "u2", "P "),
        m("d", "c", "q"),
        user("u3", "d"),
        m("e", "u3", "p"),
        user("u4", "e"),
    ];
    let mut lines = lines.to_vec();
    lines[0] = lines[0].replace("\"x\"", "null");
    // a and b are the first of their keys, e and d the newest.
    assert_eq!(removed_ids(&lines), ["c"]);
}

#[test]
fn every_branch_keeps_its_newest_and_every_path_its_first() {
    // u1 ─ a(p) ─ u2 ─ b(p) ─ u3                 (abandoned branch)
    //            └─ c(p) ─ u4 ─ d(p) ─ u5 ─ e(p) ─ u6  (active)
    // a is the first on both paths; b is the newest of its branch, so it stays even though
    // the active branch's e is later in the file; c and d are superseded on their path.
    let mut lines = vec![
        user("u1", "x"),
        m("a", "u1", "p"),
        user("u2", "a"),
        m("b", "u2", "p"),
        user("u3", "b"),
        m("c", "a", "p"),
        user("u4", "c"),
        m("d", "u4", "p"),
        user("u5", "d"),
        m("e", "u5", "p"),
        user("u6", "e"),
    ];
    lines[0] = lines[0].replace("\"x\"", "null");
    assert_eq!(removed_ids(&lines), ["c", "d"]);
    // A branch hanging below c without a marker of its own keeps c, the newest on its path.
    lines.push(user("u7", "c"));
    assert_eq!(removed_ids(&lines), ["d"]);
}

#[test]
fn the_leaf_labels_and_unparsable_lines_hold_markers_back() {
    let mut lines = vec![
        user("u1", "x"),
        m("a", "u1", "p"),
        m("b", "a", "p"),
        m("c", "b", "p"),
        m("e", "c", "p"),
        user("u2", "e"),
        m("d", "u2", "p"),
    ];
    lines[0] = lines[0].replace("\"x\"", "null");
    // The leaf is the newest marker: never superseded.
    assert_eq!(removed_ids(&lines), ["b", "c", "e"]);
    lines.push(
        r#"{"type":"label","id":"l","parentId":"d","targetId":"b","label":"x","timestamp":"2026-03-01T00:00:00.000Z"}"#
            .to_owned(),
    );
    lines
        .push("{\"type\":\"custom\",\"id\":\"z\",\"parentId\":\"c\",\"x\":\"\\ud800\"}".to_owned());
    let index = index_of(&lines);
    let tree = Tree::build(&index);
    let p = plan(&index, &tree);
    let held: Vec<&str> = p
        .held_back
        .iter()
        .map(|&(i, _)| index.entries[i].id.as_deref().unwrap())
        .collect();
    assert_eq!(held, ["b", "c"]);
    assert_eq!(p.remove.len(), 1);
}

#[test]
fn every_planned_removal_passes_the_validator() {
    // Random trees of users and markers of three keys: the plan's removals pass the
    // validator (which checks the newest marker per key), and the newest marker of every
    // key on every root-to-leaf path is kept.
    let keys = ["p", "q", "R"];
    let mut total = 0;
    for seed in 0..300u64 {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) % n) as usize
        };
        let mut lines = vec![user("e0", "x").replace("\"x\"", "null")];
        for n in 1..24 {
            let parent = format!("e{}", if next(4) == 0 { next(n as u64) } else { n - 1 });
            let id = format!("e{n}");
            lines.push(if next(3) == 0 {
                user(&id, &parent)
            } else {
                m(&id, &parent, keys[next(3)])
            });
        }
        let text = std::iter::once(
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_owned(),
        )
        .chain(lines)
        .collect::<Vec<_>>()
        .join("\n");
        let index = Index::from_reader(text.as_bytes()).unwrap();
        let tree = Tree::build(&index);
        let p = plan(&index, &tree);
        total += p.remove.len();
        let edits = rewrite::Edits {
            remove: p.remove.clone(),
            ..Default::default()
        };
        let resolved = rewrite::resolve(&index, &tree, edits.clone()).unwrap();
        let mut out = Vec::new();
        let applied = rewrite::apply(text.as_bytes(), &index, &resolved, &mut out).unwrap();
        let expect = validate::Expectation::removals(resolved.removed_ids.clone());
        validate::validate(&index, &applied.index, &expect)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
        // Per leaf (a node without children), the newest marker per key on its path.
        let newest_per_path = |idx: &Index| {
            let t = Tree::build(idx);
            let mut all = BTreeSet::new();
            for leaf in 0..idx.entries.len() {
                if idx.entries[leaf].kind == EntryType::Session || t.children(leaf).next().is_some()
                {
                    continue;
                }
                let mut newest: HashMap<u32, &str> = HashMap::new();
                for i in t.path_to(leaf) {
                    if let Ok(k) = idx.cache_ttl.binary_search_by_key(&(i as u32), |m| m.0) {
                        newest.insert(idx.cache_ttl[k].1, idx.entries[i].id.as_deref().unwrap());
                    }
                }
                all.extend(newest.into_values().map(str::to_owned));
            }
            all
        };
        let before = newest_per_path(&index);
        let after = newest_per_path(&applied.index);
        assert!(
            before.is_subset(&after),
            "seed {seed}: {before:?} {after:?}"
        );
        // A fork at any kept entry finds a marker of every key it found before.
        let keys_above = |idx: &Index, t: &Tree, i: usize| -> BTreeSet<Key> {
            t.path_to(i)
                .into_iter()
                .filter_map(|j| {
                    let k = idx
                        .cache_ttl
                        .binary_search_by_key(&(j as u32), |m| m.0)
                        .ok()?;
                    Some(idx.cache_ttl_keys[idx.cache_ttl[k].1 as usize].clone())
                })
                .collect()
        };
        let new_tree = Tree::build(&applied.index);
        for (j, e) in applied.index.entries.iter().enumerate() {
            let Some(id) = e.id.as_deref() else { continue };
            let Some(i) = tree.find(&index, id) else {
                continue;
            };
            if e.kind == EntryType::Session {
                continue;
            }
            assert_eq!(
                keys_above(&index, &tree, i),
                keys_above(&applied.index, &new_tree, j),
                "seed {seed}: fork at {id}"
            );
        }
        // Nothing but superseded markers went.
        for &i in &p.remove {
            assert!(index.cache_ttl.iter().any(|m| m.0 as usize == i));
            assert!(!before.contains(index.entries[i].id.as_deref().unwrap()));
        }
    }
    assert!(total > 200, "removed only {total}");
}
