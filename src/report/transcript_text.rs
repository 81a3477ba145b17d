//! The human report of the transcript commands (`prune-noreply`, `strip-images`, `compact`):
//! the directories the files are in, one table row per transcript (session key and file name,
//! status, count, size before and after), the reasons and notes under the table, and the
//! totals. Everything fits 80 columns wherever the output goes; full paths are in `--json`.

use std::fmt::Write as _;
use std::path::Path;

use comfy_table::Table;

use super::text::{middle, right, size, table, table_without_header, width, wrap};
use crate::transcript::job::{Outcome, Status};

/// The status word of an outcome and its reason, as the report and `--json` give them.
pub fn status_name(s: &Status) -> (&'static str, Option<&str>) {
    match s {
        Status::Unchanged => ("unchanged", None),
        Status::WouldChange => ("would-change", None),
        Status::Changed => ("changed", None),
        Status::Skipped(r) => ("skipped", Some(r)),
        Status::Damaged(r) => ("damaged", Some(r)),
        Status::Refused(r) => ("refused", Some(r)),
        Status::Locked(r) => ("locked", Some(r)),
        Status::Failed(r) => ("failed", Some(r)),
    }
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// What a run did, per transcript: `(outcome, session key, count)`.
pub type Row<'a> = (&'a Outcome, Option<&'a str>, usize);

/// The statuses that are problems, in the order the total line names them.
pub const PROBLEMS: [&str; 4] = ["damaged", "refused", "locked", "failed"];

/// The totals of a run, as the total line and `--json`'s `totals` give them. Counts and bytes
/// are what was written (or, in a preview, would be): a file that ended in any other status
/// counts with its size unchanged.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub files: usize,
    /// Files per status word.
    pub by_status: std::collections::BTreeMap<&'static str, usize>,
    pub count: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Freed by this run.
    pub freed: u64,
    /// Freed once `cleanup` removes old files this run left beside their successors.
    pub freed_later: u64,
    pub unparsable_lines: usize,
}

impl Totals {
    pub fn of(rows: &[Row]) -> Totals {
        let mut t = Totals {
            files: rows.len(),
            ..Totals::default()
        };
        let (mut now, mut later) = (0i128, 0i128);
        for (o, _, n) in rows {
            *t.by_status.entry(status_name(&o.status).0).or_default() += 1;
            t.count += n;
            t.bytes_before += o.bytes_before;
            t.bytes_after += o.bytes_after;
            t.unparsable_lines += o.unparsable_lines.len();
            let delta = i128::from(o.bytes_before) - i128::from(o.bytes_after);
            if o.old_file_kept {
                later += delta;
            } else {
                now += delta;
            }
        }
        t.freed = now.clamp(0, i128::from(u64::MAX)) as u64;
        t.freed_later = later.clamp(0, i128::from(u64::MAX)) as u64;
        t
    }

    pub fn with(&self, status: &str) -> usize {
        self.by_status.get(status).copied().unwrap_or(0)
    }
}

/// Write the report of a run. Unchanged files, and entries whose transcript does not exist
/// (a store of many entries has thousands), are counted but listed only when `verbose`.
pub fn render(
    out: &mut String,
    command: &str,
    mode: &str,
    count_header: &str,
    extra: Option<(usize, &str)>,
    rows: &[Row],
    verbose: bool,
) {
    let totals = Totals::of(rows);
    let listed: Vec<Row> = rows
        .iter()
        .filter(|(o, _, _)| verbose || !(o.status == Status::Unchanged || o.status.is_no_file()))
        .copied()
        .collect();
    let _ = writeln!(out, "{command}: {mode}");
    let prefix = write_dirs(out, &listed);
    let notes = write_table(out, count_header, &listed, prefix.as_deref());
    if !notes.is_empty() {
        let _ = writeln!(out, "Notes:");
        for (name, note) in notes {
            write_indented(out, "  ", &format!("{}: {note}", middle(&name, 70)));
        }
    }
    let no_file = if verbose {
        0
    } else {
        rows.iter()
            .filter(|(o, _, _)| o.status.is_no_file())
            .count()
    };
    let unlisted = Unlisted {
        unchanged: rows.len() - listed.len() - no_file,
        no_file,
    };
    write_totals(out, &totals, unlisted, count_header, extra);
}

