//! The store as a cleanup plan found it, without a second copy of it: the plan works on the
//! loaded store itself, and what its steps remove or repair is kept aside, each entry once.

use std::collections::HashMap;
use std::hash::BuildHasher;

use crate::json::Json;

use super::entries::{self, Repair};
use crate::store::Store;

/// Why a plan removes an entry: the step that removed it, named by its action in the dry-run
/// table (`resolveSessionCleanupAction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    Missing,
    DmScope,
    ModelRun,
    Stale,
    Capped,
    BudgetEvicted,
}

impl Removal {
    pub fn action(self) -> &'static str {
        match self {
            Removal::Missing => "prune-missing",
            Removal::DmScope => "retire-dm-scope",
            Removal::ModelRun => "prune-model-run",
            Removal::Stale => "prune-stale",
            Removal::Capped => "cap-overflow",
            Removal::BudgetEvicted => "evict-budget",
        }
    }
}

/// The entries of a store as it was loaded, in its order: for the dry-run table, and for what
/// the plan looks up of the entries it removes. A kept entry is read from the planned store, a
/// removed one from what its step removed, and an entry that `--fix-missing` repaired as it
/// was before the repair.
#[derive(Debug, Clone, Default)]
pub struct Before {
    order: Order,
    kept: Store,
    /// What each step removed, as the step found it (a key is removed by one step at most).
    removed: Vec<(Removal, entries::Removed)>,
    /// Where each removed entry is in `removed`: the step's place and the entry's, packed.
    removed_at: hashbrown::HashTable<u64>,
    unrepaired: HashMap<String, Json>,
}

impl Before {
    /// `order`: the places of the keys as loaded; `kept`: the planned store; `removed`: what
    /// each step removed; `repairs`: the `sessionFile` repairs the plan made.
    pub fn new(
        order: Order,
        kept: Store,
        removed: Vec<(Removal, entries::Removed)>,
        repairs: &[Repair],
    ) -> Before {
        let unrepaired = repairs
            .iter()
            .map(|r| (r.key.clone(), r.loaded.clone()))
            .collect();
        let count = removed.iter().map(|(_, entries)| entries.len()).sum();
        let mut removed_at = hashbrown::HashTable::with_capacity(count);
        for (step, (_, entries)) in removed.iter().enumerate() {
            for (i, (key, _)) in entries.iter().enumerate() {
                let at = ((step as u64) << 32) | i as u64;
                removed_at.insert_unique(hash(key), at, |&at| hash(removed_entry(&removed, at).0));
            }
        }
        Before {
            order,
            kept,
            removed,
            removed_at,
            unrepaired,
        }
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The step that removed `key`, with the entry as that step found it.
    fn removed(&self, key: &str) -> Option<(Removal, &Json)> {
        let at = self
            .removed_at
            .find(hash(key), |&at| removed_entry(&self.removed, at).0 == key)?;
        let (_, entry) = removed_entry(&self.removed, *at);
        Some((self.removed[(at >> 32) as usize].0, entry))
    }

    /// Why the plan removes `key` (`None`: it keeps it, or the store has no such key).
    pub fn removal(&self, key: &str) -> Option<Removal> {
        self.removed(key).map(|(why, _)| why)
    }

    /// The keys the plan removes, with why, step by step.
    pub fn removed_keys(&self) -> impl Iterator<Item = (Removal, &String)> {
        self.removed
            .iter()
            .flat_map(|(why, entries)| entries.iter().map(move |(key, _)| (*why, key)))
    }

    /// The entry `key` as it was loaded.
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.unrepaired
            .get(key)
            .or_else(|| self.removed(key).map(|(_, e)| e))
            .or_else(|| self.kept.get(key))
    }

    /// Every entry as it was loaded, in the store's order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Json)> {
        let removed = (self.removed.iter())
            .flat_map(|(_, entries)| entries)
            .map(|(key, _)| key);
        let mut placed: Vec<(u32, &String, &Json)> = (self.kept.keys().chain(removed))
            .filter_map(|key| Some((self.order.place(key)?, key, self.get(key)?)))
            .collect();
        placed.sort_unstable_by_key(|(place, _, _)| *place);
        placed.into_iter().map(|(_, key, entry)| (key, entry))
    }
}

/// The place of each key in a store as loaded, without a copy of every key (a store may have
/// hundreds of thousands): each key's hash with its place, sorted by hash. The keys whose hash
/// another key shares are kept whole, so a place is never given to the wrong key.
#[derive(Debug, Clone)]
pub struct Order {
    len: usize,
    hash: fn(&str) -> u64,
    /// (hash, place) of the keys whose hash is theirs alone, sorted.
    by_hash: Vec<(u64, u32)>,
    /// The keys whose hash is shared, with their places.
    shared: HashMap<String, u32>,
}

impl Default for Order {
    fn default() -> Order {
        Order::with_hash(&Store::new(), hash)
    }
}

impl Order {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The places of `store`'s keys.
    pub fn of(store: &Store) -> Order {
        Order::with_hash(store, hash)
    }

