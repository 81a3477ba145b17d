//! Full JSON values of selected entries, read back by the line numbers the index recorded
//! (for planners that need whole messages, such as `compact`): from a file by the byte ranges
//! of its index ([`EntryReader::open`]), or from any other [`LineSource`] (the transcript rows
//! of an agent database, one row per line).
//!
//! Each line is re-read, parsed with `jsjson::parse`, and checked against the index: a line
//! whose id no longer matches means the transcript changed since it was indexed, which is an
//! error rather than a silent mix of two versions.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::Index;

/// The values of `entries` (entry indices of `index`), in the order given.
pub fn read_entries(path: &Path, index: &Index, entries: &[usize]) -> Result<Vec<Value>> {
    let mut reader = EntryReader::open(path)?;
    entries.iter().map(|&i| reader.read(index, i)).collect()
}

/// Where the lines of an indexed transcript are read back from.
pub trait LineSource {
    /// Line `n` of `index` (with its line ending, if any) into `buf`; with `light`, the
    /// base64 payloads the index recorded in it are left out (their strings read as `""`).
    fn read_line(
        &mut self,
        index: &Index,
        n: usize,
        light: bool,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()>;
}

/// An indexed transcript whose entries a planner reads back (a file, or a session's rows).
pub trait Transcript {
    /// A reader of its entries; `light` for readers that never look at pictures (see
    /// [`EntryReader::open_light`]).
    fn reader(&self, light: bool) -> Result<EntryReader<'_>>;
}

impl Transcript for &Path {
    fn reader(&self, light: bool) -> Result<EntryReader<'_>> {
        if light {
            EntryReader::open_light(self)
        } else {
            EntryReader::open(self)
        }
    }
}

/// A transcript up to this size is read whole, in one read, and its bytes are kept while it
/// is worked on (see [`Snapshot`]); a longer one is streamed, and read again when needed.
pub const SNAPSHOT_MAX: u64 = 4 << 20;

/// A buffer for a transcript's bytes: the thread's own, taken by [`SnapshotBuf::take`] and
/// given back when dropped, so that a run over many files reuses one allocation per thread. (A
/// buffer allocated per file goes back to the system when freed, and its pages are faulted in
/// and cleared again for the next file: on the benchmark store that cost more system time than
/// the second read it spares.)
pub struct SnapshotBuf(Vec<u8>);

thread_local! {
    static SNAPSHOT_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl SnapshotBuf {
    /// The thread's buffer, empty (a new one if it is taken already).
    pub fn take() -> SnapshotBuf {
        SnapshotBuf(SNAPSHOT_BUF.take())
    }
}

impl std::ops::Deref for SnapshotBuf {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl std::ops::DerefMut for SnapshotBuf {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

impl Drop for SnapshotBuf {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.0);
        if buf.capacity() as u64 <= SNAPSHOT_MAX + 1 {
            buf.clear();
            SNAPSHOT_BUF.set(buf);
        }
    }
}

/// A transcript's bytes as one read of its file found them, held in memory so that later
/// readers (a planner reading entries back, the size of a patched rewrite) see exactly the
/// bytes its index was built from without reading the file again. `path` names it in errors.
#[derive(Clone, Copy)]
pub struct Snapshot<'a> {
    pub path: &'a Path,
    pub bytes: &'a [u8],
}

impl Transcript for Snapshot<'_> {
    fn reader(&self, light: bool) -> Result<EntryReader<'_>> {
        let name = self.path.display().to_string();
        Ok(EntryReader::new(name, SliceLines(self.bytes), light))
    }
}

/// The lines of a [`Snapshot`] by the byte ranges of its index.
struct SliceLines<'a>(&'a [u8]);

impl LineSource for SliceLines<'_> {
    fn read_line(
        &mut self,
        index: &Index,
        n: usize,
        light: bool,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        if light && !index.payloads_of(n).is_empty() {
            super::read_line_without(self.0, index, n, buf, |_| true)?;
            return Ok(());
        }
        let line = &index.lines[n];
        buf.resize(line.len as usize, 0);
        super::ReadAt::read_exact_at(self.0, buf, line.start)
    }
}

