//! `sessions.json`: load (refusing what does not parse), OpenClaw's load-time normalisation,
//! and saving exactly like `JSON.stringify(store, null, 2)` through `fsutil`.
//!
//! Deliberate difference from OpenClaw: an unparsable or non-object store is refused
//! (`Refusal::Unsafe`, naming the file and the line:column) instead of being read as `{}` and
//! then overwritten. A missing store is an empty store, as in OpenClaw.

pub mod blobs;
pub mod delivery;
pub mod normalize;
pub mod paths;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::exit::Refusal;
use crate::fsutil::Confined;
use crate::json::Json;

/// A session store in memory: session key → entry, in JavaScript property order. Each entry is
/// held compactly ([`Json`]): a store may have hundreds of thousands.
pub type Store = indexmap::IndexMap<String, Json>;

/// A loaded store plus what is needed to save it the way OpenClaw does.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub store: Store,
    /// Whether the load changed nothing (normalisation): saving such a store writes its text
    /// again only if the text differs (see [`saves_as_file`]), as OpenClaw skips a save of the
    /// same text.
    pub unchanged: bool,
    /// Whether the file existed.
    pub existed: bool,
    /// Size and modification time when it was read (`None` when missing).
    pub stamp: Option<Stamp>,
}

/// Size, modification time, inode and change time of a file: what a concurrent writer
/// changes. The inode and ctime matter where file times are coarse (a jiffy on many kernels):
/// a writer that replaces the store with one of the same size within the same tick (a bumped
/// `updatedAt`) still gives it a new inode.
pub type Stamp = (u64, Option<std::time::SystemTime>, u64, i64, i64);

/// The current stamp of `path` (not following a symlink); `None` when it does not exist.
pub fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((
        m.len(),
        m.modified().ok(),
        m.ino(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// Stores up to this size are read whole, then parsed (the faster way); larger ones are parsed
/// as they are read, so that their text (tens of megabytes for a store of hundreds of
/// thousands of entries) is never held beside the store.
const READ_WHOLE_UP_TO: u64 = 4 << 20;

/// Load and normalise a store. Missing file → empty store. Unparsable or non-object → refused.
pub fn load(path: &Path) -> Result<Loaded> {
    load_reading_whole_up_to(path, READ_WHOLE_UP_TO)
}

fn load_reading_whole_up_to(path: &Path, whole_up_to: u64) -> Result<Loaded> {
    let before = stamp(path);
    let Some(mut file) = open_store(path)? else {
        return Ok(Loaded {
            path: path.to_path_buf(),
            store: Store::new(),
            unchanged: false,
            existed: false,
            stamp: None,
        });
    };
    let cannot_read = || format!("cannot read {}", path.display());
    let (store, unchanged) = match file.metadata().with_context(cannot_read)?.len() {
        len if len > whole_up_to => parse_reader(path, std::io::BufReader::new(file))?,
        _ => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes).with_context(cannot_read)?;
            parse(path, &bytes)?
        }
    };
    Ok(Loaded {
        path: path.to_path_buf(),
        store,
        unchanged,
        existed: true,
        stamp: before,
    })
}

/// The store file at `path`, open to read; `None` when it does not exist. A FIFO or device
/// would block or mislead the read, and a directory is not a store: refused. (A symlinked
/// store may be read for a preview; writing one is refused by `cleanup`.)
fn open_store(path: &Path) -> Result<Option<std::fs::File>> {
    if let Ok(m) = std::fs::symlink_metadata(path)
        && !m.file_type().is_file()
        && !m.file_type().is_symlink()
    {
        return Err(Refusal::Unsafe(format!(
            "refusing to touch {}: it is not a regular file",
            path.display()
        ))
        .into());
    }
    match std::fs::File::open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// What the transcript commands read of a store entry: its key, and the session id and file
/// that lead to its transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryFiles {
    pub key: String,
    /// `sessionId` when it is a non-empty string (see [`session_id`]).
    pub session_id: Option<Box<str>>,
    /// `sessionFile` when it is a string (see [`session_file`]).
    pub session_file: Option<Box<str>>,
}

/// What an [`EntryFiles`] keeps of an entry besides its key: its `sessionId` and `sessionFile`.
type FileFields = (Option<Box<str>>, Option<Box<str>>);

impl EntryFiles {
    fn of(key: String, entry: &Json) -> EntryFiles {
        let (session_id, session_file) = file_fields(entry);
        EntryFiles {
            key,
            session_id,
            session_file,
        }
    }

    /// The transcript the entry points at, as [`entry_transcript`] resolves it.
    pub fn transcript(&self, sessions_dir: &Path) -> Option<PathBuf> {
        paths::transcript_in_dir(
            self.session_id.as_deref()?,
            self.session_file.as_deref(),
            sessions_dir,
        )
    }
}

fn file_fields(entry: &Json) -> FileFields {
    (
        session_id(entry).map(Box::from),
        session_file(entry).map(Box::from),
    )
}

/// The entries of a store as [`load`] gives them (the same normalisation, order and
/// refusals), keeping only what leads to each transcript. The store is read entry by entry:
/// a store of hundreds of thousands of entries is never held as JSON values, only these
/// records (and, up to 4 MB, its text). Missing file → no entries.
pub fn load_entry_files(path: &Path) -> Result<Vec<EntryFiles>> {
    load_entry_files_reading_whole_up_to(path, READ_WHOLE_UP_TO)
}

fn load_entry_files_reading_whole_up_to(path: &Path, whole_up_to: u64) -> Result<Vec<EntryFiles>> {
    let Some(mut file) = open_store(path)? else {
        return Ok(Vec::new());
    };
    let cannot_read = || format!("cannot read {}", path.display());
    let dir = store_dir(path);
    // As `load` reads: a large store is parsed as it is read, its text never held whole.
    let streamed = match file.metadata().with_context(cannot_read)?.len() {
        len if len > whole_up_to => {
            let reader = std::io::BufReader::new(file);
            streamed_entry_files(&mut serde_json::Deserializer::from_reader(reader), &dir)
        }
        _ => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes).with_context(cannot_read)?;
            let text = std::str::from_utf8(&bytes).ok();
            text.and_then(|t| {
                streamed_entry_files(&mut serde_json::Deserializer::from_str(t), &dir)
            })
        }
    };
    if let Some(entries) = streamed {
        return Ok(entries);
    }
    // What the streamed read does not take (not an object, not UTF-8, …): the whole load, for
    // its exact result or refusal.
    Ok(load(path)?
        .store
        .into_iter()
        .map(|(key, entry)| EntryFiles::of(key, &entry))
        .collect())
}

