// Loads several transcripts with the reference runtime's own SessionManager in one process
// and prints, for each, one line "@@ctx " + JSON {file, ok, leafId, messages | error}.
// The prefix keeps the runtime's own log lines on stdout from being mistaken for results.
//
//   usage: node batch-context.mjs ORACLE_DIR FILE...
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [oracleDir, ...files] = process.argv.slice(2);
const dist = path.join(oracleDir, "node_modules", "openclaw", "dist");
// Several chunks are named session-manager-* (one in 2026.7.1, more in later releases); take
// the one that exports the class, under whatever short alias, found by its shape.
let SessionManager;
for (const chunk of fs.readdirSync(dist).filter((n) => /^session-manager-.*\.js$/.test(n)).sort()) {
  const mod = await import(pathToFileURL(path.join(dist, chunk)).href);
  SessionManager = Object.values(mod).find(
    (v) => typeof v === "function" && typeof v.open === "function" && typeof v.inMemory === "function",
  );
  if (SessionManager) break;
}
if (!SessionManager) {
  console.error(`no SessionManager in the session-manager chunks under ${dist}`);
  process.exit(2);
}
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