/// The rows a report counts without listing them.
struct Unlisted {
    unchanged: usize,
    /// Entries whose transcript does not exist.
    no_file: usize,
}

/// The directories of the listed transcripts, and the session-key prefix the table leaves
/// out (returned).
fn write_dirs(out: &mut String, rows: &[Row]) -> Option<String> {
    let mut dirs: Vec<&Path> = Vec::new();
    for (o, _, _) in rows {
        if let Some(d) = o.path.parent().filter(|d| !d.as_os_str().is_empty())
            && !dirs.contains(&d)
        {
            dirs.push(d);
        }
    }
    for d in &dirs {
        write_indented(out, "", &format!("Transcripts in {}", d.display()));
    }
    let prefix = agent_prefix(rows);
    if let Some(p) = &prefix {
        write_indented(out, "", &format!("(session keys shown without \"{p}\")"));
    }
    prefix
}

/// Rows a table is built of at once: a store of many entries has a row each, and a table
/// holds kilobytes a row until it is printed.
const TABLE_CHUNK: usize = 1000;

/// The count, status and size cells of a row.
fn cells_of(o: &Outcome, n: usize) -> [String; 4] {
    [
        status_name(&o.status).0.to_string(),
        n.to_string(),
        size(o.bytes_before),
        size(o.bytes_after),
    ]
}

/// The table of listed transcripts; returns the notes to print below it (file name, note).
fn write_table(
    out: &mut String,
    count_header: &str,
    rows: &[Row],
    prefix: Option<&str>,
) -> Vec<(String, String)> {
    write_table_by(out, count_header, rows, prefix, TABLE_CHUNK)
}

/// [`write_table`], building at most `chunk` rows of the table at once.
fn write_table_by(
    out: &mut String,
    count_header: &str,
    rows: &[Row],
    prefix: Option<&str>,
    chunk: usize,
) -> Vec<(String, String)> {
    let count_cell = count_header.replace(' ', "\n");
    let header = ["transcript", "status", &count_cell, "before", "after"];
    // The first column gets what the others leave (each: widest cell + padding + border).
    let mut widest: [usize; 4] = std::array::from_fn(|i| {
        header[i + 1]
            .lines()
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0)
    });
    for (o, _, n) in rows {
        for (w, c) in widest.iter_mut().zip(cells_of(o, *n)) {
            *w = (*w).max(c.chars().count());
        }
    }
    let others: usize = widest.iter().map(|w| w + 3).sum();
    // A key or file name is cut (in the middle) only when it cannot fit the width at all.
    let first = width().saturating_sub(others + 4).max(12);
    let row_of = |(o, key, n): &Row| -> Vec<String> {
        let name = file_name(&o.path);
        let label = match key {
            Some(k) => {
                let k = prefix.and_then(|p| k.strip_prefix(p)).unwrap_or(k);
                format!("{}\n{}", middle(k, first), middle(&name, first))
            }
            None => middle(&name, first),
        };
        let mut row = vec![label];
        row.extend(cells_of(o, *n));
        row
    };
    let build = |chunk: &[Row], with_header: bool| {
        let mut t = if with_header {
            table(header.to_vec())
        } else {
            table_without_header()
        };
        for r in chunk {
            t.add_row(row_of(r));
        }
        t
    };
    match chunk_widths(rows, chunk, &build) {
        // One table: its lines, as it prints them.
        None => {
            let mut t = build(rows, true);
            right(&mut t, 2);
            let _ = writeln!(out, "{t}");
        }
        Some(widths) => write_chunked(out, rows, chunk, &widths, &build),
    }
    rows.iter()
        .flat_map(|(o, _, _)| notes_of(o, &file_name(&o.path)))
        .collect()
}

