//! `openclaw sessions cleanup` on a SQLite-era agent database, as OpenClaw 2026.9.6 (schema
//! 23, and 2026.9.5's schema 21) and 2026.8.2 (schema 19) do it: the entry plan on every
//! `session_nodes` entry ([`plan`]), the unreferenced-artifact sweep of the sessions directory
//! and the disk budget ([`disk`]), and, for `--enforce`, the writes ([`write`]): durable
//! entries archived in place, synthetic ones deleted with their transcript archived as
//! `sessions/<sid>.jsonl.deleted.<ts>.<generation>.zst` and in `session_transcript_archives`.
//!
//! The preview reads the database read-only and never writes. The apply is called by the
//! command only after the guard is held and the database passed its check (see
//! `cmd::cleanup`); every database write here is one `BEGIN IMMEDIATE` transaction, and the
//! database file is never replaced. Domain code: no terminal, no clap.

mod batches;
pub mod budget;
mod conversation;
pub mod disk;
pub mod plan;
pub mod predict;
pub mod removals;
mod window;
pub mod write;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

use crate::agentdb::read;
use crate::config::grammar::{parse_byte_size, parse_duration_ms};
use crate::config::maintenance::stringified;
use crate::json::Json;
use crate::maintenance::RunFlags;
use crate::maintenance::budget::{BudgetReport, SweepReport};
use crate::store::Store;
pub use plan::{EntryPlan, Rules, Settings};

/// What to clean and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// `session.maintenance` with the command-line overrides written into it.
    pub maintenance: Value,
    pub flags: RunFlags,
}

/// One database cleanup target.
#[derive(Debug, Clone)]
pub struct Target {
    pub agent_id: String,
    /// The path the user named (`--store`), or the JSON-era store path of the agent: the
    /// sweep's stale-temp rule uses its file name, as the reference does.
    pub store_path: PathBuf,
    /// The database.
    pub db: PathBuf,
}

impl Settings {
    /// `resolveMaintenanceConfigFromInput` of the release whose `rules` apply.
    pub fn resolve(m: &Value, rules: Rules) -> Settings {
        let get = |k: &str| m.as_object().and_then(|o| o.get(k));
        const DAY: i64 = 86_400_000;
        let prune_after_ms = stringified(get("pruneAfter"))
            .and_then(|s| parse_duration_ms(&s, "d"))
            .unwrap_or(30 * DAY);
        let archive_dashboard_after_ms = match get("archiveDashboardAfter") {
            Some(Value::Bool(false)) => None,
            Some(v) if v.as_f64() == Some(0.0) => None,
            raw => match stringified(raw) {
                None => Some(7 * DAY),
                Some(s) => match parse_duration_ms(&s, "d") {
                    Some(p) if p > 0 => Some(p),
                    Some(_) => None,
                    None => Some(7 * DAY),
                },
            },
        };
        let preserve_recent_ms = match get("preserveRecent") {
            None | Some(Value::Bool(false)) => None,
            raw => parse_duration_ms(&stringified(raw).unwrap_or_default(), "d"),
        };
        let max_disk_bytes = match get("maxDiskBytes") {
            Some(Value::Bool(false)) => None,
            raw => match stringified(raw) {
                None => Some(10_737_418_240),
                Some(s) => parse_byte_size(&s).filter(|b| *b > 0),
            },
        };
        let high_water_bytes = max_disk_bytes.map(|max| {
            let default = ((max as f64 * 0.8).floor() as i64).min(max).max(1);
            match stringified(get("highWaterBytes")).and_then(|s| parse_byte_size(&s)) {
                Some(p) if p > 0 => p.min(max),
                _ => default,
            }
        });
        let max_entries = match get("maxEntries") {
            None | Some(Value::Null) => rules.default_max_entries(),
            Some(v) => v.as_f64().unwrap_or(rules.default_max_entries()),
        };
        Settings {
            prune_after_ms,
            archive_dashboard_after_ms,
            max_entries,
            model_run_prune_after_ms: DAY,
            preserve_recent_ms,
            max_disk_bytes,
            high_water_bytes,
        }
    }
}

