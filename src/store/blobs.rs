//! Skill prompt blobs (`skill-prompt-blobs.ts`): long `skillsSnapshot.prompt` texts live in
//! `<sessionsDir>/skills-prompts/sha256/<hh>/<sha256>.txt` and the store keeps
//! `skillsSnapshot.promptRef = {version, algorithm, hash, bytes}`.
//!
//! `hydrate` inlines valid blobs at load (and drops snapshots whose blob is missing or
//! corrupt), `project` is the persisted form of a store (prompts of 512+ UTF-16 units and at
//! most 512 KiB move to blobs), and `ensure` writes the blobs a save needs (or refreshes the
//! mtime of those that exist), through `fsutil`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::Store;
use crate::fsutil::Confined;
use crate::json::Json;

pub const MIN_PROMPT_CHARS: usize = 512;
pub const MAX_PROMPT_BYTES: usize = 512 * 1024;

/// A prompt that a save stores as a blob.
#[derive(Debug, Clone)]
pub struct Blob {
    pub hash: String,
    pub prompt: String,
}

/// The SHA-256 digest of `data` as 64 lowercase hex digits: a blob's name (OpenClaw's
/// `createHash("sha256").update(prompt).digest("hex")`).
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    use std::fmt::Write;
    sha2::Sha256::digest(data)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// `<sessionsDir>/skills-prompts/sha256/<hh>/<hash>.txt`.
pub fn blob_path(sessions_dir: &Path, hash: &str) -> Option<PathBuf> {
    is_sha256_hex(hash).then(|| {
        sessions_dir
            .join("skills-prompts")
            .join("sha256")
            .join(&hash[..2])
            .join(format!("{hash}.txt"))
    })
}

/// `shouldStorePromptAsBlob`.
pub fn should_store_as_blob(prompt: &str) -> bool {
    prompt.encode_utf16().count() >= MIN_PROMPT_CHARS && prompt.len() <= MAX_PROMPT_BYTES
}

/// `readValidPromptBlob`: the blob's text when it exists and matches the ref.
fn read_valid(sessions_dir: &Path, r: &Value) -> Option<String> {
    let version_ok = r.get("version").and_then(Value::as_f64) == Some(1.0);
    let alg_ok = r.get("algorithm").and_then(Value::as_str) == Some("sha256");
    let hash = r.get("hash")?.as_str()?;
    let bytes = r.get("bytes")?.as_f64()?;
    if !version_ok
        || !alg_ok
        || !is_sha256_hex(hash)
        || !bytes.is_finite()
        || bytes < 0.0
        || bytes > MAX_PROMPT_BYTES as f64
    {
        return None;
    }
    let path = blob_path(sessions_dir, hash)?;
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() || meta.len() as f64 != bytes {
        return None;
    }
    let text = String::from_utf8(std::fs::read(&path).ok()?).ok()?;
    (sha256_hex(text.as_bytes()) == hash && text.len() as f64 == bytes).then_some(text)
}

/// `hydrateSessionStoreSkillPromptRefs` of one entry (the store is hydrated as it is loaded,
/// entry by entry): its skills prompt read back from its blob (or the snapshot
/// dropped when the blob is not valid). Returns whether the entry changed.
pub fn hydrate_entry(entry: &mut Value, sessions_dir: &Path) -> bool {
    let Value::Object(e) = entry else {
        return false;
    };
    let Some(snapshot) = e.get("skillsSnapshot") else {
        return false;
    };
    if !crate::config::js_truthy(snapshot) || snapshot.get("prompt").is_some_and(Value::is_string) {
        return false;
    }
    let is_ref = |r: &&Value| {
        r.is_object()
            && r.get("version").is_some_and(|v| v.as_f64() == Some(1.0))
            && r.get("algorithm").and_then(Value::as_str) == Some("sha256")
            && r.get("hash").is_some_and(Value::is_string)
            && r.get("bytes").is_some_and(Value::is_number)
    };
    let prompt = snapshot
        .get("promptRef")
        .filter(is_ref)
        .and_then(|r| read_valid(sessions_dir, r));
    match prompt {
        None => {
            e.shift_remove("skillsSnapshot");
        }
        Some(p) => {
            if let Some(Value::Object(snap)) = e.get_mut("skillsSnapshot") {
                snap.shift_remove("promptRef");
                snap.insert("prompt".into(), Value::String(p));
            }
        }
    }
    true
}

/// The `promptRef` hash of a (projected) entry, when it names a sha256 blob.
pub fn ref_hash(entry: &Json) -> Option<&str> {
    let r = entry.get("skillsSnapshot")?.get("promptRef")?;
    if r.get("algorithm").and_then(Json::as_str) != Some("sha256") {
        return None;
    }
    r.get("hash")?.as_str()
}

