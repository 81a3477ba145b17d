//! The finalization batches of the maintenance's removals (`buildSessionMaintenanceBatches`,
//! the same in 2026.8.x and 2026.9.x): which entries and transcripts each deletion
//! transaction takes, and in what order.
//!
//! The release plans the transcripts to delete once, in the order it met their ids
//! (`removedSessionIds`: every removal's own session ids in removal order, then the windows
//! of all removals), keeping those no surviving entry references. Removals that share a
//! transcript form one group, placed where its first removal is; a transcript goes with the
//! group of the first removal naming it (or owning its window). The groups fill batches of at
//! most 64 work items and 64 MiB of transcript. Within a batch the transcripts go group by
//! group, so a transcript of a later removal can be deleted (and its pages freed) before one
//! of an earlier removal: which pages each archive takes, and so the WAL the disk budget
//! measures, depend on it.

use std::collections::{HashMap, HashSet};

use anyhow::Result;
use rusqlite::{Connection, OptionalExtension};

use super::write::{entry_session_ids, referenced_ids, window_ids};
use crate::store::Store;

/// `MAX_SESSION_MAINTENANCE_BATCH_ENTRIES`.
const MAX_ENTRIES: u64 = 64;
/// `MAX_SESSION_MAINTENANCE_BATCH_ARCHIVE_BYTES`.
const MAX_ARCHIVE_BYTES: u64 = 64 << 20;

/// One deletion transaction: its entries and the transcripts it deletes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<'a> {
    pub keys: Vec<&'a String>,
    pub sessions: Vec<String>,
}

/// A transcript planned for deletion: its id, the removal owning its window, and its size
/// as JSONL (what the byte limit counts).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Planned {
    id: String,
    owner: Option<usize>,
    bytes: u64,
}

/// The batches the release deletes the maintenance's removals `keys` (in removal order) in.
pub fn of_removals<'a>(
    conn: &Connection,
    before: &Store,
    keys: &[&'a String],
) -> Result<Vec<Batch<'a>>> {
    // Most runs remove nothing: no reading of every entry for them.
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let named: Vec<Vec<String>> = keys
        .iter()
        .map(|k| before.get(*k).map(entry_session_ids).unwrap_or_default())
        .collect();
    let mut seen = HashSet::new();
    let mut ids = Vec::new();
    for id in named
        .iter()
        .flatten()
        .cloned()
        .chain(window_ids(conn, keys)?)
    {
        if seen.insert(id.clone()) {
            ids.push(id);
        }
    }
    let removed: HashSet<&String> = keys.iter().copied().collect();
    let referenced = referenced_ids(conn, &removed)?;
    let index_of: HashMap<&str, usize> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), i))
        .collect();
    let mut owner_stmt =
        conn.prepare("SELECT session_key FROM session_windows WHERE session_id = ?1")?;
    let mut bytes_stmt = conn.prepare(
        "SELECT SUM(LENGTH(CAST(event_json AS BLOB)) + 1) FROM transcript_events \
         WHERE session_id = ?1",
    )?;
    let mut planned = Vec::new();
    for id in ids.into_iter().filter(|id| !referenced.contains(id)) {
        let owner_key: Option<String> = owner_stmt.query_row([&id], |r| r.get(0)).optional()?;
        let bytes: Option<i64> = bytes_stmt.query_row([&id], |r| r.get(0))?;
        planned.push(Planned {
            owner: owner_key.and_then(|k| index_of.get(k.as_str()).copied()),
            bytes: bytes.unwrap_or(0).max(0) as u64,
            id,
        });
    }
    Ok(group(&named, &planned)
        .into_iter()
        .map(|(entries, sessions)| Batch {
            keys: entries.into_iter().map(|i| keys[i]).collect(),
            sessions,
        })
        .collect())
}

/// The union-find of the removals over the ids they share.
struct Groups {
    parent: Vec<usize>,
    /// The first removal naming each id (`removalIndexesBySessionId[id][0]`).
    first: HashMap<String, usize>,
}

impl Groups {
    fn find(&mut self, i: usize) -> usize {
        let mut root = i;
        while self.parent[root] != root {
            root = self.parent[root];
        }
        let mut at = i;
        while self.parent[at] != root {
            let next = self.parent[at];
            self.parent[at] = root;
            at = next;
        }
        root
    }

    fn add(&mut self, id: &str, index: usize) {
        match self.first.get(id) {
            Some(&first) => {
                let (a, b) = (self.find(first), self.find(index));
                if a != b {
                    self.parent[b] = a;
                }
            }
            None => {
                self.first.insert(id.to_owned(), index);
            }
        }
    }
}

