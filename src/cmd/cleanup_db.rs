//! The SQLite-era side of `clawkeeper cleanup`: which targets are agent databases, their
//! options, and the guarded apply of one database (as `vacuum` writes: refuse unknown schema
//! versions, hold the guard, check before, clear the integrity record, write, check after).

use std::time::Duration;

use anyhow::{Context, Result};

use crate::agentdb::{self, cleanup as dbc, guard};
use crate::cli::CleanupPlanArgs;
use crate::config::{Config, Env};
use crate::exit::Refusal;
use crate::targets::{self, Target};

/// The database a target's cleanup works on, when its agent moved to SQLite: the `--store`
/// path itself when it names a `.sqlite`, else the agent's database when it exists.
pub fn db_target(t: &Target) -> Option<dbc::Target> {
    let db = if agentdb::is_database_path(&t.store_path) {
        t.store_path.clone()
    } else {
        targets::sqlite_marker(&t.store_path).or_else(|| {
            let db = agentdb::path_for_sessions_dir(t.store_path.parent()?)?;
            std::fs::symlink_metadata(&db).is_ok().then_some(db)
        })?
    };
    Some(dbc::Target {
        agent_id: t.agent_id.clone(),
        store_path: t.store_path.clone(),
        db: std::path::absolute(&db).unwrap_or(db),
    })
}

/// Whether the target also still has its JSON-era `sessions.json` (a migration that did not
/// finish).
pub fn half_migrated(t: &Target) -> bool {
    !agentdb::is_database_path(&t.store_path) && t.store_path.is_file()
}

/// The options of a database cleanup: `plan`'s flags, with the configured mode unless
/// `enforce` (`inspect` predicts with `enforce` and `dry_run` off).
pub fn options(
    plan: &CleanupPlanArgs,
    enforce: bool,
    dry_run: bool,
    cfg: &Config,
) -> Result<dbc::Options> {
    use crate::config::maintenance::Maintenance;
    let maintenance = Maintenance::merged(
        cfg.get(&["session", "maintenance"]),
        &super::overrides(plan),
    )?;
    let mode = if enforce {
        serde_json::Value::String("enforce".into())
    } else {
        match maintenance.get("mode") {
            None | Some(serde_json::Value::Null) => serde_json::Value::String("enforce".into()),
            Some(v) => v.clone(),
        }
    };
    Ok(dbc::Options {
        maintenance,
        flags: super::run_flags(plan, cfg, mode, dry_run),
    })
}

/// Apply the cleanup of one database under the guard.
pub fn apply_one(
    t: &dbc::Target,
    env: &Env,
    o: &dbc::Options,
    planned: &dbc::Preview,
    wait: Duration,
) -> Result<dbc::Summary> {
    let db = &t.db;
    let ctx = || db.display().to_string();
    if let Some(why) = planned.schema.write_refusal() {
        return Err(
            anyhow::Error::new(Refusal::Unsafe(format!("{why}; nothing was written")))
                .context(ctx()),
        );
    }
    let state_dir = super::vacuum::state_dir_of(db, env);
    let _guard = guard::acquire(&state_dir, db, wait).with_context(ctx)?;
    let conn = agentdb::open_read_write(db).with_context(ctx)?;
    let schema = agentdb::read_schema(&conn).with_context(ctx)?;
    if schema.user_version != planned.schema.user_version {
        return Err(anyhow::Error::new(Refusal::Unsafe(
            "the schema version changed since the plan; nothing was written".into(),
        ))
        .context(ctx()));
    }
    if let Err(problem) = agentdb::check(&conn).with_context(ctx)? {
        return Err(anyhow::Error::new(Refusal::Unsafe(format!(
            "the database fails its check before any write ({problem}); nothing was written"
        )))
        .context(ctx()));
    }
    guard::clear_integrity_record(&state_dir, db)?;
    let summary = dbc::write::apply(&conn, t, o, planned).with_context(ctx)?;
    if let Err(problem) = agentdb::check(&conn).with_context(ctx)? {
        anyhow::bail!(
            "{}: the database fails its check after the cleanup: {problem}",
            ctx()
        );
    }
    Ok(summary)
}