/// The entries of a store's text read one at a time, each normalised as [`parse`] normalises
/// it (hydrated, then [`normalize::normalize_entry`]); `None` when the text is not an object
/// of valid UTF-8 JSON. A key given twice keeps its first place and its last value, and the
/// keys end in JavaScript's order, as `JSON.parse` gives them.
fn streamed_entry_files<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
    dir: &Path,
) -> Option<Vec<EntryFiles>> {
    use serde::de::{Deserializer as _, MapAccess, Visitor};
    type Kept = indexmap::IndexMap<String, Option<FileFields>>;
    struct Entries<'a>(&'a Path);
    impl<'de> Visitor<'de> for Entries<'_> {
        type Value = Kept;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kept, A::Error> {
            let mut kept = Kept::new();
            while let Some(key) = map.next_key::<String>()? {
                let entry: Value = map.next_value()?;
                // A dropped entry keeps its key's place: a later duplicate takes it.
                let files = normalized_entry(entry, self.0).0.map(|e| file_fields(&e));
                kept.insert(key, files);
            }
            Ok(kept)
        }
    }
    let kept = de.deserialize_map(Entries(dir)).ok()?;
    de.end().ok()?;
    // Collected into room for every key, not grown by doubling: a store may have hundreds of
    // thousands.
    let mut members = Vec::with_capacity(kept.len());
    members.extend(kept.into_iter().filter_map(|(k, files)| Some((k, files?))));
    Some(
        crate::jsjson::in_js_key_order(members)
            .into_iter()
            .map(|(key, (session_id, session_file))| EntryFiles {
                key,
                session_id,
                session_file,
            })
            .collect(),
    )
}

/// One entry as it is loaded: JavaScript's key order, its skills prompt read back from its
/// blob, then [`normalize::normalize_entry`]. `None` when the runtime drops it; with whether
/// the load changed it.
fn normalized_entry(mut entry: Value, sessions_dir: &Path) -> (Option<Json>, bool) {
    crate::jsjson::normalize_key_order(&mut entry);
    let hydrated = blobs::hydrate_entry(&mut entry, sessions_dir);
    match normalize::normalize_entry(&mut entry) {
        None => (None, true),
        Some(changed) => (Some(Json::from_value(entry)), changed || hydrated),
    }
}