/// For a table of more than `chunk` rows whose columns all fit the width at their widest cell
/// (so that no cell wraps), the width of each column's widest cell as the table measures it;
/// `None` otherwise (the table is built whole).
fn chunk_widths(
    rows: &[Row],
    chunk: usize,
    build: &dyn Fn(&[Row], bool) -> Table,
) -> Option<Vec<u16>> {
    if rows.len() <= chunk {
        return None;
    }
    let mut widths: Vec<u16> = Vec::new();
    for (i, chunk) in rows.chunks(chunk).enumerate() {
        let t = build(chunk, i == 0);
        let w = t.column_max_content_widths();
        widths.resize(w.len().max(widths.len()), 0);
        for (m, w) in widths.iter_mut().zip(w) {
            *m = (*m).max(w);
        }
    }
    // Each column: content, a space either side, one border; and the last border.
    let total: usize = widths.iter().map(|w| usize::from(*w) + 3).sum::<usize>() + 1;
    (total <= width()).then_some(widths)
}

/// The table of [`write_table`], built `chunk` rows at a time. Every chunk ends with a
/// row of cells as wide as the widest of their column anywhere, so that each chunk has the
/// whole table's column widths; that row and the borders between chunks are left out, and the
/// lines are those of the whole table.
fn write_chunked(
    out: &mut String,
    rows: &[Row],
    chunk: usize,
    widths: &[u16],
    build: &dyn Fn(&[Row], bool) -> Table,
) {
    let sizing: Vec<String> = widths.iter().map(|w| "x".repeat(usize::from(*w))).collect();
    let chunks = rows.len().div_ceil(chunk);
    for (i, chunk) in rows.chunks(chunk).enumerate() {
        let mut t = build(chunk, i == 0);
        t.add_row(sizing.clone());
        right(&mut t, 2);
        let lines: Vec<String> = t.lines().collect();
        // Left out: the top border of a chunk after the first, the sizing row (the line
        // before the bottom border), and the bottom border of a chunk before the last.
        let from = usize::from(i > 0);
        for line in &lines[from..lines.len() - 2] {
            let _ = writeln!(out, "{line}");
        }
        if i + 1 == chunks {
            let _ = writeln!(out, "{}", lines[lines.len() - 1]);
        }
    }
}

/// The notes of one transcript: why it has its status, the unparsable lines kept, and the
/// job's own notes.
fn notes_of(o: &Outcome, name: &str) -> Vec<(String, String)> {
    let mut notes = Vec::new();
    if let Some(reason) = status_name(&o.status).1 {
        notes.push((name.to_owned(), reason.to_string()));
    }
    if !o.unparsable_lines.is_empty() {
        let lines: Vec<String> = o
            .unparsable_lines
            .iter()
            .map(|l| format!("{name}:{l}"))
            .collect();
        let (noun, verb) = if lines.len() == 1 {
            ("line", "it is")
        } else {
            ("lines", "they are")
        };
        notes.push((
            name.to_owned(),
            format!("kept unparsable {noun} as {verb}: {}", lines.join(", ")),
        ));
    }
    notes.extend(o.notes.iter().map(|n| (name.to_owned(), n.clone())));
    notes
}

