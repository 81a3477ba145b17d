//! The SQLite-era side of the transcript commands: each agent database's sessions planned
//! with the command's planner (`agentdb::transcripts`), previewed, or written under the guard
//! `vacuum` and `cleanup` hold (refuse unknown schema versions, lifecycle lock and leases,
//! check before, clear the integrity record, write, check after).

use std::time::Duration;

use anyhow::{Context, Result};

use super::problems::Problems;
use super::transcript_targets::Database;
use crate::agentdb::{self, guard, transcripts as rows};
use crate::exit::Refusal;
use crate::keys::SessionSelector;
use crate::transcript::job::{Mode, Options, Outcome, PlannerAt, Status};

/// Per-session outcomes of every database, with their session keys, and whether `session`
/// matched a session node. A database that cannot be worked on is a problem of its own
/// (a held lock or lease: exit 4; an unknown schema version: exit 3); the others go on.
pub fn run(
    databases: &[Database],
    session: Option<&SessionSelector>,
    opts: Options,
    planner: &PlannerAt,
    problems: &mut Problems,
) -> (Vec<(Outcome, Option<String>)>, bool) {
    let mut results = Vec::new();
    let mut matched = false;
    for d in databases {
        match one(d, session, opts, planner, &mut results) {
            Ok(m) => matched |= m,
            Err(e) => problems.error(&e),
        }
    }
    (results, matched)
}

fn one(
    d: &Database,
    session: Option<&SessionSelector>,
    opts: Options,
    planner: &PlannerAt,
    results: &mut Vec<(Outcome, Option<String>)>,
) -> Result<bool> {
    let db = &d.db;
    let ctx = || db.display().to_string();
    let conn = agentdb::open_read_only(db)?;
    let schema = agentdb::read_schema(&conn).with_context(ctx)?;
    for table in ["session_nodes", "transcript_events"] {
        if !schema.has_table(table) {
            anyhow::bail!(
                "{}: not an OpenClaw agent database (no {table} table)",
                db.display()
            );
        }
    }
    let (sessions, matched) = rows::sessions(&conn, session).with_context(ctx)?;
    if opts.mode == Mode::Preview {
        let refusal = schema.write_refusal();
        for s in &sessions {
            let mut out = plan_one(&conn, d, s, opts, planner).0;
            if let Some(why) = &refusal
                && out.status == Status::WouldChange
            {
                out.notes.push(format!("--enforce would refuse: {why}"));
            }
            results.push((out, Some(s.key.clone())));
        }
        return Ok(matched);
    }
    drop(conn);
    if let Some(why) = schema.write_refusal() {
        return Err(
            anyhow::Error::new(Refusal::Unsafe(format!("{why}; nothing was written")))
                .context(ctx()),
        );
    }
    let wait = opts.wait_lock.unwrap_or(Duration::ZERO);
    let _guard = guard::acquire(&d.state_dir, db, wait).with_context(ctx)?;
    let conn = agentdb::open_read_write(db)?;
    if let Err(problem) = agentdb::check(&conn).with_context(ctx)? {
        return Err(anyhow::Error::new(Refusal::Unsafe(format!(
            "the database fails its check before any write ({problem}); nothing was written"
        )))
        .context(ctx()));
    }
    let cols = rows::RowColumns::of(&conn).with_context(ctx)?;
    let mut cleared = false;
    for s in &sessions {
        let (mut out, plan) = plan_one(&conn, d, s, opts, planner);
        if let Some(plan) = plan {
            if !cleared {
                guard::clear_integrity_record(&d.state_dir, db)?;
                cleared = true;
            }
            rows::write(&conn, cols, &plan, &mut out);
        }
        results.push((out, Some(s.key.clone())));
    }
    if let Err(problem) = agentdb::check(&conn).with_context(ctx)? {
        anyhow::bail!(
            "{}: the database fails its check after the rewrite: {problem}",
            ctx()
        );
    }
    Ok(matched)
}

/// Plan one session, or say why it is passed over.
fn plan_one(
    conn: &rusqlite::Connection,
    d: &Database,
    s: &rows::Session,
    opts: Options,
    planner: &PlannerAt,
) -> (Outcome, Option<rows::Plan>) {
    let label = rows::label(&d.db, &s.session_id);
    match rows::passed_over(conn, &s.session_id) {
        Ok(Some(why)) => (Outcome::new(&label, Status::Skipped(why.into())), None),
        Ok(None) => rows::plan(conn, &label, &s.session_id, opts.measure, planner),
        Err(e) => (
            Outcome::new(&label, crate::transcript::job::failed(e)),
            None,
        ),
    }
}