/// Parse and normalise the bytes of the store at `path` (named in refusals). Returns the
/// store and whether normalisation changed nothing (see [`Loaded::unchanged`]).
///
/// The store is built entry by entry, each held compactly ([`Json`]) as soon as it is
/// normalised: a store of hundreds of thousands of entries is never held as JSON values.
pub fn parse(path: &Path, bytes: &[u8]) -> Result<(Store, bool)> {
    match crate::jsjson::deserialize(bytes, Entries(&store_dir(path))) {
        Ok((store, changed)) => Ok((store, !changed)),
        Err(_) => Err(refusal(path, bytes)),
    }
}

/// [`parse`] of the store text `r` reads. What does not parse is read again whole, for the
/// place of the error in the refusal.
fn parse_reader(path: &Path, r: impl std::io::Read) -> Result<(Store, bool)> {
    let mut de = serde_json::Deserializer::from_reader(r);
    let read = serde::de::DeserializeSeed::deserialize(Entries(&store_dir(path)), &mut de)
        .and_then(|read| de.end().map(|()| read));
    match read {
        Ok((store, changed)) => Ok((store, !changed)),
        Err(e) if e.is_io() => {
            Err(anyhow::Error::from(e).context(format!("cannot read {}", path.display())))
        }
        Err(_) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            Err(refusal(path, &bytes))
        }
    }
}

/// The directory of the store at `path` (its symlinks resolved), where its prompt blobs are.
fn store_dir(path: &Path) -> PathBuf {
    paths::resolve(path)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Why the store text `bytes` at `path` is refused: where it is not valid JSON, or what its
/// top-level value is instead of an object.
fn refusal(path: &Path, bytes: &[u8]) -> anyhow::Error {
    match crate::jsjson::parse(bytes) {
        Err(e) => Refusal::Unsafe(format!(
            "refusing to touch {}: it is not valid JSON ({} at line {} column {}); OpenClaw would treat it as an empty store and overwrite it",
            path.display(),
            describe(&e),
            e.line(),
            e.column()
        ))
        .into(),
        Ok(value) if !value.is_object() => Refusal::Unsafe(format!(
            "refusing to touch {}: the top-level JSON value is {} at line 1 column 1, not an object; OpenClaw would treat it as an empty store and overwrite it",
            path.display(),
            kind_name(&value)
        ))
        .into(),
        Ok(_) => anyhow::anyhow!("cannot read {}: its entries could not be read", path.display()),
    }
}

/// Reads a store's top-level object into a [`Store`], normalising each entry as it is read
/// ([`normalized_entry`]); with whether the load changed anything. A key given twice keeps its
/// first place and its last value, and the keys end in JavaScript's order, as `JSON.parse`
/// gives them.
struct Entries<'a>(&'a Path);

impl<'de> serde::de::DeserializeSeed<'de> for Entries<'_> {
    type Value = (Store, bool);
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(Store, bool), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Entries<'_> {
    type Value = (Store, bool);
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<(Store, bool), A::Error> {
        let mut store = Store::new();
        let (mut changed, mut dropped) = (false, false);
        while let Some(key) = map.next_key::<String>()? {
            let entry = map.next_value_seed(crate::jsjson::Exact)?;
            let (entry, c) = normalized_entry(entry, self.0);
            changed |= c;
            // A dropped entry keeps its key's place (null, never an entry once normalised):
            // a later duplicate takes it.
            dropped |= entry.is_none();
            store.insert(key, entry.unwrap_or_default());
        }
        if dropped {
            store.retain(|_, entry| !entry.is_null());
        }
        if store.keys().any(|k| crate::jsjson::is_array_index(k)) {
            store.sort_by(|a, _, b, _| crate::jsjson::key_rank(a).cmp(&crate::jsjson::key_rank(b)));
        }
        Ok((store, changed))
    }
}

fn describe(e: &serde_json::Error) -> String {
    let s = e.to_string();
    // serde_json appends " at line X column Y"; we print the position ourselves.
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `JSON.stringify(store, null, 2)`: the exact bytes OpenClaw writes (no trailing newline).
pub fn serialize(store: &Store) -> String {
    let mut out = String::new();
    write_store(&mut out, store);
    out
}

/// Whether saving `store` writes exactly the text of the file at `path`, still as it was
/// loaded (`stamp`): OpenClaw skips such a save. Found as the text is written, against the
/// file as it is read, neither held.
pub fn saves_as_file(store: &Store, path: &Path, stamp: Option<Stamp>) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    stamp.is_some() && self::stamp(path) == stamp && saves_as(store, std::io::BufReader::new(file))
}