/// The batches, as removal indices and transcript ids, for removals naming the ids `named`
/// and the transcripts `planned` (in plan order).
fn group(named: &[Vec<String>], planned: &[Planned]) -> Vec<(Vec<usize>, Vec<String>)> {
    let n = named.len();
    let mut g = Groups {
        parent: (0..n).collect(),
        first: HashMap::new(),
    };
    for (i, ids) in named.iter().enumerate() {
        for id in ids {
            g.add(id, i);
        }
    }
    for p in planned {
        if let Some(owner) = p.owner {
            g.add(&p.id, owner);
        }
    }
    struct Group {
        order: usize,
        entries: Vec<usize>,
        sessions: Vec<String>,
        bytes: u64,
    }
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of_root: HashMap<usize, usize> = HashMap::new();
    for i in 0..n {
        let root = g.find(i);
        let at = *group_of_root.entry(root).or_insert_with(|| {
            groups.push(Group {
                order: i,
                entries: Vec::new(),
                sessions: Vec::new(),
                bytes: 0,
            });
            groups.len() - 1
        });
        groups[at].entries.push(i);
    }
    let mut standalone = n;
    for p in planned {
        let at = match g.first.get(&p.id).copied() {
            Some(i) => group_of_root[&g.find(i)],
            None => {
                groups.push(Group {
                    order: standalone,
                    entries: Vec::new(),
                    sessions: Vec::new(),
                    bytes: 0,
                });
                standalone += 1;
                groups.len() - 1
            }
        };
        groups[at].sessions.push(p.id.clone());
        groups[at].bytes += p.bytes;
    }
    groups.sort_by_key(|g| g.order);
    let mut batches = Vec::new();
    let (mut entries, mut sessions, mut work, mut bytes) = (Vec::new(), Vec::new(), 0u64, 0u64);
    for gr in groups {
        let items = gr.entries.len().max(gr.sessions.len()) as u64;
        if work > 0 && (work + items > MAX_ENTRIES || bytes + gr.bytes > MAX_ARCHIVE_BYTES) {
            batches.push((std::mem::take(&mut entries), std::mem::take(&mut sessions)));
            (work, bytes) = (0, 0);
        }
        entries.extend(gr.entries);
        sessions.extend(gr.sessions);
        work += items;
        bytes += gr.bytes;
    }
    if work > 0 {
        batches.push((entries, sessions));
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn plan(id: &str, owner: Option<usize>, bytes: u64) -> Planned {
        Planned {
            id: id.into(),
            owner,
            bytes,
        }
    }

    /// No removals: no batch, and nothing read (this database has no tables at all).
    #[test]
    fn no_removals_read_nothing() {
        let conn = Connection::open_in_memory().unwrap();
        let store = crate::store::from_map(serde_json::Map::new());
        assert_eq!(of_removals(&conn, &store, &[]).unwrap(), []);
    }

    /// Removal 0 names `c`, removal 2 names `d` and `c`: the two are one group at 0, so `d`
    /// is deleted right after `c`, before `b` of removal 1.
    #[test]
    fn removals_sharing_a_transcript_are_deleted_together_where_the_first_one_is() {
        let named = [ids(&["c"]), ids(&["b"]), ids(&["d", "c"])];
        let planned = [
            plan("c", Some(0), 1),
            plan("b", Some(1), 1),
            plan("d", Some(2), 1),
        ];
        assert_eq!(
            group(&named, &planned),
            [(vec![0, 2, 1], ids(&["c", "d", "b"]))]
        );
    }

    /// A window id no entry names joins the group of the removal owning the window; one no
    /// removal owns goes last, on its own.
    #[test]
    fn window_only_transcripts_follow_their_owner() {
        let named = [ids(&["a"]), ids(&["b"])];
        let planned = [
            plan("a", Some(0), 1),
            plan("b", Some(1), 1),
            plan("w", Some(0), 1),
            plan("x", None, 1),
        ];
        assert_eq!(
            group(&named, &planned),
            [(vec![0, 1], ids(&["a", "w", "b", "x"]))]
        );
    }

    /// A batch takes at most 64 work items (the larger of a group's entries and transcripts)
    /// and 64 MiB of transcripts, but always at least one group.
    #[test]
    fn batches_are_bounded_by_items_and_bytes() {
        let named: Vec<Vec<String>> = (0..130).map(|i| vec![format!("s{i}")]).collect();
        let planned: Vec<Planned> = (0..130)
            .map(|i| plan(&format!("s{i}"), Some(i), 1))
            .collect();
        let sizes: Vec<usize> = group(&named, &planned)
            .iter()
            .map(|(e, s)| {
                assert_eq!(e.len(), s.len());
                e.len()
            })
            .collect();
        assert_eq!(sizes, [64, 64, 2]);
        let big = [
            plan("s0", Some(0), 40 << 20),
            plan("s1", Some(1), 40 << 20),
            plan("s2", Some(2), 100 << 20),
        ];
        let sizes: Vec<usize> = group(&named[..3], &big)
            .iter()
            .map(|(e, _)| e.len())
            .collect();
        assert_eq!(sizes, [1, 1, 1]);
    }
}
