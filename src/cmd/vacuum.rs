//! `clawkeeper vacuum`: for each target agent, find its database, preview or run
//! `agentdb::vacuum` under `agentdb::guard`, and report bytes before and after. A JSON-era
//! agent (no database) has nothing to do; one bad database never stops the others.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use super::problems::Problems;
use crate::agentdb::{self, guard, vacuum};
use crate::cli::VacuumArgs;
use crate::config::Env;
use crate::exit::{Exit, Refusal};
use crate::report::vacuum::{self as render, Status, StoreVacuum};

pub fn run(args: &VacuumArgs) -> Result<Exit> {
    let mut problems = Problems::default();
    let (_cfg, env, targets) = super::resolve_targets(&args.target, &mut problems)?;
    let opts = vacuum::Options { full: args.full };
    let wait = args.wait_lock.unwrap_or(Duration::ZERO);
    let mut stores = Vec::new();
    for t in &targets {
        let mut report = StoreVacuum::new(&t.agent_id, agentdb::for_store(&t.store_path));
        if let Err(err) = vacuum_one(&mut report, &env, args.enforce, opts, wait) {
            report.fail(&err);
            problems.error(&err);
        }
        stores.push(report);
    }
    let out = if args.json {
        render::json(&stores, args.enforce, args.full)
    } else {
        render::text(&stores, args.full)
    };
    super::print_stdout(&out)?;
    Ok(problems.finish(Exit::Success))
}

/// The state dir whose locks and leases guard `db`: the one it sits in, else the one the
/// environment names.
pub(crate) fn state_dir_of(db: &Path, env: &Env) -> PathBuf {
    let abs = std::path::absolute(db).unwrap_or_else(|_| db.to_path_buf());
    agentdb::state_dir_for(&abs).unwrap_or_else(|| env.state_dir())
}

fn vacuum_one(
    report: &mut StoreVacuum,
    env: &Env,
    enforce: bool,
    opts: vacuum::Options,
    wait: Duration,
) -> Result<()> {
    let db = report.database.clone();
    if !agentdb::exists(&db) {
        report.status = Status::JsonEra;
        return Ok(());
    }
    let ctx = || format!("{}", db.display());
    // The open functions name the database themselves.
    let conn = agentdb::open_read_only(&db)?;
    let schema = agentdb::read_schema(&conn).with_context(ctx)?;
    report.schema_version = Some(schema.user_version);
    report.app_version = schema.meta.as_ref().and_then(|m| m.app_version.clone());
    let prediction = vacuum::predict(&conn, &db, opts).with_context(ctx)?;
    report.before = Some(prediction.before.clone());
    report.db_bytes_after = prediction.db_bytes_after;
    report.wal_bytes_after = prediction.wal_bytes_after;
    if prediction.is_noop() {
        report.status = Status::NothingToDo;
        return Ok(());
    }
    if !enforce {
        report.status = Status::WouldVacuum;
        if let Some(why) = schema.write_refusal() {
            report.note = Some(format!("--enforce would refuse: {why}"));
        }
        return Ok(());
    }
    drop(conn);
    if let Some(why) = schema.write_refusal() {
        return Err(anyhow::Error::new(Refusal::Unsafe(why)).context(ctx()));
    }
    let state_dir = state_dir_of(&db, env);
    let _guard = guard::acquire(&state_dir, &db, wait).with_context(ctx)?;
    let conn = agentdb::open_read_write(&db)?;
    if let Err(problem) = agentdb::check(&conn).with_context(ctx)? {
        return Err(anyhow::Error::new(Refusal::Unsafe(format!(
            "the database fails its check before any write ({problem}); nothing was written"
        )))
        .context(ctx()));
    }
    guard::clear_integrity_record(&state_dir, &db)?;
    let applied = vacuum::apply(&conn, &db, opts).with_context(ctx)?;
    report.before = Some(applied.before);
    report.db_bytes_after = applied.after.db_bytes;
    report.wal_bytes_after = applied.after.wal_bytes;
    report.status = Status::Vacuumed;
    if let Err(problem) = agentdb::check(&conn).with_context(ctx)? {
        anyhow::bail!(
            "{}: the database fails its check after the vacuum: {problem}",
            ctx()
        );
    }
    Ok(())
}
