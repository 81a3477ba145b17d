//! Append-only rewrites (what in-place `compact` asks for), in memory bounded by the largest
//! line plus the index of the original.
//!
//! A rewrite that only appends entries writes the original bytes unchanged and then the new
//! lines, so it needs neither a second index of the whole output nor a second tree, which is
//! what the general path ([`super::rewrite`] and [`super::validate`]) builds:
//!
//! - [`prepare`] resolves the new lines (string ids unused in the file, a terminated last
//!   line), then extends the original index and tree by exactly those lines (every original
//!   entry keeps its position) and checks the result as the validator would: every appended
//!   line is an entry with its id, whose parent exists and which reaches a root; the leaf is
//!   the last appended entry; and, for an appended compaction keeping from an entry, the
//!   rebuilt context is its summary followed by exactly the old context from that entry on,
//!   with tool call/result pairing no worse. Old entries' context items are compared by
//!   position, so the check is exact, not by id.
//! - [`copy_verified`] streams the original lines into the output, checking each line's length
//!   and, for entries, that it still parses to the indexed type, id and parent (unparsable
//!   lines must be byte for byte what was indexed), then writes the appended lines. Together
//!   with the caller's size and mtime re-check before the rename, the written file is the
//!   indexed file plus the new lines.

use std::io::{BufRead, Write};

use anyhow::{Result, bail};
use serde_json::Value;

use super::tree::{self, ContextItem, Tree};
use super::validate::Invalid;
use super::{Entry, Index, IndexBuilder, LineKind, probe};

/// The appended lines of a prepared append.
#[derive(Debug, Clone)]
pub struct Appended {
    /// Lines to append (compact JSON, without the newline).
    pub lines: Vec<String>,
    /// Ids of the appended entries.
    pub ids: Vec<String>,
    /// Lines of the original file (the index holds more after [`prepare`]).
    pub original_lines: usize,
    /// Size of the original file.
    pub original_size: u64,
}

impl Appended {
    /// Size of the result.
    pub fn bytes_after(&self) -> u64 {
        self.original_size + self.lines.iter().map(|l| l.len() as u64 + 1).sum::<u64>()
    }
}

/// The lines of `entries` to append to the indexed file, with their ids: each must be an
/// object with a string id used nowhere in the file (nor twice), and the file's last line
/// must be complete.
pub fn lines_of(
    index: &Index,
    tree: &Tree,
    entries: &[Value],
) -> Result<(Vec<String>, Vec<String>)> {
    let mut lines = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    if entries.is_empty() {
        return Ok((lines, ids));
    }
    if index.lines.last().is_some_and(|l| !l.terminated) {
        bail!("cannot append after a partially written last line");
    }
    for v in entries {
        let id = v
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| anyhow::anyhow!("an appended entry has no string id"))?;
        if tree.find(index, id).is_some() || ids.iter().any(|a| a == id) {
            bail!("an appended entry reuses the id {id}");
        }
        ids.push(id.to_owned());
        lines.push(crate::jsjson::to_string_compact(v));
    }
    Ok((lines, ids))
}

fn fail<T>(msg: impl Into<String>) -> Result<T, Invalid> {
    Err(Invalid(msg.into()))
}