/// Whether saving `store` writes exactly what `expected` reads, found without building the
/// text.
pub fn saves_as(store: &Store, expected: impl std::io::BufRead) -> bool {
    let (projected, _) = blobs::project(store);
    let mut same = crate::jsjson::SameAs::new(expected);
    write_store(&mut same, &projected);
    same.is_same()
}

/// `serialize(store).len()`, without building the text.
pub fn serialized_len(store: &Store) -> usize {
    let mut len = crate::jsjson::Len::default();
    write_store(&mut len, store);
    len.0
}

/// Append the pretty form of `store` (top level of a document) to `out`.
fn write_store<S: crate::jsjson::Sink>(out: &mut S, store: &Store) {
    if store.is_empty() {
        out.push_str("{}");
        return;
    }
    out.push('{');
    for (i, (k, v)) in store.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("\n  ");
        crate::jsjson::write_string(out, k);
        out.push_str(": ");
        crate::jsjson::write_value(out, v, Some(2), 1);
    }
    out.push_str("\n}");
}

/// Save as OpenClaw does: skipped when `unchanged` (the store is the one loaded, and saving it
/// writes the text that was read: see [`saves_as`]); otherwise an atomic replace with mode
/// 0600. `expected` is the stamp the store had when it was loaded: if the
/// file changed since (another writer), nothing is replaced and the save is refused, so that
/// writer's update is not lost. Returns whether the file was written.
pub fn save(
    confined: &Confined,
    path: &Path,
    store: &Store,
    unchanged: bool,
    expected: Option<Stamp>,
) -> Result<bool> {
    let (projected, needed) = blobs::project(store);
    let dir = paths::resolve(path)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    blobs::ensure(confined, &dir, &needed)?;
    if unchanged {
        return Ok(false);
    }
    let json = serialize(&projected);
    confined
        .replace_verified_with_mode(
            path,
            0o600,
            |w| w.write_all(json.as_bytes()).map_err(anyhow::Error::from),
            |_| {
                if stamp(path) != expected {
                    return Err(Refusal::Unsafe(format!(
                        "refusing to replace {}: it changed while it was being cleaned (is a gateway writing it?); the store was left as the other writer made it",
                        path.display()
                    ))
                    .into());
                }
                Ok(())
            },
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(true)
}

/// A store of the members of `map` (a JSON object read by other means), each held compactly.
pub fn from_map(map: serde_json::Map<String, Value>) -> Store {
    (map.into_iter())
        .map(|(k, v)| (k, Json::from_value(v)))
        .collect()
}

/// A session entry's `sessionId`, when it is a non-empty string.
pub fn session_id(entry: &Json) -> Option<&str> {
    entry
        .get("sessionId")
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty())
}

/// A session entry's `sessionFile`, when it is a string.
pub fn session_file(entry: &Json) -> Option<&str> {
    entry.get("sessionFile").and_then(Json::as_str)
}

/// `entry.updatedAt` as a number, when it is one.
pub fn updated_at(entry: &Json) -> Option<f64> {
    entry.get("updatedAt").and_then(Json::as_f64)
}