/// The same totals as the JSON `totals`: files (skipped, and other problem statuses when
/// there are any), the count, bytes, unparsable lines kept.
fn write_totals(
    out: &mut String,
    totals: &Totals,
    unlisted: Unlisted,
    count_header: &str,
    extra: Option<(usize, &str)>,
) {
    let mut files = super::count(totals.files, "transcript", "transcripts");
    let mut not_listed = Vec::new();
    if unlisted.unchanged > 0 {
        not_listed.push(format!("{} unchanged", unlisted.unchanged));
    }
    if unlisted.no_file > 0 {
        not_listed.push(format!("{} without a file", unlisted.no_file));
    }
    if !not_listed.is_empty() {
        files += &format!(" ({}, not listed)", not_listed.join(", "));
    }
    let mut parts = vec![files, format!("{} skipped", totals.with("skipped"))];
    for problem in PROBLEMS {
        let k = totals.with(problem);
        if k > 0 {
            parts.push(format!("{k} {problem}"));
        }
    }
    let later = if totals.freed_later > 0 {
        format!(
            "; {} more once cleanup removes the old files",
            size(totals.freed_later)
        )
    } else {
        String::new()
    };
    let extra = extra.map_or_else(String::new, |(n, words)| format!(", {n} {words}"));
    write_indented(
        out,
        "",
        &format!(
            "Total: {}, {} {count_header}{extra}, {} → {} ({} freed{later}), {}",
            parts.join(", "),
            totals.count,
            size(totals.bytes_before),
            size(totals.bytes_after),
            size(totals.freed),
            super::count(
                totals.unparsable_lines,
                "unparsable line kept",
                "unparsable lines kept"
            )
        ),
    );
}

/// `agent:<id>:` when every row with a session key has that same prefix.
fn agent_prefix(rows: &[Row]) -> Option<String> {
    let mut prefix: Option<String> = None;
    for (_, key, _) in rows {
        let Some(k) = key else { continue };
        let p = crate::keys::parse_agent_key(k)
            .filter(|a| k.starts_with(&format!("agent:{}:", a.agent_id)))
            .map(|a| format!("agent:{}:", a.agent_id))?;
        match &prefix {
            Some(q) if *q != p => return None,
            _ => prefix = Some(p),
        }
    }
    prefix
}

