//! Image stripping: which `{"type":"image"}` blocks to replace, and with what, and which
//! media references in the text of the same messages.
//!
//! [`plan`] follows the runtime's history-image prune boundary, made persistent: over the
//! active path's `message` entries in path order (entries hidden behind a compaction
//! included), a turn starts at a user message, or at a toolResult when no turn is open, and
//! is completed once an assistant message follows. Images in messages from the start of the
//! `keep_turns`-th most recent completed turn onward are protected. With `keep_turns` or fewer
//! completed turns nothing is stripped at all; otherwise every other image block in `user` and
//! `toolResult` array contents is replaced, on abandoned branches too, one block for one block,
//! by [`placeholder_block`]. `keep_turns = 0` protects nothing.
//!
//! The runtime scrubs the text of the same old messages on the same boundary (a media
//! reference replayed from history is otherwise loaded again as a fresh prompt image): in
//! exactly the messages whose images are replaced, and in those without images, every media
//! reference in a string content or in the `text` of a text block is replaced as
//! `crate::mediarefs::scrub` says (the index counted them per entry).
//!
//! When the active path stops at a parent that only an unparsable line mentions (the runtime
//! may parse that line and see older turns), the plan refuses to strip anything in the file.
//!
//! `inspect` can call [`plan`] on an index to predict exactly what `strip-images` frees.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, LazyLock};

use serde_json::{Map, Value};

use crate::transcript::job::{PlanError, Planned};
use crate::transcript::tree::Tree;
use crate::transcript::{EntryType, Index, Role};

/// The runtime's own marker, so the replayed prefix matches what it would build anyway.
pub const PLACEHOLDER_TEXT: &str = "[image data removed - already processed by model]";

/// `{"type":"text","text":"[image data removed - already processed by model]"}`, one value
/// shared by every replaced block (a big transcript has thousands).
pub fn placeholder_block() -> Arc<Value> {
    static BLOCK: LazyLock<Arc<Value>> = LazyLock::new(|| {
        let mut m = Map::new();
        m.insert("type".into(), Value::String("text".into()));
        m.insert("text".into(), Value::String(PLACEHOLDER_TEXT.into()));
        Arc::new(Value::Object(m))
    });
    Arc::clone(&BLOCK)
}

/// The outcome of planning a strip.
#[derive(Debug, Clone, Default)]
pub struct StripPlan {
    /// Entry index → positions of the image blocks to replace.
    pub replace: BTreeMap<usize, Vec<u32>>,
    /// Image blocks left in place because they are in the protected recent turns.
    pub protected: usize,
    /// Entry index → media references to replace in its text.
    pub media: BTreeMap<usize, u32>,
    /// Media references left in place because they are in the protected recent turns.
    pub media_protected: usize,
    /// Media references in unprotected text that are left because the runtime's replacement
    /// of that text would not settle (see `crate::mediarefs`).
    pub media_unsettled: usize,
    /// Completed turns found on the active path.
    pub completed_turns: usize,
    /// Why nothing may be stripped in this file, when the active path cannot be trusted.
    pub refused: Option<String>,
}

impl StripPlan {
    pub fn images(&self) -> usize {
        self.replace.values().map(Vec::len).sum()
    }

    /// Media references to replace.
    pub fn media_refs(&self) -> usize {
        self.media.values().map(|&n| n as usize).sum()
    }

    /// Bytes of the lines that hold images or media references to replace.
    pub fn line_bytes(&self, index: &Index) -> u64 {
        let lines: std::collections::BTreeSet<usize> = self
            .replace
            .keys()
            .chain(self.media.keys())
            .copied()
            .collect();
        lines
            .into_iter()
            .map(|i| index.lines[index.entries[i].line()].len)
            .sum()
    }
}

static NO_ROLE: Role = Role::Other;