/// The transcript an entry points at, resolved as OpenClaw resolves it, kept only when it is
/// inside `sessions_dir` (canonical path). `None` for entries without a session id.
pub fn entry_transcript(entry: &Json, sessions_dir: &Path) -> Option<PathBuf> {
    paths::transcript_in_dir(session_id(entry)?, session_file(entry), sessions_dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn refuses_garbage_and_arrays() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sessions.json");
        std::fs::write(&p, b"{\n  \"a\": {,\n}").unwrap();
        let e = load(&p).unwrap_err();
        assert!(e.to_string().contains("line 2 column"), "{e}");
        assert_eq!(crate::exit::exit_for_error(&e), crate::exit::Exit::Refused);
        std::fs::write(&p, b"[]").unwrap();
        let e = load(&p).unwrap_err();
        assert!(e.to_string().contains("an array"), "{e}");
        std::fs::remove_file(&p).unwrap();
        let l = load(&p).unwrap();
        assert!(!l.existed && l.store.is_empty());
    }

    #[test]
    fn a_store_changed_by_another_writer_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sessions.json");
        std::fs::write(&p, "{\"a\": {\"sessionId\": \"s\"}}").unwrap();
        let mut l = load(&p).unwrap();
        l.store.shift_remove("a");
        let theirs = "{\"a\": {\"sessionId\": \"s\"}, \"b\": {\"sessionId\": \"t\"}}";
        std::fs::write(&p, theirs).unwrap();
        let c = Confined::new(dir.path()).unwrap();
        let e = save(&c, &p, &l.store, false, l.stamp).unwrap_err();
        assert_eq!(crate::exit::exit_for_error(&e), crate::exit::Exit::Refused);
        assert!(format!("{e:#}").contains("changed while"), "{e:#}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), theirs);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp left"
        );
    }

    #[test]
    fn special_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sessions.json");
        std::fs::create_dir(&p).unwrap();
        let e = load(&p).unwrap_err();
        assert_eq!(crate::exit::exit_for_error(&e), crate::exit::Exit::Refused);
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    /// A store parsed as it is read (a large one) is the store read whole and parsed: the same
    /// entries, order, normalisation and refusals.
    #[test]
    fn a_store_parsed_as_it_is_read_is_the_store_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sessions.json");
        let texts = [
            "{\n  \"k\": {\n    \"sessionId\": \"s\",\n    \"updatedAt\": 1\n  }\n}",
            r#"{"b": {"sessionId": " t ", "updatedAt": 1.50}, "2": {"sessionId": "x"},
                "a": 3, "b": {"sessionId": "u", "sessionFile": 7}, "1": {"updatedAt": 1e400}}"#,
            r#"{"k": {"sessionId": "../../x"}, "m": {"n": [1, {"o": null}], "p": "\u00e9"}}"#,
            "{}",
            "",
            "[]",
            "{\"a\": {}",
            "{\"a\": 1} x",
        ];
        let not_utf8: &[u8] = b"{\"a\": {\"b\": \"\xff\"}}";
        for text in texts.iter().map(|t| t.as_bytes()).chain([not_utf8]) {
            let shown = String::from_utf8_lossy(text);
            std::fs::write(&p, text).unwrap();
            let whole = load_reading_whole_up_to(&p, u64::MAX);
            let read = load_reading_whole_up_to(&p, 0);
            match (whole, read) {
                (Ok(w), Ok(r)) => {
                    assert_eq!(w.store, r.store, "{shown}");
                    let keys = |l: &Loaded| l.store.keys().cloned().collect::<Vec<_>>();
                    assert_eq!(keys(&w), keys(&r), "{shown}");
                    assert_eq!(w.unchanged, r.unchanged, "{shown}");
                    assert_eq!(serialize(&w.store), serialize(&r.store), "{shown}");
                }
                (Err(w), Err(r)) => assert_eq!(format!("{w:#}"), format!("{r:#}"), "{shown}"),
                (w, r) => panic!("{shown}: {w:?} against {r:?}"),
            }
        }
        std::fs::write(&p, b"{\"a\": {\"b\": \"\xff\"}}").unwrap();
        let e = load_reading_whole_up_to(&p, 0).unwrap_err();
        assert!(format!("{e:#}").contains("not valid JSON"), "{e:#}");
    }

    #[test]
    fn save_skips_identical_text() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sessions.json");
        let text = "{\n  \"k\": {\n    \"sessionId\": \"s\",\n    \"updatedAt\": 1\n  }\n}";
        std::fs::write(&p, text).unwrap();
        let l = load(&p).unwrap();
        assert!(l.unchanged);
        assert!(saves_as(&l.store, text.as_bytes()));
        assert!(saves_as_file(&l.store, &p, l.stamp));
        let c = Confined::new(dir.path()).unwrap();
        assert!(!save(&c, &p, &l.store, true, l.stamp).unwrap());
        // Read through a buffer smaller than the text, as a file is.
        let small = std::io::BufReader::with_capacity(3, text.as_bytes());
        assert!(saves_as(&l.store, small));
        let small = std::io::BufReader::with_capacity(3, &text.as_bytes()[..text.len() - 1]);
        assert!(!saves_as(&l.store, small), "a prefix is not the text");
        let longer = format!("{text} ");
        assert!(!saves_as(&l.store, longer.as_bytes()), "nor a longer one");
        std::fs::write(&p, format!("{text}\n")).unwrap();
        let l = load(&p).unwrap();
        assert!(l.unchanged, "normalisation changed nothing");
        assert!(!saves_as_file(&l.store, &p, l.stamp));
        assert!(
            !saves_as(&l.store, &text.as_bytes()[..text.len() - 1]),
            "a prefix is not the text"
        );
        assert!(save(&c, &p, &l.store, false, l.stamp).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // A file changed since it was loaded is never taken for the text loaded, even when
        // its text is the one the store saves as.
        let l = load(&p).unwrap();
        assert!(saves_as_file(&l.store, &p, l.stamp));
        std::fs::write(&p, text).unwrap();
        let older = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(older).unwrap();
        assert!(!saves_as_file(&l.store, &p, l.stamp));
    }

    /// The entries read one at a time are the entries of the whole load, in its order, on
    /// stores with what changes the order or the set: duplicate keys (first place, last
    /// value), integer-like keys (first, ascending), entries the runtime drops (not objects,
    /// an unsafe `sessionId`), `sessionId`s trimmed or removed, non-string `sessionFile`s;
    /// and on text the streamed read does not take (falls back to the load's result or
    /// refusal).
    #[test]
    fn entry_files_are_the_loaded_entries_in_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sessions.json");
        let cases: &[&[u8]] = &[
            br#"{"b": {"sessionId": "s1"}, "a": {"sessionId": "s2", "sessionFile": "x.jsonl"}}"#,
            br#"{"k": {"sessionId": "s1"}, "j": 7, "k": {"sessionId": "s3"}}"#,
            br#"{"k": 7, "j": {"sessionId": "s2"}, "k": {"sessionId": "s3"}}"#,
            br#"{"k": {"sessionId": "s1"}, "k": "gone"}"#,
            br#"{"z": {"sessionId": "s"}, "10": {"sessionId": "t"}, "2": {"sessionId": "u"}, "01": {}}"#,
            br#"{"a": {"sessionId": "  s9  "}, "b": {"sessionId": "../x"}, "c": {"sessionId": ""}}"#,
            br#"{"a": {"sessionId": "bad id", "sessionFile": "f.jsonl"}, "b": {"sessionFile": 5}}"#,
            br#"{"a": {"sessionId": 12}, "b": [], "c": null, "d": {"updatedAt": "x"}}"#,
            br#"{"a": {"sessionId": "s\ud800"}}"#,
            b"{\"a\": {\"sessionId\": \"s\xff\"}}",
            br#"[{"sessionId": "s"}]"#,
            br#"{"a": {"sessionId": "s"}} trailing"#,
            b"",
        ];
        for text in cases {
            fs::write(&p, text).unwrap();
            let whole = load(&p).map_err(|e| e.to_string()).map(|l| {
                l.store
                    .iter()
                    .map(|(k, e)| EntryFiles::of(k.clone(), e))
                    .collect::<Vec<_>>()
            });
            // Read whole, then parsed; and parsed as it is read.
            for whole_up_to in [u64::MAX, 0] {
                let streamed = load_entry_files_reading_whole_up_to(&p, whole_up_to)
                    .map_err(|e| e.to_string());
                assert_eq!(
                    streamed,
                    whole,
                    "{} ({whole_up_to})",
                    String::from_utf8_lossy(text)
                );
            }
        }
        // Larger generated stores: keys repeated, some integer-like, entries of every shape.
        for seed in 0..40u64 {
            let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let mut next = |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let mut members = Vec::new();
            for _ in 0..60 {
                let key = match next(3) {
                    0 => format!("{}", next(20)),
                    _ => format!("agent:main:k{}", next(30)),
                };
                let value = match next(6) {
                    0 => "3".to_owned(),
                    1 => format!(r#"{{"sessionId": " s{} ", "updatedAt": -1}}"#, next(9)),
                    2 => format!(
                        r#"{{"sessionId": "s{}", "sessionFile": "f{}.jsonl"}}"#,
                        next(9),
                        next(9)
                    ),
                    3 => r#"{"sessionId": "a/b"}"#.to_owned(),
                    4 => format!(r#"{{"sessionFile": {}}}"#, next(2)),
                    _ => format!(r#"{{"sessionId": "s{}", "model": " m "}}"#, next(9)),
                };
                members.push(format!("{key:?}: {value}"));
            }
            let text = format!("{{{}}}", members.join(",\n"));
            fs::write(&p, &text).unwrap();
            let whole: Vec<EntryFiles> = load(&p)
                .unwrap()
                .store
                .iter()
                .map(|(k, e)| EntryFiles::of(k.clone(), e))
                .collect();
            for whole_up_to in [u64::MAX, 0] {
                let streamed = load_entry_files_reading_whole_up_to(&p, whole_up_to).unwrap();
                assert_eq!(streamed, whole, "seed {seed} ({whole_up_to}): {text}");
            }
        }
    }
}
