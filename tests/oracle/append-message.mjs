// Appends one user message to a transcript with the reference runtime's own SessionManager.
//   usage: node append-message.mjs ORACLE_DIR TRANSCRIPT.jsonl
// The message's content is "next [media attached: /tmp/in/h.png]". Prints the new leaf id.
import path from "node:path";
import { distDir, loadSessionManager } from "./dist.mjs";

const [oracleDir, transcript] = process.argv.slice(2);
const SessionManager = await loadSessionManager(distDir(oracleDir));
const sm = SessionManager.open(path.resolve(transcript));
const id = sm.appendMessage({
  role: "user",
  content: "next [media attached: /tmp/in/h.png]",
  timestamp: Date.now(),
});
process.stdout.write(JSON.stringify({ leafId: id }) + "\n");