/// Extend `index` and `tree` by the appended lines and check the result (see the module
/// docs). `keeps_from`: the last appended entry is a compaction keeping the old context from
/// this entry id on. On success the index and tree describe the file as it will be.
pub fn prepare(
    index: Index,
    tree: &mut Tree,
    lines: Vec<String>,
    ids: Vec<String>,
    keeps_from: Option<&str>,
) -> Result<(Index, Appended), Invalid> {
    if index.header().is_none() {
        return fail("the original has no session header on its first line");
    }
    let old_ctx = tree::context_of(&index, tree, &tree.active_path());
    let old_pairing = tree::pairing(&index, old_ctx.iter().copied());
    let (original_lines, original_size) = (index.lines.len(), index.size);
    let first_new = index.entries.len();
    let mut builder = IndexBuilder::resume(index);
    for line in &lines {
        builder.push_line(format!("{line}\n").as_bytes());
    }
    let index = builder.finish();
    tree.extend(&index);
    let new: Vec<usize> = (first_new..index.entries.len()).collect();
    let parsed = index.lines[original_lines..]
        .iter()
        .all(|l| l.kind == LineKind::Entry);
    if !parsed || new.len() != ids.len() {
        return fail("an appended line does not parse back as an entry");
    }
    for (&i, id) in new.iter().zip(&ids) {
        let e = &index.entries[i];
        if e.id.as_deref() != Some(id.as_str()) || !tree::is_node(e) {
            return fail(format!(
                "appended entry {id} does not read back with its id"
            ));
        }
        if tree.dangling.contains(&i) {
            return fail(format!(
                "entry {id} names a parent {} that is not in the file",
                e.parent.id().unwrap_or_default()
            ));
        }
        let path = tree.path_to(i);
        if path.first().is_some_and(|&r| tree.parent(r).is_some()) {
            return fail(format!("entry {id} is part of a parent cycle"));
        }
    }
    if !tree.duplicate_ids.is_empty() {
        return fail(format!("duplicate entry id {}", tree.duplicate_ids[0]));
    }
    let last = *new.last().expect("something is appended");
    if tree.leaf != Some(last) {
        return fail(format!(
            "the leaf changed from {:?} to {:?}",
            ids.last(),
            tree.leaf_id(&index)
        ));
    }
    if let Some(first_kept) = keeps_from {
        let Some(at) = old_ctx.iter().position(|c| {
            matches!(c, ContextItem::Entry(_) if index.entries[c.at()].id.as_deref() == Some(first_kept))
        }) else {
            return fail(format!(
                "the appended compaction keeps from {first_kept}, which is not in the context"
            ));
        };
        let expected: Vec<ContextItem> =
            std::iter::once(ContextItem::CompactionSummary(last as u32))
                .chain(old_ctx[at..].iter().copied())
                .collect();
        let got = tree::context_of(&index, tree, &tree.active_path());
        if got != expected {
            return fail(format!(
                "the rebuilt context differs: expected {} messages, got {}",
                expected.len(),
                got.len()
            ));
        }
        let new_pairing = tree::pairing(&index, got);
        if !new_pairing.no_worse_than(&old_pairing) {
            return fail(format!(
                "tool call pairing got worse ({old_pairing:?} before, {new_pairing:?} after)"
            ));
        }
    }
    Ok((
        index,
        Appended {
            lines,
            ids,
            original_lines,
            original_size,
        },
    ))
}

