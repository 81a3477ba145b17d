//! Where a database's bytes go: the file, its WAL, free pages, and bytes per table (the
//! `dbstat` virtual table of the bundled SQLite; indexes count toward their table).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use rusqlite::Connection;

/// Sizes of a database and its companions, and what its pages hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Space {
    /// The database file's length on disk.
    pub db_bytes: u64,
    /// The `-wal` file's length (0 when there is none).
    pub wal_bytes: u64,
    /// The `-shm` file's length (0 when there is none).
    pub shm_bytes: u64,
    pub page_size: u64,
    /// Pages of the database as a reader sees it (the file plus what the WAL adds).
    pub page_count: u64,
    /// Unused pages (`PRAGMA freelist_count`).
    pub freelist_pages: u64,
    /// `PRAGMA auto_vacuum`: 0 none, 1 full, 2 incremental.
    pub auto_vacuum: i64,
    pub journal_mode: String,
}

impl Space {
    /// Bytes the free pages take.
    pub fn free_bytes(&self) -> u64 {
        self.freelist_pages * self.page_size
    }

    /// The database, WAL and shared-memory index together.
    pub fn total_bytes(&self) -> u64 {
        self.db_bytes + self.wal_bytes + self.shm_bytes
    }
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// Measure a database through an open connection (read-only is enough).
pub fn measure(conn: &Connection, db: &Path) -> Result<Space> {
    let int =
        |pragma: &str| -> Result<i64> { Ok(conn.pragma_query_value(None, pragma, |r| r.get(0))?) };
    Ok(Space {
        db_bytes: file_len(db),
        wal_bytes: file_len(&super::wal_path(db)),
        shm_bytes: file_len(&super::shm_path(db)),
        page_size: int("page_size")?.max(0) as u64,
        page_count: int("page_count")?.max(0) as u64,
        freelist_pages: int("freelist_count")?.max(0) as u64,
        auto_vacuum: int("auto_vacuum")?,
        journal_mode: conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?,
    })
}

/// Bytes of pages per table, largest first; each index (and each FTS shadow table's pages)
/// counts toward the table it belongs to, as `sqlite_schema.tbl_name` says. Read through the
/// `dbstat` virtual table, so it reads every page once.
pub fn bytes_per_table(conn: &Connection) -> Result<Vec<(String, u64)>> {
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    {
        let mut stmt = conn.prepare("SELECT name, tbl_name FROM sqlite_schema")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
        for row in rows {
            let (name, table) = row?;
            owner.insert(name, table);
        }
    }
    let mut per_table: BTreeMap<String, u64> = BTreeMap::new();
    let mut stmt = conn.prepare("SELECT name, pgsize FROM dbstat WHERE aggregate = TRUE")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    for row in rows {
        let (name, bytes) = row?;
        let table = owner.get(&name).cloned().unwrap_or(name);
        *per_table.entry(table).or_default() += bytes.max(0) as u64;
    }
    let mut out: Vec<(String, u64)> = per_table.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(out)
}