/// The skills prompt of an entry that a save moves to a blob.
fn blob_prompt(entry: &Json) -> Option<&str> {
    entry
        .get("skillsSnapshot")
        .and_then(|s| s.get("prompt"))
        .and_then(Json::as_str)
        .filter(|p| !p.is_empty() && should_store_as_blob(p))
}

/// `projectSessionStoreForPersistence`: the store as written, and the blobs it needs (in
/// first-seen order, one per hash). The store itself (not a copy) when no prompt moves.
pub fn project(store: &Store) -> (std::borrow::Cow<'_, Store>, Vec<Blob>) {
    if !store.values().any(|e| blob_prompt(e).is_some()) {
        return (std::borrow::Cow::Borrowed(store), Vec::new());
    }
    let mut out = store.clone();
    let mut blobs: Vec<Blob> = Vec::new();
    for (key, entry) in store {
        let Some(prompt) = blob_prompt(entry) else {
            continue;
        };
        let hash = sha256_hex(prompt.as_bytes());
        let promptref =
            json!({"version": 1, "algorithm": "sha256", "hash": hash, "bytes": prompt.len()});
        if let Some(Json::Object(e)) = out.get_mut(key)
            && let Some(Json::Object(snap)) = e.get_mut("skillsSnapshot")
        {
            snap.remove("prompt");
            snap.insert("promptRef", Json::from_value(promptref));
        }
        match blobs.iter_mut().find(|b| b.hash == hash) {
            Some(b) => b.prompt = prompt.to_string(),
            None => blobs.push(Blob {
                hash,
                prompt: prompt.to_string(),
            }),
        }
    }
    (std::borrow::Cow::Owned(out), blobs)
}

/// `ensurePromptBlob` for each blob: refresh the mtime of a valid existing blob, else write it
/// atomically (mode 0600), creating its directories inside the sessions dir.
pub fn ensure(confined: &Confined, sessions_dir: &Path, blobs: &[Blob]) -> Result<()> {
    for b in blobs {
        let Some(path) = blob_path(sessions_dir, &b.hash) else {
            continue;
        };
        let r =
            json!({"version": 1, "algorithm": "sha256", "hash": b.hash, "bytes": b.prompt.len()});
        let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
        if regular && read_valid(sessions_dir, &r).as_deref() == Some(b.prompt.as_str()) {
            let touched = std::fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
            if touched.is_ok() {
                continue;
            }
        }
        let rel = Path::new("skills-prompts")
            .join("sha256")
            .join(&b.hash[..2]);
        let dir = confined.create_dir_all(&rel)?;
        dir.write_atomic_with_mode(&path, 0o600, |w| w.write_all(b.prompt.as_bytes()))
            .with_context(|| format!("cannot write prompt blob {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_known_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        // Many blocks.
        assert_eq!(
            sha256_hex(&[b'a'; 1_000_000]),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
    }

    #[test]
    fn project_hydrate_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::canonicalize(dir.path()).unwrap();
        let long = "p".repeat(600);
        let Value::Object(store) = json!({"k": {"skillsSnapshot": {"prompt": long, "v": 1}, "x": 2}, "s": {"skillsSnapshot": {"prompt": "short"}}})
        else {
            panic!()
        };
        let store: Store = (store.into_iter())
            .map(|(k, v)| (k, Json::from_value(v)))
            .collect();
        let hydrate = |store: &mut Store, d: &Path| {
            let mut changed = false;
            for entry in store.values_mut() {
                let mut v = entry.to_value();
                changed |= hydrate_entry(&mut v, d);
                *entry = Json::from_value(v);
            }
            changed
        };
        let (projected, blobs) = project(&store);
        assert_eq!(blobs.len(), 1);
        let hash = sha256_hex(long.as_bytes());
        assert_eq!(
            projected["k"],
            json!({"skillsSnapshot": {"v": 1, "promptRef": {"version": 1, "algorithm": "sha256", "hash": hash, "bytes": 600}}, "x": 2})
        );
        assert_eq!(projected["s"], store["s"]);
        let c = Confined::new(&d).unwrap();
        ensure(&c, &d, &blobs).unwrap();
        let path = blob_path(&d, &hash).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), long);
        let mut back = projected.clone().into_owned();
        assert!(hydrate(&mut back, &d));
        assert_eq!(
            back["k"],
            json!({"skillsSnapshot": {"v": 1, "prompt": long}, "x": 2})
        );
        std::fs::write(&path, "tampered").unwrap();
        let mut broken = projected.clone().into_owned();
        assert!(hydrate(&mut broken, &d));
        assert_eq!(broken["k"], json!({"x": 2}));
    }
}
