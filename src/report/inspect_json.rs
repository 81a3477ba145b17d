//! The `inspect --json` documents: `{"stores": [...], "totals": {...}}` for stores and
//! `{"transcript": {...}}` for `--transcript FILE`. Field names are a stable contract (the
//! README documents them); sessions are sorted like the tables and cut only by an explicit
//! `--limit`.

use serde_json::{Map, Value, json};

use super::inspect_text::{View, sorted};
use crate::fsutil::lock::Holder;
use crate::inspect::database::DbFacts;
use crate::inspect::single::TranscriptReport;
use crate::inspect::{FileStat, SessionRow, StoreReport, TranscriptFacts};
use crate::jsjson::Sink;
use crate::jsonout::Pretty;

fn opt_num(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |x| {
        serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
    })
}

/// The per-transcript figures shared by a store's sessions and `--transcript`.
fn facts_fields(m: &mut Map<String, Value>, facts: Option<&TranscriptFacts>) {
    let f = facts.cloned().unwrap_or_default();
    let c = &f.counts;
    let fields = json!({
        "transcriptBytes": c.bytes,
        "entries": c.entries,
        "messages": c.messages,
        "images": c.images,
        "imageBytes": c.image_bytes,
        "mediaReferences": c.media_references,
        "silentReplies": c.silent_replies,
        "toolOutputBytes": c.tool_output_bytes,
        "thinkingBytes": c.thinking_bytes,
        "estimatedContextTokens": f.context_tokens.unwrap_or(0),
        "compacted": c.compacted,
        "cacheTtlMarkers": c.cache_ttl_markers,
        "cacheTtlBytes": c.cache_ttl_bytes,
        "unparsableLines": c.unparsable_lines,
    });
    if let Value::Object(o) = fields {
        m.extend(o);
    }
}

/// One row of `report`.
fn session_json(report: &StoreReport, r: &SessionRow) -> Value {
    let f = r.facts.as_deref().cloned().unwrap_or_default();
    let mut m = Map::new();
    m.insert("key".into(), json!(r.key));
    m.insert("sessionId".into(), json!(r.session_id));
    m.insert("kind".into(), json!(r.kind.as_str()));
    m.insert("updatedAt".into(), opt_num(r.updated_at));
    m.insert(
        "transcript".into(),
        json!(report.transcript(r).map(|p| p.display().to_string())),
    );
    m.insert("missing".into(), json!(r.facts.is_none()));
    facts_fields(&mut m, r.facts.as_deref());
    m.insert(
        "reclaimable".into(),
        json!({
            "strip-images": f.strip_bytes,
            "prune-noreply": f.prune_bytes,
            "prune-cache-ttl": f.cache_ttl_bytes,
            "compactTokens": f.compact_tokens,
        }),
    );
    Value::Object(m)
}

fn lock_json(h: &Holder) -> Value {
    json!({
        "path": h.lock_path.display().to_string(),
        "pid": h.pid,
        "alive": h.alive,
        "stale": h.stale_reasons,
    })
}

/// A store's document, its `sessions` and `damage.missingTranscripts` left empty (see
/// [`write_json`]).
fn store_json(r: &StoreReport) -> Value {
    let mut files = Map::new();
    for (cat, st) in &r.files {
        files.insert((*cat).into(), json!({"count": st.count, "bytes": st.bytes}));
    }
    let mut kinds = Map::new();
    for (k, st) in &r.kinds {
        kinds.insert(
            k.as_str().into(),
            json!({"entries": st.entries, "oldest": opt_num(st.oldest), "newest": opt_num(st.newest)}),
        );
    }
    let mut fields = Map::new();
    for (k, n) in &r.store_fields {
        fields.insert(k.clone(), json!(n));
    }
    let d = &r.damage;
    let path_list = |v: &[(std::path::PathBuf, usize)]| -> Value {
        v.iter()
            .map(|(p, n)| json!({"transcript": p.display().to_string(), "count": n}))
            .collect()
    };
    json!({
        "agentId": r.agent_id,
        "storePath": r.store_path.display().to_string(),
        "sqlite": r.sqlite.as_ref().map(|p| p.display().to_string()),
        "entries": r.entries,
        "diskBytes": r.disk_bytes,
        "storeBytes": r.store_bytes,
        "storeFields": fields,
        "files": files,
        "kinds": kinds,
        "sessionsMatched": r.sessions.len(),
        // Both long lists are written by `write_json`, an element at a time.
        "sessions": [],
        "reclaimable": reclaimable_json(r),
        "database": r.database.as_ref().map(database_json),
        "damage": {
            "missingTranscripts": [],
            "unparsableLines": d.unparsable_lines.iter()
                .map(|(p, l)| json!({"transcript": p.display().to_string(), "lines": l}))
                .collect::<Vec<_>>(),
            "danglingParents": path_list(&d.dangling_parents),
            "orphanedToolResults": path_list(&d.orphan_tool_results),
            "locks": d.locks.iter().map(lock_json).collect::<Vec<_>>(),
            "unreadable": d.unreadable.iter()
                .map(|(p, e)| json!({"transcript": p.display().to_string(), "error": e}))
                .collect::<Vec<_>>(),
            "noSessionHeader": d.no_header.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>(),
        },
        "notes": r.notes,
    })
}