/// The per-store summary the reference prints with `--json`: the JSON era's summary (its
/// `repaired` left out) with the archive counters.
#[derive(Debug, Clone)]
pub struct Summary {
    /// What both eras print; `store_path` is the database path, as the reference shows it.
    pub base: crate::maintenance::summary::Summary,
    pub rules: Rules,
    pub archived: u64,
    pub cap_archived: u64,
    /// The keys of the maintenance's removals an applied run left because another connection
    /// changed their entry after the plan (the reference skips them too, silently); not in
    /// the reference's summary.
    pub changed_meanwhile: Vec<String>,
}

impl std::ops::Deref for Summary {
    type Target = crate::maintenance::summary::Summary;
    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl Summary {
    /// The summary of `entry_plan` for target `t`, whose store had `before_count` entries:
    /// what the run measured besides (the entries after it, the sweep, the budget, whether it
    /// changes anything) is the caller's to fill in with [`Summary::measured`].
    pub fn of_plan(
        t: &Target,
        rules: Rules,
        o: &Options,
        before_count: usize,
        entry_plan: &EntryPlan,
    ) -> Summary {
        let count = |phase| entry_plan.count(phase) as u64;
        Summary {
            base: crate::maintenance::summary::Summary {
                agent_id: t.agent_id.clone(),
                store_path: t.db.display().to_string(),
                mode: o.flags.mode.clone(),
                dry_run: o.flags.dry_run,
                before_count: before_count as u64,
                after_count: 0,
                repaired: 0,
                missing: entry_plan.missing.len() as u64,
                dm_scope_retired: entry_plan.dm_scope.len() as u64,
                model_run_pruned: entry_plan.model_run.len() as u64,
                pruned: entry_plan.stale.len() as u64,
                capped: entry_plan.capped.len() as u64,
                unreferenced: SweepReport::default(),
                disk_budget: None,
                would_mutate: false,
                applied_count: None,
                logs: Vec::new(),
                left_in_use: Vec::new(),
            },
            rules,
            archived: count(plan::ArchivePhase::Dashboard) + count(plan::ArchivePhase::Age),
            cap_archived: count(plan::ArchivePhase::Cap),
            changed_meanwhile: Vec::new(),
        }
    }

    /// This summary with what the run measured: the entries left, the sweep, the budget and
    /// whether anything changes (or would).
    pub fn measured(
        mut self,
        after_count: u64,
        unreferenced: SweepReport,
        disk_budget: Option<BudgetReport>,
        would_mutate: bool,
    ) -> Summary {
        self.base.after_count = after_count;
        self.base.unreferenced = unreferenced;
        self.base.disk_budget = disk_budget;
        self.base.would_mutate = would_mutate;
        self
    }

    /// The summary as a JSON object, keys in the reference's order: the JSON era's without
    /// `repaired`, with `archived` (and on 2026.9.x `capArchived`) after `modelRunPruned`.
    pub fn to_json(&self) -> Value {
        let Value::Object(base) = self.base.to_json() else {
            unreachable!("a summary is an object")
        };
        let mut m = Map::new();
        for (k, v) in base {
            if k == "repaired" {
                continue;
            }
            let after = k == "modelRunPruned";
            m.insert(k, v);
            if after {
                m.insert("archived".into(), json!(self.archived));
                if self.rules == Rules::V9 {
                    m.insert("capArchived".into(), json!(self.cap_archived));
                }
            }
        }
        Value::Object(m)
    }
}

/// The plan of one database, plus what the dry-run table needs.
#[derive(Debug, Clone)]
pub struct Preview {
    pub summary: Summary,
    /// Every entry before the plan, in the reference's listing order.
    pub before: Store,
    pub plan: EntryPlan,
    pub settings: Settings,
    pub schema: crate::agentdb::Schema,
}

/// Every `session_nodes` entry as the reference lists it (`entry_json` parsed), in key order.
/// A row whose entry has no identity (`parseSqliteSessionEntryRecord`: an object with a string
/// `sessionId` and a finite `updatedAt` that agree with the row's `current_session_id` and
/// `updated_at`) is not an entry: the node a removal cleared to keep its cold windows
/// (`entry_json` `{}`) is one; it is neither listed, counted nor touched.
pub fn load_entries(conn: &rusqlite::Connection) -> Result<Store> {
    let mut stmt = conn.prepare(
        "SELECT session_key, entry_json, current_session_id, updated_at FROM session_nodes \
         ORDER BY session_key",
    )?;
    let mut rows = stmt.query([])?;
    let mut s = Store::new();
    while let Some(r) = rows.next()? {
        let key: String = r.get(0)?;
        if let Some(v) = row_entry(&key, r)? {
            s.insert(key, v);
        }
    }
    Ok(s)
}

/// The entry of one `session_nodes` key as [`load_entries`] lists it; `None` when there is no
/// such row or it holds no entry.
pub fn load_entry(conn: &rusqlite::Connection, key: &str) -> Result<Option<Json>> {
    let mut stmt = conn.prepare_cached(
        "SELECT session_key, entry_json, current_session_id, updated_at FROM session_nodes \
         WHERE session_key = ?1",
    )?;
    let mut rows = stmt.query([key])?;
    match rows.next()? {
        Some(r) => row_entry(key, r),
        None => Ok(None),
    }
}

/// A `session_nodes` row (`session_key, entry_json, current_session_id, updated_at`) as an
/// entry, when it has an identity (see [`load_entries`]).
fn row_entry(key: &str, r: &rusqlite::Row<'_>) -> Result<Option<Json>> {
    let json: String = r.get(1)?;
    let v = crate::jsjson::parse(json.as_bytes())
        .with_context(|| format!("session_nodes row {key:?}: entry_json does not parse"))?;
    let current: Option<String> = r.get(2)?;
    let updated: Option<f64> = r.get(3)?;
    let identity = v.get("sessionId").and_then(Value::as_str) == current.as_deref()
        && current.is_some()
        && v.get("updatedAt")
            .and_then(Value::as_f64)
            .is_some_and(|u| u.is_finite() && Some(u) == updated);
    Ok(identity.then(|| Json::from_value(v)))
}

/// The preserve set of a preview: `--active-key`, normalized (`normalizeStoreSessionKey`).
/// The preview protects only the key itself, as the reference's does; the apply adds its
/// parent chain ([`active_chain`]).
fn preserve_keys(o: &Options) -> HashSet<String> {
    crate::keys::preserve_set(o.flags.active_key.as_deref())
        .into_iter()
        .collect()
}

/// The preserve set of an apply (`collectSqliteSessionMaintenanceBaseKeys`): `--active-key`
/// and the chain of its parents, each key normalized, as the runtime walks it in the
/// maintenance transaction after the `--fix-*` removals. 2026.9.x walks the
/// `parent_session_key` projection of the unarchived nodes (the entry's `parentSessionKey`,
/// else its `spawnedBy`); 2026.8.x the `parentSessionKey` of every entry. `s` is the store
/// after the removals.
pub fn active_chain(
    conn: &rusqlite::Connection,
    rules: Rules,
    s: &Store,
    active: Option<&str>,
) -> Result<HashSet<String>> {
    use crate::keys::normalize_key;
    let mut parents: std::collections::HashMap<String, String> = Default::default();
    let column = rules == Rules::V9 && {
        let mut stmt = conn.prepare(
            "SELECT 1 FROM pragma_table_info('session_nodes') WHERE name = 'parent_session_key'",
        )?;
        stmt.exists([])?
    };
    if column {
        let mut stmt = conn.prepare(
            "SELECT session_key, parent_session_key FROM session_nodes WHERE archived_at IS NULL",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let key: String = r.get(0)?;
            if let Some(parent) = r.get::<_, Option<String>>(1)?
                && s.contains_key(&key)
            {
                parents.insert(key, parent);
            }
        }
    } else {
        for (k, e) in s {
            if let Some(p) = e.get("parentSessionKey").and_then(Json::as_str) {
                parents.insert(k.clone(), p.to_string());
            }
        }
    }
    let mut out = HashSet::new();
    let mut current = normalize_key(active.unwrap_or(""));
    while !current.is_empty() && out.insert(current.clone()) {
        current = normalize_key(parents.get(&current).map_or("", String::as_str));
    }
    Ok(out)
}

/// The keys 2026.9.x's apply leaves to a lifecycle mutation: it makes the `--fix-*` removals
/// as one lifecycle mutation whose identities are each removed entry's key and session id
/// (`withSqliteSessionMutations`), and plans the maintenance inside it, where every unarchived
/// node whose key, normalized key or current session id is one of those identities is
/// preserved (`resolveSessionMaintenancePreserveKeys`): an entry sharing its session with a
/// retired one is not capped or pruned in that run. 2026.8.x has no such preservation, and a
/// preview none (nothing is removed yet when it plans). `s` is the store after the removals.
pub fn lifecycle_preserved<'a>(
    conn: &rusqlite::Connection,
    s: &Store,
    removed: impl Iterator<Item = (&'a String, &'a Json)>,
) -> Result<HashSet<String>> {
    use crate::js::js_trim;
    use crate::keys::normalize_key;
    let mut identities: HashSet<String> = HashSet::new();
    for (key, entry) in removed {
        let Some(sid) = entry.get("sessionId").and_then(Json::as_str) else {
            continue;
        };
        if sid.is_empty() {
            continue;
        }
        for identity in [js_trim(key), js_trim(sid)] {
            if !identity.is_empty() {
                identities.insert(identity.to_string());
            }
        }
    }
    let mut out = HashSet::new();
    if identities.is_empty() {
        return Ok(out);
    }
    let mut stmt = conn.prepare(
        "SELECT session_key, current_session_id FROM session_nodes WHERE archived_at IS NULL",
    )?;
    let mut rows = stmt.query([])?;
    while let Some(r) = rows.next()? {
        let key: String = r.get(0)?;
        if !s.contains_key(&key) {
            continue;
        }
        let sid: Option<String> = r.get(1)?;
        let normalized = normalize_key(&key);
        let held = [
            Some(js_trim(&key)),
            Some(normalized.as_str()),
            sid.as_deref().map(js_trim),
        ]
        .into_iter()
        .flatten()
        .any(|identity| !identity.is_empty() && identities.contains(identity));
        if held {
            out.insert(key);
            out.insert(normalized);
        }
    }
    Ok(out)
}