/// Write `text` wrapped to 80 columns, every line after `indent`.
pub fn write_indented(out: &mut String, indent: &str, text: &str) {
    for line in wrap(text, width() - indent.len()) {
        let _ = writeln!(out, "{indent}{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_long_table_built_in_parts_is_the_whole_table() {
        let statuses = [
            Status::Unchanged,
            Status::WouldChange,
            Status::Skipped(crate::transcript::job::NO_FILE.into()),
            Status::Refused("no".into()),
            Status::Locked("pid 7".into()),
        ];
        let outcomes: Vec<Outcome> = (0..257u64)
            .map(|i| {
                let name = format!("{}{i}.jsonl", "s".repeat((i % 41) as usize));
                let mut o = Outcome::new(Path::new(&name), statuses[i as usize % 5].clone());
                o.bytes_before = i.pow(5);
                o.bytes_after = i * 3;
                o
            })
            .collect();
        let keys: Vec<String> = (0..257)
            .map(|i| match i % 4 {
                0 => format!("agent:main:cron:{}", "k".repeat(i % 67)),
                1 => format!("agent:main:telegram:direct:{i}"),
                2 => format!("agent:main:群组{}", "字".repeat(i % 30)),
                _ => String::new(),
            })
            .collect();
        let rows: Vec<Row> = outcomes
            .iter()
            .zip(&keys)
            .enumerate()
            .map(|(i, (o, k))| (o, (!k.is_empty()).then_some(k.as_str()), i * i * 37))
            .collect();
        // Sets of rows that fit the width (no cell wraps), and sets that do not.
        for n in [0, 1, 7, 50, 120, 257] {
            for take in [
                rows.iter()
                    .step_by(4)
                    .take(n)
                    .copied()
                    .collect::<Vec<Row>>(),
                rows.iter().take(n).copied().collect(),
            ] {
                let mut whole = String::new();
                let whole_notes =
                    write_table_by(&mut whole, "images replaced", &take, None, usize::MAX);
                for chunk in [1, 3, 10, 64] {
                    let mut parts = String::new();
                    let notes = write_table_by(&mut parts, "images replaced", &take, None, chunk);
                    assert_eq!(parts, whole, "{n} rows in parts of {chunk}");
                    assert_eq!(notes, whole_notes);
                }
            }
        }
    }

    #[test]
    fn every_line_fits_80_columns_with_long_paths_keys_and_notes() {
        let dir = format!(
            "/{}/agents/{}/sessions",
            "very-long-dir".repeat(8),
            "a".repeat(60)
        );
        let mut o = Outcome::new(
            PathBuf::from(format!("{dir}/{}.jsonl", "f".repeat(70))),
            Status::Refused("the rewrite failed validation: ".repeat(6).into()),
        );
        o.unparsable_lines = (1..60).collect();
        o.notes
            .push(format!("summarises 1000 messages; {}", "z".repeat(200)));
        o.bytes_before = 123_456_789_012;
        o.bytes_after = 1_234_567;
        let key = format!(
            "agent:{}:telegram:direct:{}",
            "b".repeat(64),
            "9".repeat(40)
        );
        let mut o2 = Outcome::new(PathBuf::from("short.jsonl"), Status::WouldChange);
        o2.unparsable_lines = vec![7].into();
        let rows: Vec<Row> = vec![(&o, Some(key.as_str()), 123_456), (&o2, None, 0)];
        let mut out = String::new();
        render(
            &mut out,
            "strip-images",
            "preview",
            "images replaced",
            Some((7, "media references replaced")),
            &rows,
            false,
        );
        for line in out.lines() {
            assert!(
                line.chars().count() <= 80,
                "{} cols: {line}",
                line.chars().count()
            );
        }
        assert!(out.contains("Transcripts in\n  /very-long-dir"), "{out}");
        let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains("refused"), "{out}");
        assert!(
            flat.contains("short.jsonl: kept unparsable line as it is: short.jsonl:7"),
            "{out}"
        );
        assert!(
            flat.contains("Total: 2 transcripts, 0 skipped, 1 refused, 123456 images replaced, 7 media references replaced,"),
            "{out}"
        );
    }

    /// Entries whose transcript does not exist (thousands in a big store) are counted, not
    /// listed, unless `verbose`; every other skip is listed.
    #[test]
    fn entries_without_a_file_are_counted_and_listed_only_when_verbose() {
        let gone: Vec<Outcome> = (0..3)
            .map(|i| {
                Outcome::new(
                    PathBuf::from(format!("/s/gone{i}.jsonl")),
                    Status::Skipped(crate::transcript::job::NO_FILE.into()),
                )
            })
            .collect();
        let outside = Outcome::new(
            PathBuf::from("/elsewhere/out.jsonl"),
            Status::Skipped("its transcript is outside the sessions directory".into()),
        );
        let same = Outcome::new(PathBuf::from("/s/same.jsonl"), Status::Unchanged);
        let mut rows: Vec<Row> = gone.iter().map(|o| (o, Some("agent:main:k"), 0)).collect();
        rows.push((&outside, Some("agent:main:o"), 0));
        rows.push((&same, Some("agent:main:s"), 0));
        let text = |verbose| {
            let mut out = String::new();
            render(
                &mut out,
                "prune-noreply",
                "preview",
                "removed",
                None,
                &rows,
                verbose,
            );
            out.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        let quiet = text(false);
        assert!(!quiet.contains("gone"), "{quiet}");
        assert!(quiet.contains("out.jsonl"), "{quiet}");
        assert!(
            quiet.contains(
                "Total: 5 transcripts (1 unchanged, 3 without a file, not listed), 4 skipped"
            ),
            "{quiet}"
        );
        let verbose = text(true);
        for name in ["gone0.jsonl", "gone2.jsonl", "same.jsonl", "out.jsonl"] {
            assert!(verbose.contains(name), "{verbose}");
        }
        assert!(
            verbose.contains("Total: 5 transcripts, 4 skipped"),
            "{verbose}"
        );
    }
}