/// What each command would reclaim. For a SQLite-era agent the transcript commands' figures
/// are bytes its rows store (`compact`'s, as for files, context tokens), and `vacuum` is
/// there.
fn reclaimable_json(r: &StoreReport) -> Value {
    let rc = &r.reclaimable;
    match &r.database {
        None => json!({
            "cleanup": rc.cleanup,
            "strip-images": rc.strip_images,
            "prune-noreply": rc.prune_noreply,
            "prune-cache-ttl": rc.prune_cache_ttl,
            "compactTokens": rc.compact_tokens,
        }),
        Some(db) => json!({
            "cleanup": rc.cleanup,
            "strip-images": rc.strip_images,
            "prune-noreply": rc.prune_noreply,
            "prune-cache-ttl": rc.prune_cache_ttl,
            "compactTokens": rc.compact_tokens,
            "vacuum": db.vacuum.reclaimed(),
        }),
    }
}

fn database_json(db: &DbFacts) -> Value {
    let sp = &db.space;
    let stat = |s: &FileStat| json!({"count": s.count, "bytes": s.bytes});
    let mut tables = Map::new();
    for (t, n) in &db.tables {
        tables.insert(t.clone(), json!(n));
    }
    json!({
        "path": db.path.display().to_string(),
        "schemaVersion": db.schema_version,
        "appVersion": db.app_version,
        "dbBytes": sp.db_bytes,
        "walBytes": sp.wal_bytes,
        "shmBytes": sp.shm_bytes,
        "pageSize": sp.page_size,
        "pageCount": sp.page_count,
        "freePages": sp.freelist_pages,
        "freeBytes": sp.free_bytes(),
        "autoVacuum": sp.auto_vacuum,
        "journalMode": sp.journal_mode,
        "tableBytes": tables,
        "archivedEntries": db.archived_entries,
        "transcriptEvents": db.transcript_events,
        "transcriptEventBytes": db.transcript_event_bytes,
        "trajectoryEvents": db.trajectory_events,
        "transcriptArchives": stat(&db.archive_rows),
        "coldArchives": stat(&db.cold_rows),
        "vacuum": {
            "dbBytesAfter": db.vacuum.db_bytes_after,
            "walBytesAfter": db.vacuum.wal_bytes_after,
            "reclaimedBytes": db.vacuum.reclaimed(),
        },
    })
}

/// The `--json` document of a store run, with `resolved_dirs` (the directories reached through
/// a symlink) as `resolvedDirs`, written to `out` a session at a time: a store of hundreds of
/// thousands of entries is never one `Value` (see `crate::jsonout`). `reclaimable.cleanup` is
/// `null` when it was not computed (`--no-cleanup`); the total is `null` when no store
/// computed it.
pub fn write_json<S: Sink>(
    out: &mut S,
    reports: &[StoreReport],
    view: &View,
    resolved_dirs: Value,
) {
    let mut p = Pretty::new(out);
    p.begin_object();
    p.key("stores");
    p.begin_array();
    for r in reports {
        write_store(&mut p, r, view);
    }
    p.end();
    p.member("totals", &totals_json(reports));
    p.member("resolvedDirs", &resolved_dirs);
    p.end();
}

/// One store's document, its two long lists streamed.
fn write_store<S: Sink>(p: &mut Pretty<S>, r: &StoreReport, view: &View) {
    let Value::Object(doc) = store_json(r) else {
        unreachable!("a store's document is an object")
    };
    p.begin_object();
    for (k, v) in &doc {
        match (k.as_str(), v) {
            ("sessions", _) => {
                p.key(k);
                p.begin_array();
                for row in sorted(&r.sessions, view) {
                    p.value(&session_json(r, row));
                }
                p.end();
            }
            ("damage", Value::Object(damage)) => {
                p.key(k);
                p.begin_object();
                for (dk, dv) in damage {
                    if dk == "missingTranscripts" {
                        p.key(dk);
                        p.begin_array();
                        for key in r.missing_transcripts() {
                            p.value(&Value::String(key.to_owned()));
                        }
                        p.end();
                    } else {
                        p.member(dk, dv);
                    }
                }
                p.end();
            }
            _ => p.member(k, v),
        }
    }
    p.end();
}

