//! Image stripping: which `{"type":"image"}` blocks to replace, and with what.
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
//! When the active path stops at a parent that only an unparsable line mentions (the runtime
//! may parse that line and see older turns), the plan refuses to strip anything in the file.
//!
//! `inspect` can call [`plan`] on an index to predict exactly what `strip-images` frees.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use crate::transcript::job::Planned;
use crate::transcript::tree::Tree;
use crate::transcript::{EntryType, Index, Role};

/// The runtime's own marker, so the replayed prefix matches what it would build anyway.
pub const PLACEHOLDER_TEXT: &str = "[image data removed - already processed by model]";

/// `{"type":"text","text":"[image data removed - already processed by model]"}`.
pub fn placeholder_block() -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::String("text".into()));
    m.insert("text".into(), Value::String(PLACEHOLDER_TEXT.into()));
    Value::Object(m)
}

/// The outcome of planning a strip.
#[derive(Debug, Clone, Default)]
pub struct StripPlan {
    /// Entry index → positions of the image blocks to replace.
    pub replace: BTreeMap<usize, Vec<u32>>,
    /// Image blocks left in place because they are in the protected recent turns.
    pub protected: usize,
    /// Completed turns found on the active path.
    pub completed_turns: usize,
    /// Why nothing may be stripped in this file, when the active path cannot be trusted.
    pub refused: Option<String>,
}

impl StripPlan {
    pub fn images(&self) -> usize {
        self.replace.values().map(Vec::len).sum()
    }

    /// Bytes of the lines that hold images to replace (an upper bound on what is freed).
    pub fn line_bytes(&self, index: &Index) -> u64 {
        self.replace
            .keys()
            .map(|&i| index.lines[index.entries[i].line].len)
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
        && !tree.by_id.contains_key(pid)
        && index.mentioned_by_unparsable(pid)
    {
        // The runtime may parse that line and see a longer path, with other turns.
        return StripPlan {
            refused: Some(format!(
                "the active path continues through a line this tool cannot parse (parent {pid} of entry on line {})",
                index.entries[root].line + 1
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
        out.protected = index.entries.iter().map(|e| e.image_blocks.len()).sum();
        return out;
    };
    let protected: HashSet<usize> = messages[boundary..].iter().copied().collect();
    for (i, e) in index.entries.iter().enumerate() {
        if e.image_blocks.is_empty() || !(e.is_role(&Role::User) || e.is_role(&Role::ToolResult)) {
            continue;
        }
        if protected.contains(&i) {
            out.protected += e.image_blocks.len();
        } else {
            out.replace.insert(i, e.image_blocks.to_vec());
        }
    }
    out
}

/// [`plan`] as the transcript job's edits (what `strip-images` runs per file, and what
/// `inspect` previews to predict it); a refused plan is the reason to skip the file.
pub fn planned(index: &Index, tree: &Tree, keep_turns: usize) -> Result<Planned, String> {
    let plan = plan(index, tree, keep_turns);
    if let Some(why) = plan.refused {
        return Err(why);
    }
    let mut planned = Planned::default();
    if plan.protected > 0 {
        planned.notes.push(format!(
            "{} image(s) kept in the last {keep_turns} completed turn(s) ({} completed on the active path)",
            plan.protected, plan.completed_turns
        ));
    }
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
}