/// Copy the original lines of `src` (the indexed file, read from its start) into `out`,
/// checking each against the index, then write the appended lines. Returns the bytes written.
pub fn copy_verified(
    src: impl BufRead,
    index: &Index,
    appended: &Appended,
    out: &mut dyn Write,
) -> Result<u64> {
    let mut src = src.take(appended.original_size);
    let mut buf = Vec::new();
    let mut written = 0u64;
    let mut unparsable = index.unparsable.iter();
    for (n, line) in index.lines[..appended.original_lines].iter().enumerate() {
        buf.clear();
        let got = src.read_until(b'\n', &mut buf)?;
        if got as u64 != line.len {
            bail!("the file changed while it was being read (line {})", n + 1);
        }
        let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let same = match line.kind {
            LineKind::Blank => body.iter().all(u8::is_ascii_whitespace),
            LineKind::Unparsable => unparsable
                .next()
                .is_some_and(|(l, raw)| *l == n && raw.as_slice() == body),
            LineKind::Entry => {
                let want = &index.entries[line.entry().expect("entry lines have entries")];
                probe::probe_line(body, None).is_ok_and(|p| {
                    let got = Entry::from_probe(n, &p, None);
                    got.kind == want.kind && got.id == want.id && got.parent == want.parent
                })
            }
        };
        if !same {
            bail!("the file changed while it was being read (line {})", n + 1);
        }
        out.write_all(&buf)?;
        written += buf.len() as u64;
    }
    for line in &appended.lines {
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
        written += line.len() as u64 + 1;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::transcript::validate::{self, Expectation};

    const TEXT: &str = concat!(
        r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
        "\n",
        r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}"#,
        "\n",
        r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[{"type":"toolCall","id":"t"}]}}"#,
        "\n",
        "{\"type\":\"custom\",\"id\":\"u\",\"parentId\":\"b\",\"data\":\"\\ud800\"}\n",
        "\n",
        r#"{"type":"message","id":"c","parentId":"b","message":{"role":"toolResult","toolCallId":"t","content":[]}}"#,
        "\n",
        r#"{"type":"message","id":"d","parentId":"c","message":{"role":"user","content":"y"}}"#,
        "\n",
    );

    fn compaction(id: &str, parent: &str, keeps: &str) -> Value {
        json!({"type":"compaction","id":id,"parentId":parent,"timestamp":"t","summary":"s","firstKeptEntryId":keeps,"tokensBefore":1})
    }

    /// `prepare` and the general validator agree on appended compactions, good and bad.
    #[test]
    fn agrees_with_the_validator() {
        let cases = [
            (compaction("n", "d", "d"), "d", true),
            (compaction("n", "d", "c"), "c", false),
            (compaction("n", "d", "a"), "a", true),
            (compaction("n", "d", "d"), "a", false),
            (compaction("n", "zz", "d"), "d", false),
            (compaction("n", "b", "b"), "b", false),
            (compaction("n", "d", "d"), "nothere", false),
        ];
        for (entry, keeps, ok) in cases {
            let index = Index::from_reader(TEXT.as_bytes()).unwrap();
            let mut tree = Tree::build(&index);
            let (lines, ids) = lines_of(&index, &tree, std::slice::from_ref(&entry)).unwrap();
            let mut full = TEXT.to_owned();
            for l in &lines {
                full.push_str(l);
                full.push('\n');
            }
            let new_index = Index::from_reader(full.as_bytes()).unwrap();
            let expect = Expectation {
                appended_ids: ids.clone(),
                compaction_keeps_from: Some(keeps.to_owned()),
                ..Expectation::removals(Default::default())
            };
            let general = validate::validate(&index, &new_index, &expect);
            let mine = prepare(index, &mut tree, lines, ids, Some(keeps));
            assert_eq!(general.is_ok(), ok, "{entry} {general:?}");
            assert_eq!(mine.is_ok(), ok, "{entry} {:?}", mine.as_ref().err());
            if let Ok((grown, appended)) = mine {
                assert_eq!(appended.bytes_after(), full.len() as u64);
                assert_eq!(grown.entries.len(), new_index.entries.len());
                let src = Index::from_reader(TEXT.as_bytes()).unwrap();
                let mut out = Vec::new();
                let n = copy_verified(TEXT.as_bytes(), &src, &appended, &mut out).unwrap();
                assert_eq!(n, full.len() as u64);
                assert_eq!(String::from_utf8(out).unwrap(), full);
            }
        }
    }

    #[test]
    fn reused_ids_and_torn_last_lines_are_refused() {
        let index = Index::from_reader(TEXT.as_bytes()).unwrap();
        let tree = Tree::build(&index);
        assert!(lines_of(&index, &tree, &[compaction("c", "d", "d")]).is_err());
        assert!(lines_of(&index, &tree, &[json!({"type":"custom"})]).is_err());
        let torn = format!("{TEXT}{{\"type\":\"mess");
        let index = Index::from_reader(torn.as_bytes()).unwrap();
        let tree = Tree::build(&index);
        let e = lines_of(&index, &tree, &[compaction("n", "d", "d")]).unwrap_err();
        assert!(e.to_string().contains("partially written"), "{e}");
    }

    #[test]
    fn a_changed_source_is_noticed_while_copying() {
        let index = Index::from_reader(TEXT.as_bytes()).unwrap();
        let mut tree = Tree::build(&index);
        let (lines, ids) = lines_of(&index, &tree, &[compaction("n", "d", "d")]).unwrap();
        let (_, appended) = prepare(index, &mut tree, lines, ids, Some("d")).unwrap();
        let src = Index::from_reader(TEXT.as_bytes()).unwrap();
        // Same length, other id; an edited unparsable line; a shorter file.
        for changed in [
            TEXT.replace("\"id\":\"c\"", "\"id\":\"x\""),
            TEXT.replace("\\ud800", "\\ud801"),
            TEXT[..TEXT.len() - 3].to_owned(),
        ] {
            let mut out = Vec::new();
            let e = copy_verified(changed.as_bytes(), &src, &appended, &mut out).unwrap_err();
            assert!(e.to_string().contains("changed while"), "{e}");
        }
    }
}
