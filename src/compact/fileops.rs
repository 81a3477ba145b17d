//! The file lists of a compaction, as the runtime computes them: `read`/`write`/`edit` tool
//! calls with a string `arguments.path`; modified = edited ∪ written, read = read − modified,
//! both sorted by UTF-16 code units, merged with the previous compaction's `details` unless it
//! came from a hook; and the `<read-files>` / `<modified-files>` blocks appended to summaries.
//! The blocks name every file (they are what tells the model, after the compaction, which
//! files the summarised work touched), even when that makes the summary longer than the few
//! KB its other sections are capped to.

use std::collections::BTreeSet;

use serde_json::Value;

use super::str_field;
use super::summary::tool_calls;
use super::view::View;

fn utf16_sorted(set: BTreeSet<String>) -> Vec<String> {
    let mut v: Vec<String> = set.into_iter().collect();
    v.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    v
}

/// `read`/`write`/`edit` paths of the summarised messages, merged with the previous lists.
pub fn file_lists(all: &[&Value], previous: Option<&Value>) -> (Vec<String>, Vec<String>) {
    let mut ops = FileOps::default();
    for m in all {
        ops.push(*m);
    }
    ops.finish(previous)
}

/// The paths of [`file_lists`], gathered one message at a time.
#[derive(Debug, Clone, Default)]
pub struct FileOps {
    read: BTreeSet<String>,
    modified: BTreeSet<String>,
}

impl FileOps {
    /// Take the `read`/`write`/`edit` calls of one message.
    pub fn push<N: View>(&mut self, m: &N) {
        for b in tool_calls(m).filter(|b| str_field(*b, "type") == Some("toolCall")) {
            let Some(path) = b
                .field("arguments")
                .and_then(|a| str_field(a, "path"))
                .filter(|p| !p.is_empty())
            else {
                continue;
            };
            match str_field(b, "name") {
                Some("read") => {
                    self.read.insert(path.to_owned());
                }
                Some("write" | "edit") => {
                    self.modified.insert(path.to_owned());
                }
                _ => {}
            }
        }
    }

    /// Add files read and modified that were named elsewhere (the file blocks of a carried
    /// summary).
    pub fn add(&mut self, read: Vec<String>, modified: Vec<String>) {
        self.read.extend(read);
        self.modified.extend(modified);
    }

    /// Merge the previous compaction's lists (unless it came from a hook) and return
    /// (read − modified, modified), sorted by UTF-16 code units.
    pub fn finish(mut self, previous: Option<&Value>) -> (Vec<String>, Vec<String>) {
        if let Some(p) =
            previous.filter(|p| p.field("fromHook").and_then(View::as_bool) != Some(true))
        {
            let list = |k: &str| {
                p.field("details")
                    .and_then(|d| d.get(k))
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            };
            self.read.extend(list("readFiles"));
            self.modified.extend(list("modifiedFiles"));
        }
        let modified = self.modified;
        self.read.retain(|f| !modified.contains(f));
        (utf16_sorted(self.read), utf16_sorted(modified))
    }
}

fn file_block(tag: &str, files: &[String]) -> Option<String> {
    if files.is_empty() {
        return None;
    }
    Some(format!("<{tag}>\n{}\n</{tag}>", files.join("\n")))
}

/// `formatFileOperations`: the file blocks appended to a summary ("" when both are empty).
pub fn format_file_operations(read: &[String], modified: &[String]) -> String {
    let sections: Vec<String> = [
        file_block("read-files", read),
        file_block("modified-files", modified),
    ]
    .into_iter()
    .flatten()
    .collect();
    if sections.is_empty() {
        String::new()
    } else {
        format!("\n\n{}", sections.join("\n\n"))
    }
}