/// Reads entries one at a time into one reused buffer, so that a pass over many entries holds
/// one line at a time.
pub struct EntryReader<'a> {
    lines: Box<dyn LineSource + 'a>,
    /// How errors name the transcript.
    name: String,
    buf: Vec<u8>,
    /// Leave the base64 payloads of image blocks out (their `data` reads as `""`).
    light: bool,
}

/// The lines of a file by the byte ranges of its index. Lines are read [`WINDOW`] bytes at a
/// time (a pass over neighbouring lines makes one read per window, not one per line); a
/// window never reaches into a line whose payloads are left out, which is read piece by piece
/// around them instead.
struct FileLines {
    file: File,
    /// The bytes of the file from `window_start` on, as last read.
    window: Vec<u8>,
    window_start: u64,
}

/// How much a window reads at most (a longer line is read whole).
const WINDOW: u64 = 256 << 10;

impl EntryReader<'static> {
    /// Open `path` (never through a symlink).
    pub fn open(path: &Path) -> Result<EntryReader<'static>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let lines = FileLines {
            file,
            window: Vec::new(),
            window_start: 0,
        };
        Ok(EntryReader::new(path.display().to_string(), lines, false))
    }

    /// Like [`EntryReader::open`], for readers that never look at pictures (token estimates,
    /// summaries): the base64 payloads the index recorded are left out before parsing, so an
    /// image block's `data` reads as `""` and its bytes are neither scanned nor copied.
    pub fn open_light(path: &Path) -> Result<EntryReader<'static>> {
        Ok(EntryReader {
            light: true,
            ..EntryReader::open(path)?
        })
    }
}

