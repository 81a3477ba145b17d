// Appends one user message to a transcript with the reference runtime's own SessionManager.
//   usage: node append-message.mjs ORACLE_DIR TRANSCRIPT.jsonl
// The message's content is "next [media attached: /tmp/in/h.png]". Prints the new leaf id.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [oracleDir, transcript] = process.argv.slice(2);
const dist = path.join(oracleDir, "node_modules", "openclaw", "dist");
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
const sm = SessionManager.open(path.resolve(transcript));
const id = sm.appendMessage({
  role: "user",
  content: "next [media attached: /tmp/in/h.png]",
  timestamp: Date.now(),
});
process.stdout.write(JSON.stringify({ leafId: id }) + "\n");
