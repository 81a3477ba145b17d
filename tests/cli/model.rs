//! An independent, deliberately simple model of the transcript rules, used to predict what
//! `prune-noreply` and `strip-images` must do to a generated file. It shares no code with the
//! tool except `jsjson` (to predict the exact bytes of a rewritten line).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

pub struct Model {
    /// Raw lines (terminator excluded), in file order.
    pub lines: Vec<String>,
    /// Parsed object per line (None: blank or unparsable).
    pub values: Vec<Option<Value>>,
    /// Node id → line.
    pub line_of: HashMap<String, usize>,
    pub leaf: Option<usize>,
}

const KNOWN: [&str; 9] = [
    "message",
    "thinking_level_change",
    "model_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
];

impl Model {
    pub fn new(bytes: &[u8]) -> Model {
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        let lines: Vec<String> = text
            .split_inclusive('\n')
            .map(|l| l.trim_end_matches('\n').to_owned())
            .collect();
        let values: Vec<Option<Value>> = lines
            .iter()
            .map(|l| {
                serde_json::from_str::<Value>(l)
                    .ok()
                    .filter(Value::is_object)
            })
            .collect();
        let mut line_of = HashMap::new();
        let mut leaf = None;
        for (i, v) in values.iter().enumerate() {
            let Some(v) = v else { continue };
            if v["type"] == "session" {
                continue;
            }
            if let Some(id) = v["id"].as_str().filter(|s| !s.is_empty()) {
                line_of.entry(id.to_owned()).or_insert(i);
                if KNOWN.contains(&v["type"].as_str().unwrap_or("")) {
                    leaf = Some(i);
                }
            }
        }
        Model {
            lines,
            values,
            line_of,
            leaf,
        }
    }

    pub fn v(&self, line: usize) -> &Value {
        self.values[line].as_ref().unwrap()
    }

    pub fn parent(&self, line: usize) -> Option<usize> {
        self.parent_id(line)
            .and_then(|p| self.line_of.get(&p).copied())
    }

    /// The parent id as the runtime sees it: the `parentId` string, except that an entry of a
    /// known type hangs below the previous known entry (the runtime's leaf so far) when it has
    /// no `parentId` field, or when its `parentId` names the unknown entry just before it (the
    /// last line with an id that is known, or unknown with a string or null `parentId`) while
    /// that is not the leaf.
    pub fn parent_id(&self, line: usize) -> Option<String> {
        let v = self.v(line);
        let known = |v: &Value| KNOWN.contains(&v["type"].as_str().unwrap_or(""));
        if !known(v) {
            // The runtime links an unknown entry only through an explicit parentId.
            return v.get("parentId").and_then(Value::as_str).map(str::to_owned);
        }
        let (mut leaf, mut last) = (None, None);
        for p in self.values[..line].iter().flatten() {
            let Some(id) = p["id"].as_str().filter(|s| !s.is_empty()) else {
                continue;
            };
            if p["type"] == "session" || p["type"] == "leaf" {
                continue;
            }
            if known(p) {
                leaf = Some(id.to_owned());
                last = leaf.clone();
            } else if p
                .get("parentId")
                .is_some_and(|q| q.is_null() || q.is_string())
            {
                last = Some(id.to_owned());
            }
        }
        match v.get("parentId") {
            None => leaf,
            Some(Value::String(p)) if last.as_ref() == Some(p) && leaf.as_ref() != Some(p) => leaf,
            Some(p) => p.as_str().map(str::to_owned),
        }
    }

    /// The nearest ancestor of `line` of a known type that is not in `removed`, by
    /// [`Model::parent_id`] (None: a root, or a parent not in the file).
    pub fn nearest_known_kept(&self, line: usize, removed: &HashSet<String>) -> Option<String> {
        let mut seen = HashSet::new();
        let mut up = self.parent_id(line);
        while let Some(id) = up.clone() {
            let l = *self.line_of.get(&id)?;
            if !removed.contains(&id) && KNOWN.contains(&self.v(l)["type"].as_str().unwrap_or("")) {
                return Some(id);
            }
            if !seen.insert(l) {
                return None;
            }
            up = self.parent_id(l);
        }
        None
    }

    pub fn id(&self, line: usize) -> String {
        self.v(line)["id"].as_str().unwrap_or_default().to_owned()
    }