/// Plan one database without writing anything.
pub fn preview(t: &Target, o: &Options) -> Result<Preview> {
    let ctx = || t.db.display().to_string();
    let conn = crate::agentdb::open_read_only(&t.db).with_context(ctx)?;
    let schema = crate::agentdb::read_schema(&conn).with_context(ctx)?;
    if !schema.has_table("session_nodes") {
        return Err(anyhow::Error::new(crate::exit::Refusal::Unsafe(format!(
            "{}: agent {:?} has moved to SQLite, but this database has no session tables \
             (schema version {}); clawkeeper neither reads nor writes it, and the JSON-era \
             sessions.json is no longer the live store",
            t.db.display(),
            t.agent_id,
            schema.user_version
        ))));
    }
    let rules = Rules::for_schema(schema.user_version);
    let settings = Settings::resolve(&o.maintenance, rules);
    let before = load_entries(&conn).with_context(ctx)?;
    let mut s = before.clone();
    let keys = preserve_keys(o);
    let p = plan::Preserve {
        rules,
        keys: &keys,
        recent_ms: settings.preserve_recent_ms,
        now_ms: crate::maintenance::now_ms(),
    };
    let entry_plan = plan_all(&conn, t, o, rules, &settings, &p, &mut s);
    let layout = disk::Layout::new(t, rules);
    let excluded = disk::entry_artifacts(&before, entry_plan.deleted(), &layout.sessions_dir);
    let unreferenced = disk::sweep(&layout, &s, settings.prune_after_ms, &excluded, None)?;
    let (disk_budget, budget_would_mutate) =
        disk::inspect_budget(&conn, &layout, &settings, o, rules)?;
    let would_mutate = !entry_plan.missing.is_empty()
        || !entry_plan.dm_scope.is_empty()
        || !entry_plan.model_run.is_empty()
        || !entry_plan.archived.is_empty()
        || !entry_plan.stale.is_empty()
        || !entry_plan.capped.is_empty()
        || unreferenced.removed_files > 0
        || budget_would_mutate;
    let summary = Summary::of_plan(t, rules, o, before.len(), &entry_plan).measured(
        s.len() as u64,
        unreferenced,
        disk_budget,
        would_mutate,
    );
    Ok(Preview {
        summary,
        before,
        plan: entry_plan,
        settings,
        schema,
    })
}

