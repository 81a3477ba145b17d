//! Full JSON values of selected entries, read back from the file by the byte ranges the index
//! recorded (for planners that need whole messages, such as `compact`).
//!
//! Each line is re-read, parsed with `jsjson::parse`, and checked against the index: a line
//! whose id no longer matches means the file changed since it was indexed, which is an error
//! rather than a silent mix of two versions.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::Index;

/// The values of `entries` (entry indices of `index`), in the order given.
pub fn read_entries(path: &Path, index: &Index, entries: &[usize]) -> Result<Vec<Value>> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let mut buf = Vec::new();
    let mut out = Vec::with_capacity(entries.len());
    for &i in entries {
        let e = &index.entries[i];
        let line = &index.lines[e.line];
        buf.resize(line.len as usize, 0);
        read_at(&mut file, line.start, &mut buf)
            .with_context(|| format!("cannot read line {} of {}", e.line + 1, path.display()))?;
        let body = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        let v = crate::jsjson::parse(body)
            .with_context(|| format!("line {} of {} does not parse", e.line + 1, path.display()))?;
        if v.get("id").and_then(Value::as_str) != e.id.as_deref() {
            bail!(
                "{} changed while it was being read (line {})",
                path.display(),
                e.line + 1
            );
        }
        out.push(v);
    }
    Ok(out)
}

fn read_at(file: &mut File, start: u64, buf: &mut [u8]) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(buf)
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
    }
}