impl<'a> EntryReader<'a> {
    /// A reader of the lines of `lines`, named `name` in errors.
    pub fn new(name: String, lines: impl LineSource + 'a, light: bool) -> EntryReader<'a> {
        EntryReader {
            lines: Box::new(lines),
            name,
            buf: Vec::new(),
            light,
        }
    }

    /// The value of entry `i` of `index`; an error when the line no longer holds that entry.
    pub fn read(&mut self, index: &Index, i: usize) -> Result<Value> {
        self.fetch_line(index, i)?;
        let v = self.checked(index, i, crate::jsjson::parse(self.body()), |v| {
            v.get("id").and_then(Value::as_str)
        })?;
        // Keep the buffer of a huge line only as long as it is needed.
        if self.buf.capacity() > 1 << 20 {
            self.buf = Vec::new();
        }
        Ok(v)
    }

    /// [`EntryReader::read`] with another parser of the line, whose value may borrow the
    /// line's bytes (it lives until the next read): e.g. one that keeps only some members.
    /// `id` reads the entry's `id` from the value.
    pub fn read_borrowed<'s, T>(
        &'s mut self,
        index: &Index,
        i: usize,
        parse: impl FnOnce(&'s [u8]) -> serde_json::Result<T>,
        id: impl FnOnce(&T) -> Option<&str>,
    ) -> Result<T> {
        self.fetch_line(index, i)?;
        let this: &'s Self = self;
        this.checked(index, i, parse(this.body()), id)
    }

    /// Read entry `i`'s line into the buffer.
    fn fetch_line(&mut self, index: &Index, i: usize) -> Result<()> {
        let e = &index.entries[i];
        // A huge line read by `read_borrowed` is let go of here.
        if self.buf.capacity() > 1 << 20 {
            self.buf = Vec::new();
        }
        self.lines
            .read_line(index, e.line(), self.light, &mut self.buf)
            .with_context(|| format!("cannot read line {} of {}", e.line + 1, self.name))
    }

    /// The line in the buffer, without its line break.
    fn body(&self) -> &[u8] {
        let raw = &self.buf[..];
        let body = raw.strip_suffix(b"\n").unwrap_or(raw);
        body.strip_suffix(b"\r").unwrap_or(body)
    }

    /// The parse of entry `i`'s line, as an error that names the line when it failed or does
    /// not hold the entry the index has there (its `id`, read by `id`, differs).
    fn checked<T>(
        &self,
        index: &Index,
        i: usize,
        parsed: serde_json::Result<T>,
        id: impl FnOnce(&T) -> Option<&str>,
    ) -> Result<T> {
        let e = &index.entries[i];
        let v = match parsed {
            Ok(v) => v,
            Err(err) if crate::jsjson::is_too_deep(&err) => {
                return Err(crate::jsjson::TooDeep { line: e.line() + 1 }.into());
            }
            Err(err) => {
                return Err(anyhow::Error::new(err).context(format!(
                    "line {} of {} does not parse",
                    e.line + 1,
                    self.name
                )));
            }
        };
        if id(&v) != e.id.as_deref() {
            bail!(
                "{} changed while it was being read (line {})",
                self.name,
                e.line + 1
            );
        }
        Ok(v)
    }
}

impl LineSource for FileLines {
    /// A light reader reads the bytes around the payloads only: their text is neither copied
    /// from the page cache nor scanned.
    fn read_line(
        &mut self,
        index: &Index,
        n: usize,
        light: bool,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        if light && !index.payloads_of(n).is_empty() {
            super::read_line_without(&self.file, index, n, buf, |_| true)?;
            return Ok(());
        }
        let line = &index.lines[n];
        if line.len > WINDOW {
            // A long line is read on its own, straight into the buffer.
            buf.resize(line.len as usize, 0);
            return self.file.read_exact_at(buf, line.start);
        }
        let end = line.start + line.len;
        let in_window =
            line.start >= self.window_start && end <= self.window_start + self.window.len() as u64;
        if !in_window {
            // Up to WINDOW bytes from this line on, stopping before the next line whose
            // payloads a light reader leaves out.
            let mut stop = (line.start + WINDOW).min(index.size);
            if light {
                let next = index.payloads.partition_point(|p| (p.line as usize) <= n);
                if let Some(p) = index.payloads.get(next) {
                    stop = stop.min(index.lines[p.line as usize].start).max(end);
                }
            }
            // (The file may end before the index does: a caller may have indexed lines it
            // is about to append. Only this line's bytes must be there.)
            self.window.resize((stop - line.start) as usize, 0);
            let mut got = 0;
            while got < self.window.len() {
                match self
                    .file
                    .read_at(&mut self.window[got..], line.start + got as u64)
                {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            self.window.truncate(got);
            self.window_start = line.start;
            if (got as u64) < line.len {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        let from = (line.start - self.window_start) as usize;
        buf.clear();
        buf.extend_from_slice(&self.window[from..from + line.len as usize]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_values_by_index_and_notices_changes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let text = "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}\n\
{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"message\":{\"role\":\"user\",\"content\":\"hé\"}}\r\n\
{\"type\":\"custom\",\"id\":\"b\",\"parentId\":\"a\",\"n\":1.50}";
        std::fs::write(&p, text).unwrap();
        let index = Index::from_path(&p, None).unwrap();
        let vals = read_entries(&p, &index, &[2, 1]).unwrap();
        assert_eq!(vals[0]["id"], "b");
        assert_eq!(vals[1]["message"]["content"], "hé");
        std::fs::write(&p, text.replace("\"id\":\"a\"", "\"id\":\"x\"")).unwrap();
        assert!(read_entries(&p, &index, &[1]).is_err());
        // Bytes held in memory that end before the index does are an error, not a short line.
        let cut = &text.as_bytes()[..text.len() - 4];
        let snapshot = Snapshot {
            path: &p,
            bytes: cut,
        };
        let mut r = snapshot.reader(false).unwrap();
        assert_eq!(r.read(&index, 1).unwrap()["id"], "a");
        let err = format!("{:#}", r.read(&index, 2).unwrap_err());
        assert!(err.contains("cannot read line 3 of"), "{err}");
    }

    #[test]
    fn a_thread_reuses_its_snapshot_buffer_unless_it_grew_too_large() {
        std::thread::spawn(|| {
            let mut b = SnapshotBuf::take();
            b.extend_from_slice(&[7; 5000]);
            let at = b.as_ptr();
            // Taken while it is held: another, new buffer.
            let other = SnapshotBuf::take();
            assert_eq!(other.capacity(), 0);
            drop(other);
            drop(b);
            let again = SnapshotBuf::take();
            assert!(again.is_empty() && again.capacity() >= 5000);
            assert_eq!(again.as_ptr(), at, "the same allocation");
            drop(again);
            let mut big = SnapshotBuf::take();
            big.resize(SNAPSHOT_MAX as usize + 2, 0);
            drop(big);
            assert_eq!(
                SnapshotBuf::take().capacity(),
                0,
                "a buffer over the limit is freed"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn windows_give_every_line_as_it_is_in_any_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let b64 = "QUJD".repeat(2000);
        let mut text = String::from("{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n");
        for i in 0..400 {
            let parent = if i == 0 {
                "null".to_owned()
            } else {
                format!("\"e{}\"", i - 1)
            };
            let body = match i % 7 {
                0 => format!(r#"{{"role":"user","content":[{{"type":"image","data":"{b64}"}}]}}"#),
                3 => format!(r#"{{"role":"user","content":"{}"}}"#, "x".repeat(300 << 10)),
                _ => {
                    format!(r#"{{"role":"assistant","content":[{{"type":"text","text":"{i}"}}]}}"#)
                }
            };
            text.push_str(&format!(
                r#"{{"type":"message","id":"e{i}","parentId":{parent},"message":{body}}}"#
            ));
            text.push('\n');
        }
        std::fs::write(&p, &text).unwrap();
        let index = Index::from_path(&p, None).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut order: Vec<usize> = (1..index.entries.len()).collect();
        order.extend((1..index.entries.len()).rev());
        order.extend((1..index.entries.len()).step_by(5));
        let bytes = std::fs::read(&p).unwrap();
        let snapshot = Snapshot {
            path: &p,
            bytes: &bytes,
        };
        for (light, in_memory) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut r = match (light, in_memory) {
                (_, true) => snapshot.reader(light).unwrap(),
                (true, false) => EntryReader::open_light(&p).unwrap(),
                (false, false) => EntryReader::open(&p).unwrap(),
            };
            for &i in &order {
                let mut want =
                    crate::jsjson::parse(lines[index.entries[i].line()].as_bytes()).unwrap();
                if light && i % 7 == 1 {
                    want["message"]["content"][0]["data"] = "".into();
                }
                assert_eq!(
                    r.read(&index, i).unwrap(),
                    want,
                    "entry {i}, light {light}, in memory {in_memory}"
                );
            }
        }
    }

    #[test]
    fn a_reader_takes_lines_of_any_size_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let big = "x".repeat(3 << 20);
        let text = format!(
            "{{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"t\",\"cwd\":\"/\"}}\n\
{{\"type\":\"custom\",\"id\":\"a\",\"parentId\":null,\"data\":\"{big}\"}}\n\
{{\"type\":\"custom\",\"id\":\"b\",\"parentId\":\"a\",\"data\":1}}\n"
        );
        std::fs::write(&p, &text).unwrap();
        let index = Index::from_path(&p, None).unwrap();
        let mut r = EntryReader::open(&p).unwrap();
        assert_eq!(
            r.read(&index, 1).unwrap()["data"].as_str().unwrap().len(),
            big.len()
        );
        assert!(
            r.buf.capacity() <= 1 << 20,
            "a huge line's buffer is not kept"
        );
        assert_eq!(r.read(&index, 2).unwrap()["data"], 1);
        assert_eq!(r.read(&index, 1).unwrap()["id"], "a");
        // Not through a symlink.
        let link = dir.path().join("l.jsonl");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(EntryReader::open(&link).is_err());
    }
}