    fn mentioned_by_unparsable(&self, id: &str) -> bool {
        let needle = format!("\"{id}\"");
        self.lines
            .iter()
            .zip(&self.values)
            .any(|(l, v)| v.is_none() && l.contains(&needle))
    }

    pub fn active_path(&self) -> Vec<usize> {
        self.path_from(self.leaf)
    }

    /// Root-to-`from` path over the lines this model can parse.
    pub fn path_from(&self, from: Option<usize>) -> Vec<usize> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut c = from;
        while let Some(l) = c {
            if !seen.insert(l) {
                break;
            }
            out.push(l);
            c = self.parent(l);
        }
        out.reverse();
        out
    }

    pub fn is_silent(&self, line: usize) -> bool {
        let v = self.v(line);
        let m = &v["message"];
        if v["type"] != "message" || m["role"] != "assistant" {
            return false;
        }
        if matches!(m["stopReason"].as_str(), Some("error" | "aborted")) {
            return false;
        }
        // The text rule itself is checked against the runtime's own functions (`silent.rs`).
        match &m["content"] {
            Value::String(s) => clawkeeper::noreply::is_silent_text(s),
            Value::Array(blocks) => clawkeeper::noreply::is_silent_blocks(
                blocks
                    .iter()
                    .map(|b| (b["type"].as_str(), b["text"].as_str())),
            ),
            _ => false,
        }
    }

    fn breaks(&self, line: usize) -> bool {
        let v = self.v(line);
        match v["type"].as_str() {
            Some("message") => !self.is_silent(line),
            Some("custom_message" | "compaction") => true,
            Some("branch_summary") => v["summary"].as_str().is_some_and(|s| !s.is_empty()),
            _ => false,
        }
    }

    /// Lines of the active path whose messages the runtime puts in context (spec §6): after
    /// the latest compaction, its kept entries (from its `firstKeptEntryId`, an unknown type
    /// standing for its nearest known ancestor) and everything after it. The compaction's own
    /// summary is left out (it takes no part in tool pairing).
    pub fn active_context(&self) -> Vec<usize> {
        let path = self.active_path();
        let contributes = |l: usize| {
            let v = self.v(l);
            match v["type"].as_str() {
                Some("message" | "custom_message") => true,
                Some("branch_summary") => v["summary"].as_str().is_some_and(|s| !s.is_empty()),
                _ => false,
            }
        };
        let Some(cpos) = path
            .iter()
            .rposition(|&l| self.v(l)["type"] == "compaction")
        else {
            return path.into_iter().filter(|&l| contributes(l)).collect();
        };
        let mut first = self.v(path[cpos])["firstKeptEntryId"]
            .as_str()
            .and_then(|id| self.line_of.get(id).copied());
        let mut seen = HashSet::new();
        while let Some(f) =
            first.filter(|&f| !KNOWN.contains(&self.v(f)["type"].as_str().unwrap_or("")))
        {
            if !seen.insert(f) {
                first = None;
                break;
            }
            first = self.parent(f);
        }
        let kept_from = first.and_then(|f| path[..cpos].iter().position(|&l| l == f));
        let before = kept_from.map_or(&path[..0], |k| &path[k..cpos]);
        before
            .iter()
            .chain(&path[cpos + 1..])
            .copied()
            .filter(|&l| contributes(l))
            .collect()
    }

    /// Tool call/result problems of a context without the `removed` lines, as spec §13 counts
    /// them: (calls without a result before the next assistant message, results that answer
    /// no call of the preceding assistant, results for a call already answered).
    pub fn pairing(&self, context: &[usize], removed: &HashSet<usize>) -> (usize, usize, usize) {
        const CALLS: [&str; 6] = [
            "toolCall",
            "toolUse",
            "functionCall",
            "tool_use",
            "tool_call",
            "function_call",
        ];
        const IDS: [&str; 6] = [
            "toolCallId",
            "toolUseId",
            "tool_call_id",
            "tool_use_id",
            "callId",
            "call_id",
        ];
        let (mut missing, mut orphans, mut duplicates) = (0, 0, 0);
        let mut calls: Vec<Option<String>> = Vec::new();
        let mut answered: HashSet<String> = HashSet::new();
        let mut ever: HashSet<String> = HashSet::new();
        let unanswered = |calls: &[Option<String>], answered: &HashSet<String>| {
            calls
                .iter()
                .filter(|c| c.as_ref().is_none_or(|c| !answered.contains(c)))
                .count()
        };
        for &l in context.iter().filter(|l| !removed.contains(l)) {
            let v = self.v(l);
            if v["type"] != "message" {
                continue;
            }
            let m = &v["message"];
            match m["role"].as_str() {
                Some("assistant") => {
                    missing += unanswered(&calls, &answered);
                    answered.clear();
                    calls.clear();
                    if !matches!(m["stopReason"].as_str(), Some("error" | "aborted")) {
                        calls = m["content"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter(|b| CALLS.contains(&b["type"].as_str().unwrap_or("")))
                            .map(|b| b["id"].as_str().map(str::to_owned))
                            .collect();
                    }
                }
                Some("toolResult") => match IDS.iter().find_map(|k| m[*k].as_str()) {
                    None => orphans += 1,
                    Some(id) if ever.contains(id) => duplicates += 1,
                    Some(id) if calls.iter().any(|c| c.as_deref() == Some(id)) => {
                        ever.insert(id.to_owned());
                        answered.insert(id.to_owned());
                    }
                    Some(_) => orphans += 1,
                },
                _ => {}
            }
        }
        missing += unanswered(&calls, &answered);
        (missing, orphans, duplicates)
    }

    /// Lines the prune must remove.
    /// Whether a path stops at a parent only an unparsable line can be.
    fn truncated(&self, path: &[usize]) -> bool {
        path.first().is_some_and(|&root| {
            self.parent_id(root)
                .is_some_and(|p| !self.line_of.contains_key(&p) && self.mentioned_by_unparsable(&p))
        })
    }

    /// Lines a compaction keeps from beyond an unparsable line (they must stay).
    fn pinned(&self) -> HashSet<usize> {
        let mut out = HashSet::new();
        for &c in self.line_of.values() {
            let v = self.v(c);
            if v["type"] != "compaction" {
                continue;
            }
            let path = self.path_from(Some(c));
            if !self.truncated(&path) {
                continue;
            }
            let Some(&k) = v["firstKeptEntryId"]
                .as_str()
                .and_then(|id| self.line_of.get(id))
            else {
                continue;
            };
            // An unknown type stands for its nearest known ancestor.
            let mut eff = Some(k);
            while let Some(e) =
                eff.filter(|&e| !KNOWN.contains(&self.v(e)["type"].as_str().unwrap_or("")))
            {
                eff = self.parent(e);
            }
            for x in [Some(k), eff].into_iter().flatten() {
                if !path.contains(&x) {
                    out.insert(x);
                }
            }
        }
        out
    }

    pub fn prune_removals(&self, keep: usize) -> HashSet<usize> {
        let last_line = self.lines.len() - 1;
        let pinned = self.pinned();
        let mut out = HashSet::new();
        for &l in self.line_of.values() {
            if !self.is_silent(l) || Some(l) == self.leaf || l == last_line {
                continue;
            }
            // Position in the run: silent ancestors up to the first breaker.
            let mut pos = 1;
            let mut c = self.parent(l);
            while let Some(p) = c {
                if self.is_silent(p) {
                    pos += 1;
                } else if self.breaks(p) {
                    break;
                }
                c = self.parent(p);
            }
            if pos > keep && !self.mentioned_by_unparsable(&self.id(l)) && !pinned.contains(&l) {
                out.insert(l);
            }
        }
        // Tool pairing on the active context must not get worse (spec §13): try the removals
        // one by one in context order and keep a reply whose removal, together with those
        // already accepted, makes any count grow.
        let context = self.active_context();
        let base = self.pairing(&context, &HashSet::new());
        let mut accepted = HashSet::new();
        let candidates: Vec<usize> = context
            .iter()
            .copied()
            .filter(|l| out.contains(l))
            .collect();
        for l in candidates {
            accepted.insert(l);
            let (m, o, d) = self.pairing(&context, &accepted);
            if m > base.0 || o > base.1 || d > base.2 {
                accepted.remove(&l);
                out.remove(&l);
            }
        }
        let ids: HashSet<String> = out.iter().map(|&l| self.id(l)).collect();
        for &l in self.line_of.values() {
            let v = self.v(l);
            if v["type"] == "label"
                && v["targetId"].as_str().is_some_and(|t| ids.contains(t))
                && Some(l) != self.leaf
                && !self.mentioned_by_unparsable(&self.id(l))
                && !pinned.contains(&l)
            {
                out.insert(l);
            }
        }
        out
    }

    /// Lines (and their image block positions) the strip must change; `None` when the tool
    /// must refuse the file.
    pub fn strip_targets(&self, keep_turns: usize) -> Option<HashMap<usize, Vec<usize>>> {
        self.strip_plan(keep_turns).map(|(images, _)| images)
    }

    /// Lines whose text the strip must change (media references), with how many references
    /// each loses; `None` when the tool must refuse the file.
    pub fn media_targets(&self, keep_turns: usize) -> Option<HashMap<usize, usize>> {
        self.strip_plan(keep_turns).map(|(_, media)| media)
    }

    fn strip_plan(&self, keep_turns: usize) -> Option<(ImageTargets, HashMap<usize, usize>)> {
        let path = self.active_path();
        if let Some(&root) = path.first()
            && let Some(pid) = self.v(root)["parentId"].as_str()
            && !self.line_of.contains_key(pid)
            && self.mentioned_by_unparsable(pid)
        {
            return None;
        }
        let msgs: Vec<usize> = path
            .iter()
            .copied()
            .filter(|&l| self.v(l)["type"] == "message")
            .collect();
        let mut starts = Vec::new();
        let mut open: Option<usize> = None;
        let mut replied = false;
        for (i, &l) in msgs.iter().enumerate() {
            match self.v(l)["message"]["role"].as_str() {
                Some("user") => {
                    if let (Some(s), true) = (open, replied) {
                        starts.push(s);
                    }
                    open = Some(i);
                    replied = false;
                }
                Some("toolResult") if open.is_none() => open = Some(i),
                Some("assistant") if open.is_some() => replied = true,
                _ => {}
            }
        }
        if let (Some(s), true) = (open, replied) {
            starts.push(s);
        }
        let mut out = HashMap::new();
        let mut media = HashMap::new();
        if starts.len() <= keep_turns {
            return Some((out, media));
        }
        let boundary = if keep_turns == 0 {
            msgs.len()
        } else {
            starts[starts.len() - keep_turns]
        };
        let protected: HashSet<usize> = msgs[boundary..].iter().copied().collect();
        for (l, v) in self.values.iter().enumerate() {
            let Some(v) = v else { continue };
            let m = &v["message"];
            if v["type"] != "message" || !matches!(m["role"].as_str(), Some("user" | "toolResult"))
            {
                continue;
            }
            if protected.contains(&l) {
                continue;
            }
            let mut content = m["content"].clone();
            let refs = scrub_media(&mut content);
            if refs > 0 {
                media.insert(l, refs);
            }
            let Some(blocks) = m["content"].as_array() else {
                continue;
            };
            let imgs: Vec<usize> = blocks
                .iter()
                .enumerate()
                .filter(|(_, b)| b["type"] == "image")
                .map(|(i, _)| i)
                .collect();
            if !imgs.is_empty() {
                out.insert(l, imgs);
            }
        }
        Some((out, media))
    }
}

