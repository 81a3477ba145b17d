//! Entry positions by id, for the tree built on an index: the table keeps positions only
//! (four bytes a slot, where a map from shared ids to positions takes twenty-four) and reads
//! the ids back from the index's entries. Every call takes the entries the table was built
//! from.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

use super::Entry;

#[derive(Debug, Clone, Default)]
pub struct IdTable {
    table: HashTable<u32>,
    hasher: RandomState,
}

/// The id of entry `i`; tables hold only entries that have one.
fn id_of(entries: &[Entry], i: u32) -> &str {
    entries[i as usize].id.as_deref().unwrap_or_default()
}

impl IdTable {
    pub fn with_capacity(n: usize) -> IdTable {
        IdTable {
            table: HashTable::with_capacity(n),
            hasher: RandomState::new(),
        }
    }

    /// Add entry `i` (which has an id) unless an entry with its id is in the table already;
    /// `false` when one is.
    pub fn insert_first(&mut self, entries: &[Entry], i: usize) -> bool {
        let id = id_of(entries, i as u32);
        let hash = self.hasher.hash_one(id);
        let hasher = &self.hasher;
        match self.table.entry(
            hash,
            |&j| id_of(entries, j) == id,
            |&j| hasher.hash_one(id_of(entries, j)),
        ) {
            hashbrown::hash_table::Entry::Occupied(_) => false,
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(i as u32);
                true
            }
        }
    }

    /// The entry with this id.
    pub fn get(&self, entries: &[Entry], id: &str) -> Option<usize> {
        self.table
            .find(self.hasher.hash_one(id), |&j| id_of(entries, j) == id)
            .map(|&j| j as usize)
    }

    /// Every id with its entry, in no particular order.
    pub fn iter<'a>(&'a self, entries: &'a [Entry]) -> impl Iterator<Item = (&'a str, usize)> {
        self.table.iter().map(|&j| (id_of(entries, j), j as usize))
    }
}