    fn with_hash(store: &Store, hash: fn(&str) -> u64) -> Order {
        let mut by_hash: Vec<(u64, u32)> = (store.keys().enumerate())
            .map(|(place, key)| (hash(key), place as u32))
            .collect();
        by_hash.sort_unstable();
        let mut shared_places = std::collections::HashSet::new();
        let mut unique = Vec::with_capacity(by_hash.len());
        for run in by_hash.chunk_by(|a, b| a.0 == b.0) {
            match run {
                [one] => unique.push(*one),
                _ => shared_places.extend(run.iter().map(|&(_, place)| place)),
            }
        }
        let shared = (store.keys().zip(0u32..))
            .filter(|(_, place)| shared_places.contains(place))
            .map(|(key, place)| (key.clone(), place))
            .collect();
        Order {
            len: store.len(),
            hash,
            by_hash: unique,
            shared,
        }
    }

    /// The place of `key` among the keys as loaded (`None`: it was not one of them, or, for a
    /// key that was not, possibly the place of another whose hash it shares).
    fn place(&self, key: &str) -> Option<u32> {
        if let Some(place) = self.shared.get(key) {
            return Some(*place);
        }
        let h = (self.hash)(key);
        let i = self.by_hash.binary_search_by_key(&h, |(h, _)| *h).ok()?;
        Some(self.by_hash[i].1)
    }
}

fn hash(key: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(key)
}

/// The removed entry at packed place `at` (see [`Before::removed_at`]).
fn removed_entry(removed: &[(Removal, entries::Removed)], at: u64) -> (&String, &Json) {
    let (key, entry) = &removed[(at >> 32) as usize].1[(at & u64::from(u32::MAX)) as usize];
    (key, entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The entries come back as loaded, in order, whether kept, removed, repaired or both.
    #[test]
    fn entries_are_read_as_they_were_loaded() {
        let loaded: Store = serde_json::from_value(json!({
            "a": {"sessionId": "s1", "sessionFile": "old.jsonl", "updatedAt": 1},
            "b": {"sessionId": "s2", "updatedAt": 2},
            "c": {"sessionId": "s3", "updatedAt": 3},
            "d": {"sessionId": "s4", "updatedAt": 4},
        }))
        .unwrap();
        let mut planned = loaded.clone();
        let repair = |key: &str, previous: Option<&str>| Repair {
            key: key.into(),
            session_id: String::new(),
            previous: previous.map(Into::into),
            new: "new.jsonl".into(),
            loaded: loaded[key].clone(),
        };
        let repairs = [repair("a", Some("old.jsonl")), repair("b", None)];
        for r in &repairs {
            let entry = planned[&r.key].as_object_mut().unwrap();
            entry.insert("sessionFile", Json::from(r.new.as_str()));
        }
        let removed = vec![
            (
                Removal::Missing,
                vec![("b".to_owned(), planned.shift_remove("b").unwrap())],
            ),
            (
                Removal::Stale,
                vec![("c".to_owned(), planned.shift_remove("c").unwrap())],
            ),
        ];
        let before = Before::new(Order::of(&loaded), planned, removed, &repairs);
        assert_eq!(before.len(), 4);
        let seen: Vec<(&String, &Json)> = before.iter().collect();
        let want: Vec<(&String, &Json)> = loaded.iter().collect();
        assert_eq!(seen, want);
        assert_eq!(
            serde_json::to_string(before.get("a").unwrap()).unwrap(),
            serde_json::to_string(&loaded["a"]).unwrap(),
            "members keep their order"
        );
        assert!(before.get("e").is_none());
        assert_eq!(before.order.place("a"), Some(0));
        assert_eq!(before.removal("a"), None, "repaired, kept");
        assert_eq!(before.removal("b"), Some(Removal::Missing));
        assert_eq!(before.removal("c"), Some(Removal::Stale));
        assert_eq!(before.removal("d"), None);
        let removed: Vec<(Removal, &String)> = before.removed_keys().collect();
        assert_eq!(
            removed,
            [
                (Removal::Missing, &"b".to_owned()),
                (Removal::Stale, &"c".to_owned())
            ]
        );
    }

    /// Keys whose hashes collide still get their own places: with a hash that makes every key
    /// of a length collide, and with one that makes none collide.
    #[test]
    fn every_key_gets_its_own_place_even_when_hashes_collide() {
        let keys = ["b", "a", "cc", "dd", "e", "fff", "g"];
        let store: Store = (keys.iter())
            .map(|k| (k.to_string(), Json::Object(Default::default())))
            .collect();
        for hash in [(|k: &str| k.len() as u64) as fn(&str) -> u64, super::hash] {
            let order = Order::with_hash(&store, hash);
            for (place, key) in keys.iter().enumerate() {
                assert_eq!(order.place(key), Some(place as u32), "{key}");
            }
            assert_eq!(order.len, keys.len());
        }
        let order = Order::with_hash(&store, |k| k.len() as u64);
        assert_eq!(order.by_hash, [(3, 5)], "only fff's length is its own");
        assert_eq!(order.shared.len(), 6);
    }
}