/// Index into `messages` of the first protected message, or `None` when nothing may be
/// stripped (the runtime's `resolvePruneBeforeIndex`, with a configurable turn count).
pub fn prune_before(roles: &[&Role], keep_turns: usize) -> Option<usize> {
    let mut starts = Vec::new();
    let mut current: Option<usize> = None;
    let mut replied = false;
    for (i, role) in roles.iter().enumerate() {
        match role {
            Role::User => {
                if let Some(s) = current
                    && replied
                {
                    starts.push(s);
                }
                current = Some(i);
                replied = false;
            }
            Role::ToolResult => {
                if current.is_none() {
                    current = Some(i);
                }
            }
            Role::Assistant => {
                if current.is_some() {
                    replied = true;
                }
            }
            Role::Other => {}
        }
    }
    if let Some(s) = current
        && replied
    {
        starts.push(s);
    }
    if starts.len() <= keep_turns {
        return None;
    }
    if keep_turns == 0 {
        return Some(roles.len());
    }
    Some(starts[starts.len() - keep_turns])
}

/// Plan the replacement of every unprotected image block.
pub fn plan(index: &Index, tree: &Tree, keep_turns: usize) -> StripPlan {
    let path = tree.active_path();
    if let Some(&root) = path.first()
        && let Some(pid) = index.entries[root].parent.id()
        && tree.find(index, pid).is_none()
        && index.mentioned_by_unparsable(pid)
    {
        // The runtime may parse that line and see a longer path, with other turns.
        return StripPlan {
            refused: Some(format!(
                "the active path continues through a line this tool cannot parse (parent {pid} of entry on line {})",
                index.entries[root].line() + 1
            )),
            ..StripPlan::default()
        };
    }
    let messages: Vec<usize> = path
        .iter()
        .copied()
        .filter(|&i| index.entries[i].kind == EntryType::Message)
        .collect();
    let roles: Vec<&Role> = messages
        .iter()
        // A `message` entry without a `message` object has no role: it opens no turn.
        .map(|&i| index.entries[i].role.as_ref().unwrap_or(&NO_ROLE))
        .collect();
    let completed_turns = count_completed(&roles);
    let mut out = StripPlan {
        completed_turns,
        ..StripPlan::default()
    };
    let Some(boundary) = prune_before(&roles, keep_turns) else {
        out.protected = index.entries.iter().map(|e| e.image_blocks().len()).sum();
        out.media_protected = index
            .entries
            .iter()
            .map(|e| {
                let (n, left) = e.media_refs();
                (n + left) as usize
            })
            .sum();
        return out;
    };
    let protected: HashSet<usize> = messages[boundary..].iter().copied().collect();
    for (i, e) in index.entries.iter().enumerate() {
        if !(e.is_role(&Role::User) || e.is_role(&Role::ToolResult)) {
            continue;
        }
        let (media, unsettled) = e.media_refs();
        if protected.contains(&i) {
            out.protected += e.image_blocks().len();
            out.media_protected += (media + unsettled) as usize;
            continue;
        }
        if !e.image_blocks().is_empty() {
            out.replace.insert(i, e.image_blocks().to_vec());
        }
        if media > 0 {
            out.media.insert(i, media);
        }
        out.media_unsettled += unsettled as usize;
    }
    out
}

/// [`plan`] as the transcript job's edits (what `strip-images` runs per file, and what
/// `inspect` previews to predict it); a refused plan is the reason to skip the file.
pub fn planned(index: &Index, tree: &Tree, keep_turns: usize) -> Result<Planned, PlanError> {
    let plan = plan(index, tree, keep_turns);
    if let Some(why) = plan.refused {
        return Err(PlanError::Skip(why));
    }
    let mut planned = Planned::default();
    let kept = match (plan.protected, plan.media_protected) {
        (0, 0) => None,
        (i, 0) => Some(format!("{i} image(s)")),
        (0, m) => Some(format!("{m} media reference(s)")),
        (i, m) => Some(format!("{i} image(s) and {m} media reference(s)")),
    };
    if let Some(kept) = kept {
        planned.notes.push(format!(
            "{kept} kept in the last {keep_turns} completed turn(s) ({} completed on the active path)",
            plan.completed_turns
        ));
    }
    if plan.media_refs() > 0 {
        planned.notes.push(format!(
            "{} media reference(s) in the text of old turns replaced with \"{}\"",
            plan.media_refs(),
            crate::mediarefs::MARKER
        ));
    }
    if plan.media_unsettled > 0 {
        planned.notes.push(format!(
            "{} media reference(s) in old turns left as they are: the runtime would replace \
             them again in its own replacement",
            plan.media_unsettled
        ));
    }
    planned.edits.scrub_media = plan.media;
    for (entry, blocks) in plan.replace {
        let blocks = blocks
            .into_iter()
            .map(|b| (b, placeholder_block()))
            .collect();
        planned.edits.replace_blocks.insert(entry, blocks);
    }
    Ok(planned)
}