fn totals_json(reports: &[StoreReport]) -> Value {
    let sum = |f: &dyn Fn(&StoreReport) -> u64| reports.iter().map(f).sum::<u64>();
    let cleanup: Vec<i64> = reports
        .iter()
        .filter_map(|r| r.reclaimable.cleanup)
        .collect();
    json!({
        "stores": reports.len(),
        "entries": sum(&|r| r.entries),
        "diskBytes": sum(&|r| r.disk_bytes),
        "reclaimable": {
            "cleanup": (!cleanup.is_empty()).then(|| cleanup.iter().sum::<i64>()),
            "strip-images": reports.iter().map(|r| r.reclaimable.strip_images).sum::<i64>(),
            "prune-noreply": reports.iter().map(|r| r.reclaimable.prune_noreply).sum::<i64>(),
            "prune-cache-ttl": reports.iter().map(|r| r.reclaimable.prune_cache_ttl).sum::<i64>(),
            "compactTokens": sum(&|r| r.reclaimable.compact_tokens),
            "vacuum": reports.iter().any(|r| r.database.is_some()).then(|| {
                reports.iter().filter_map(|r| r.database.as_ref()).map(|d| d.vacuum.reclaimed()).sum::<i64>()
            }),
        },
    })
}

/// The `--json` document of `inspect --transcript FILE`. `reclaimable.cleanup` is always
/// `null`: cleanup works on stores, not on single transcripts.
pub fn transcript_json(t: &TranscriptReport) -> Value {
    let f = &t.facts;
    let mut m = Map::new();
    m.insert("path".into(), json!(t.path.display().to_string()));
    m.insert("sessionId".into(), json!(t.session_id));
    facts_fields(&mut m, Some(f));
    m.insert("danglingParents".into(), json!(f.dangling_parents));
    m.insert("orphanedToolResults".into(), json!(f.orphan_tool_results));
    m.insert(
        "lock".into(),
        t.lock.as_ref().map_or(Value::Null, lock_json),
    );
    m.insert(
        "reclaimable".into(),
        json!({
            "cleanup": Value::Null,
            "strip-images": f.strip_bytes,
            "prune-noreply": f.prune_bytes,
            "prune-cache-ttl": f.cache_ttl_bytes,
            "compactTokens": f.compact_tokens,
        }),
    );
    json!({ "transcript": Value::Object(m) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::TranscriptName;
    use crate::keys::SessionKind;
    use crate::report::inspect_text::Sort;

    /// A store of many entries whose transcripts are gone.
    fn report(n: usize) -> StoreReport {
        let mut r = StoreReport {
            agent_id: "main".into(),
            store_path: "/state/agents/main/sessions/sessions.json".into(),
            transcripts_dir: "/state/agents/main/sessions".into(),
            entries: n as u64,
            ..StoreReport::default()
        };
        for i in 0..n {
            let key = format!("agent:main:cron:{i:08x}:run:{i}");
            r.sessions.push(SessionRow {
                key: key.into(),
                session_id: Some(format!("{i:08x}-0000-4000-8000-000000000000").into()),
                kind: SessionKind::Cron,
                updated_at: Some(1_772_323_200_000.0 + i as f64),
                transcript: TranscriptName::OfSessionId,
                facts: (i % 100 == 0).then(Box::default),
                transcript_missing: true,
            });
        }
        r
    }

    #[test]
    fn the_store_document_is_written_a_session_at_a_time() {
        let reports = [report(10_000)];
        let view = View {
            sort: Sort::Age,
            limit: 0,
            now_ms: 1_772_323_300_000.0,
        };
        let ((), streamed) = crate::testalloc::peak_during(|| {
            let mut sink = crate::jsonout::IoSink::new(std::io::sink());
            write_json(&mut sink, &reports, &view, Value::Array(Vec::new()));
            sink.finish().unwrap();
        });
        let mut text = String::new();
        write_json(&mut text, &reports, &view, Value::Array(Vec::new()));
        // The same document built whole, as one `Value`.
        let (doc, whole) = crate::testalloc::peak_during(|| {
            let r = &reports[0];
            let mut store = store_json(r);
            store["sessions"] = sorted(&r.sessions, &view)
                .into_iter()
                .map(|row| session_json(r, row))
                .collect();
            store["damage"]["missingTranscripts"] =
                json!(r.missing_transcripts().collect::<Vec<_>>());
            json!({"stores": [store], "totals": totals_json(&reports), "resolvedDirs": []})
        });
        assert_eq!(text, crate::jsjson::to_string_pretty(&doc));
        // A row names its transcript by its whole path.
        assert_eq!(
            doc["stores"][0]["sessions"][0]["transcript"],
            "/state/agents/main/sessions/00000000-0000-4000-8000-000000000000.jsonl"
        );
        assert!(whole > 10_000 * 2000, "{whole}");
        // The sorted order (a pointer a session) and one session at a time.
        assert!(streamed < 512 << 10, "{streamed} bytes held while writing");
    }
}