/// Whether the transcript of `session_id` has no message (`inspectConfirmedMessageFreeTranscript`):
/// its rows are read in `seq` order, all of them (`readTranscriptEventRows`), and no rows count
/// as none. A transcript that cannot be judged is not confirmed: one in cold storage (the
/// runtime refuses to read it hot), one that cannot be read, or a row that does not parse
/// (`JSON.parse` throws).
pub fn message_free(conn: &rusqlite::Connection, session_id: &str) -> bool {
    use std::io::BufRead;
    if !matches!(write::is_cold(conn, session_id), Ok(false)) {
        return false;
    }
    let found = read::with_transcript(conn, session_id, |r| {
        let reader = std::io::BufReader::new(r);
        for line in reader.split(b'\n') {
            let line = line?;
            match crate::jsjson::parse(&line) {
                Ok(v) if !removals::is_message_record(&v) => {}
                _ => return Ok(true),
            }
        }
        Ok(false)
    });
    matches!(found, Ok(false))
}

/// The `--fix-missing` and `--fix-dm-scope` removals on `s`: (missing, dm-scope) keys.
pub fn fix_removals(
    conn: &rusqlite::Connection,
    t: &Target,
    o: &Options,
    rules: Rules,
    s: &mut Store,
) -> (Vec<String>, Vec<String>) {
    let missing = if o.flags.fix_missing {
        removals::fix_missing(s, rules, |sid| message_free(conn, sid))
    } else {
        Vec::new()
    };
    let dm_scope = if o.flags.fix_dm_scope {
        removals::retire_dm_scope(
            s,
            &o.flags.dm_scope,
            &t.agent_id,
            o.flags.active_key.as_deref(),
        )
    } else {
        Vec::new()
    };
    (missing, dm_scope)
}

/// The `--fix-missing` and `--fix-dm-scope` removals, then the entry plan, on `s`.
pub fn plan_all(
    conn: &rusqlite::Connection,
    t: &Target,
    o: &Options,
    rules: Rules,
    settings: &Settings,
    p: &plan::Preserve<'_>,
    s: &mut Store,
) -> EntryPlan {
    let (missing, dm_scope) = fix_removals(conn, t, o, rules, s);
    let mut entry_plan = plan::plan(s, settings, p, crate::maintenance::now_ms);
    entry_plan.missing = missing;
    entry_plan.dm_scope = dm_scope;
    entry_plan
}

/// Where the database of a JSON-era store path is: `<sessions>/../agent/openclaw-agent.sqlite`,
/// or the path itself when it names a database.
pub fn database_for_store(store_path: &Path) -> Option<PathBuf> {
    if crate::agentdb::is_database_path(store_path) {
        return Some(store_path.to_path_buf());
    }
    crate::agentdb::path_for_sessions_dir(store_path.parent()?)
}