fn count_completed(roles: &[&Role]) -> usize {
    // prune_before with an unreachable keep count yields nothing; count directly instead.
    let mut n = 0;
    let mut open = false;
    let mut replied = false;
    for role in roles {
        match role {
            Role::User => {
                if open && replied {
                    n += 1;
                }
                open = true;
                replied = false;
            }
            Role::ToolResult => open = true,
            Role::Assistant => replied |= open,
            Role::Other => {}
        }
    }
    n + usize::from(open && replied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_matches_the_runtime_rule() {
        let u = Role::User;
        let a = Role::Assistant;
        let t = Role::ToolResult;
        // u a | u a t a | u a | u a   → completed starts 0,2,6,8
        let roles = [&u, &a, &u, &a, &t, &a, &u, &a, &u, &a];
        assert_eq!(prune_before(&roles, 3), Some(2));
        assert_eq!(prune_before(&roles, 4), None);
        assert_eq!(prune_before(&roles, 1), Some(8));
        assert_eq!(prune_before(&roles, 0), Some(roles.len()));
        assert_eq!(count_completed(&roles), 4);
        // A toolResult opens a turn only when none is open.
        let roles = [&t, &a, &u, &a];
        assert_eq!(prune_before(&roles, 1), Some(2));
        assert_eq!(count_completed(&roles), 2);
        // An open turn without a reply is not completed.
        assert_eq!(count_completed(&[&u, &a, &u]), 1);
    }

    use crate::mediarefs::MARKER;
    use crate::transcript::rewrite;
    use crate::transcript::validate::{Expectation, validate};

    /// `n` turns `user`/`assistant`, the user text of turn `k` given by `user(k)` (a JSON
    /// content value), then a toolResult in the last turn's place when `tool` is set.
    fn transcript(n: usize, user: impl Fn(usize) -> String) -> String {
        let mut lines = vec![
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#.to_string(),
        ];
        let mut parent = "null".to_string();
        for k in 0..n {
            lines.push(format!(
                r#"{{"type":"message","id":"u{k}","parentId":{parent},"message":{{"role":"user","content":{}}}}}"#,
                user(k)
            ));
            lines.push(format!(
                r#"{{"type":"message","id":"a{k}","parentId":"u{k}","message":{{"role":"assistant","content":"[media attached: kept.png]"}}}}"#
            ));
            parent = format!("\"a{k}\"");
        }
        lines.join("\n") + "\n"
    }

    /// Plan with `keep`, apply, validate; the written text and the outcome's counts.
    fn strip(text: &str, keep: usize) -> (String, rewrite::Resolved) {
        let index = Index::from_reader(text.as_bytes()).unwrap();
        let tree = Tree::build(&index);
        let planned = planned(&index, &tree, keep).unwrap();
        let resolved = rewrite::resolve(&index, &tree, planned.edits.clone()).unwrap();
        let mut out = Vec::new();
        let applied = rewrite::apply(text.as_bytes(), &index, &resolved, &mut out).unwrap();
        let mut from_bytes = Vec::new();
        let held =
            rewrite::apply_bytes(text.as_bytes(), &index, &resolved, &mut from_bytes).unwrap();
        assert!(from_bytes == out, "the same bytes from memory: {text}");
        assert_eq!(format!("{:?}", held.index), format!("{:?}", applied.index));
        validate(
            &index,
            &applied.index,
            &Expectation::removals(Default::default()),
        )
        .unwrap();
        // What the rewrite wrote holds no reference the plan meant to replace.
        for &i in planned.edits.scrub_media.keys() {
            assert_eq!(applied.index.entries[i].media_refs().0, 0, "{text}");
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, text).unwrap();
        let predicted =
            rewrite::predicted_size(&std::fs::File::open(&p).unwrap(), &index, &resolved).unwrap();
        assert_eq!(predicted, out.len() as u64);
        let in_memory = rewrite::predicted_size(text.as_bytes(), &index, &resolved).unwrap();
        assert_eq!(
            in_memory,
            out.len() as u64,
            "sized from the bytes in memory"
        );
        (String::from_utf8(out).unwrap(), resolved)
    }

    #[test]
    fn media_references_in_old_user_and_tool_result_text_are_replaced() {
        let b64 = "QUJD".repeat(200);
        let text = transcript(5, |k| match k {
            // A string content, escapes and all.
            0 => r#""see [media attached 1/2: /tmp/a.png (image/png)]\nand media://inbound/x.jpg""#
                .into(),
            // Text blocks beside an image; a non-text block's text is not touched.
            1 => format!(
                r#"[{{"type":"text","text":"[Image: source: /p/q.png]","extra":1}},{{"type":"image","data":"{b64}","mimeType":"image/png"}},{{"type":"note","text":"media://inbound/n"}},{{"text":"media://inbound/z","type":"text"}}]"#
            ),
            // Unsettled: left as it is.
            2 => r#""[media attached: media://inbound/x""#.into(),
            // Recent turns: kept.
            _ => r#""[media attached: recent.png]""#.into(),
        });
        let (out, resolved) = strip(&text, 2);
        assert_eq!(resolved.blocks_replaced, 1);
        assert_eq!(resolved.media_refs_replaced, 4);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[1],
            format!(
                r#"{{"type":"message","id":"u0","parentId":null,"message":{{"role":"user","content":"see {MARKER}\nand {MARKER}"}}}}"#
            )
        );
        assert_eq!(
            lines[3],
            format!(
                r#"{{"type":"message","id":"u1","parentId":"a0","message":{{"role":"user","content":[{{"type":"text","text":"{MARKER}","extra":1}},{{"type":"text","text":"{PLACEHOLDER_TEXT}"}},{{"type":"note","text":"media://inbound/n"}},{{"text":"{MARKER}","type":"text"}}]}}}}"#
            )
        );
        let src: Vec<&str> = text.lines().collect();
        for n in [2, 4, 5, 6, 7, 8, 9, 10] {
            assert_eq!(lines[n], src[n], "line {}", n + 1);
        }
        // A second run finds nothing to do.
        let index = Index::from_reader(out.as_bytes()).unwrap();
        let again = planned(&index, &Tree::build(&index), 2).unwrap();
        assert!(again.edits.is_empty());
        assert!(
            again
                .notes
                .iter()
                .any(|n| n.contains("1 media reference(s) in old turns left"))
        );
        assert!(
            again
                .notes
                .iter()
                .any(|n| n.contains("2 media reference(s) kept in the last 2"))
        );
    }

    #[test]
    fn media_references_are_kept_without_enough_completed_turns() {
        let text = transcript(3, |_| r#""[media attached: a.png]""#.into());
        let index = Index::from_reader(text.as_bytes()).unwrap();
        let plan = plan(&index, &Tree::build(&index), 3);
        assert!(plan.media.is_empty());
        assert_eq!(plan.media_protected, 3);
        let (_, resolved) = strip(&text, 2);
        assert_eq!(resolved.media_refs_replaced, 1);
        // keep 0: every turn.
        let (out, resolved) = strip(&text, 0);
        assert_eq!(resolved.media_refs_replaced, 3);
        assert_eq!(out.matches(MARKER).count(), 3);
        // Assistant text is never touched.
        assert_eq!(out.matches("[media attached: kept.png]").count(), 3);
    }
}
