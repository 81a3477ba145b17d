// Loads several transcripts with the reference runtime's own SessionManager in one process
// and prints, for each, one line "@@ctx " + JSON {file, ok, leafId, messages | error}.
// The prefix keeps the runtime's own log lines on stdout from being mistaken for results.
//
//   usage: node batch-context.mjs ORACLE_DIR FILE...
import path from "node:path";
import { distDir, loadSessionManager } from "./dist.mjs";

const [oracleDir, ...files] = process.argv.slice(2);
const SessionManager = await loadSessionManager(distDir(oracleDir));
for (const file of files) {
  let result;
  try {
    const sm = SessionManager.open(path.resolve(file));
    const ctx = sm.buildSessionContext();
    result = { file, ok: true, leafId: sm.getLeafId(), messages: ctx.messages };
  } catch (err) {
    result = { file, ok: false, error: String(err && err.stack ? err.stack : err) };
  }
  process.stdout.write("@@ctx " + JSON.stringify(result) + "\n");
}