/// Line → positions of the image blocks the strip replaces in it.
type ImageTargets = HashMap<usize, Vec<usize>>;

/// The runtime's media reference marker.
pub const MEDIA_MARKER: &str = "[media reference removed - already processed by model]";

/// Replace the media references of a message content (a string, or the text of text blocks)
/// as the runtime does, for the references the generator writes; returns how many.
pub fn scrub_media(content: &mut Value) -> usize {
    use std::sync::LazyLock;
    static PATTERNS: LazyLock<[regex::Regex; 3]> = LazyLock::new(|| {
        [
            regex::Regex::new(r"(?i)\[media attached( +[0-9]+/[0-9]+)?: *[^\]]+\]").unwrap(),
            regex::Regex::new(r"(?i)\[image: *source: *[^\]]+\]").unwrap(),
            regex::Regex::new(r"\bmedia://inbound/[^\]\s/\\]+").unwrap(),
        ]
    });
    let one = |s: &mut String| {
        let mut n = 0;
        for p in PATTERNS.iter() {
            n += p.find_iter(s).count();
            *s = p.replace_all(s, MEDIA_MARKER).into_owned();
        }
        n
    };
    match content {
        Value::String(s) => one(s),
        Value::Array(blocks) => blocks
            .iter_mut()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| match &mut b["text"] {
                Value::String(s) => Some(one(s)),
                _ => None,
            })
            .sum(),
        _ => 0,
    }
}
