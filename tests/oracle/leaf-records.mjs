// The reference runtime's view of transcripts with `leaf` control records, and transcripts
// that its own SessionManager writes with them.
//
//   node leaf-records.mjs ORACLE_DIR tree FILE...
//     For each file, prints "@@tree " + JSON {file, ok, leafId, branch, context | error}:
//     the leaf, the ids of the active branch (getBranch), and the context (buildSessionContext)
//     as one key per message: the first «…» marker in it, else the whole message as JSON
//     (a compaction's summary message: "summary:" before that).
//     Files are opened in place: pass copies (the runtime may rewrite what it opens).
//
//   node leaf-records.mjs ORACLE_DIR append FILE...
//     Appends a user message to each file with the runtime's SessionManager; prints the new
//     leaf ids as a JSON array.
//
//   node leaf-records.mjs ORACLE_DIR write FILE SEED
//     Writes a session the way the runtime does: turns of user and assistant messages
//     (runs of silent NO_REPLY replies among them, images and media references in user
//     messages, a cache-ttl marker after each reply), and, now and then, the two events after which the runtime removes a
//     trailing reply and writes a `leaf` record: an interrupted turn (an aborted reply
//     removed as the yield-abort recovery does) and a mid-turn context overflow (the
//     precheck error reply removed as removeTrailingMidTurnPrecheckAssistantError does),
//     each with the runtime's own preserveTrailing rule, so the cache-ttl marker after the
//     removed reply stays and the leaf moves above it. Sometimes the session goes on after
//     the event, sometimes it ends there (stuck). Prints {leafId, leafRecords}.
import fs from "node:fs";
import path from "node:path";
import { distDir, loadSessionManager } from "./dist.mjs";

const [oracleDir, mode, ...rest] = process.argv.slice(2);
const SessionManager = await loadSessionManager(distDir(oracleDir));

const keyOf = (m) => {
  const text = JSON.stringify(m);
  const found = /«([^»]*)»/.exec(text);
  const key = found ? found[1] : text;
  return m?.role === "compactionSummary" ? `summary:${key}` : key;
};

if (mode === "tree") {
  for (const file of rest) {
    let result;
    try {
      const sm = SessionManager.open(path.resolve(file), path.dirname(path.resolve(file)));
      result = {
        file,
        ok: true,
        leafId: sm.getLeafId(),
        branch: sm.getBranch().map((e) => e.id),
        context: sm.buildSessionContext().messages.map(keyOf),
      };
    } catch (err) {
      result = { file, ok: false, error: String(err && err.stack ? err.stack : err) };
    }
    process.stdout.write("@@tree " + JSON.stringify(result) + "\n");
  }
} else if (mode === "append") {
  // One user message appended to each file, as the runtime appends; prints the new leaf ids.
  const leafIds = rest.map((file) =>
    SessionManager.open(path.resolve(file), path.dirname(path.resolve(file))).appendMessage({
      role: "user",
      content: "«appended» next",
      timestamp: Date.now(),
    }),
  );
  process.stdout.write(JSON.stringify(leafIds) + "\n");
} else if (mode === "write") {
  const [file, seedText] = rest;
  let seed = Number(seedText) >>> 0 || 1;
  const rnd = (n) => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return (seed >>> 8) % n;
  };
  fs.rmSync(file, { force: true });
  const sm = SessionManager.open(path.resolve(file), path.dirname(path.resolve(file)));
  // The runtime's own rule for what stays above a removed trailing reply.
  const preserveTrailing = (e) => e.type === "custom" || e.type === "label" || e.type === "session_info";
  const usage = { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
  let now = Date.parse("2026-03-01T08:00:00.000Z");
  const reply = (content, extra = {}) =>
    sm.appendMessage({ role: "assistant", content, api: "anthropic-messages", provider: "anthropic", model: "claude-opus-4-5", usage, stopReason: "stop", timestamp: (now += 1000), ...extra });
  const marker = () => sm.appendCustomEntry("openclaw.cache-ttl", { timestamp: (now += 10), provider: "anthropic", modelId: "claude-opus-4-5" });
  const image = { type: "image", data: "A".repeat(2000 + rnd(4000)), mimeType: "image/png" };
  let leafRecords = 0;
  const turns = 12 + rnd(12);
  for (let turn = 0; turn < turns; turn++) {
    now += 60_000;
    const content = rnd(4) === 0 ? [{ type: "text", text: `«t${turn}-user» look` }, image] : `«t${turn}-user» turn ${turn} [media attached: /tmp/in/t${turn}.png]`;
    sm.appendMessage({ role: "user", content, timestamp: now });
    const event = turn > 2 ? rnd(5) : 4;
    if (event === 0 || event === 1) {
      // The attempt fails: its reply is removed and the marker after it stays.
      if (event === 0) reply([], { stopReason: "aborted" });
      else reply([], { stopReason: "error", errorMessage: "Context overflow: prompt too large for the model (mid-turn precheck)." });
      marker();
      const before = fs.readFileSync(file, "utf8");
      const removed = sm.removeTrailingEntries(
        (e) => e.type === "message" && (event === 0 ? e.message?.stopReason === "aborted" : e.message?.stopReason === "error"),
        { preserveTrailing },
      );
      if (removed !== 1) throw new Error(`removed ${removed}`);
      if (fs.readFileSync(file, "utf8") === before) throw new Error("no rewrite");
      leafRecords++;
      if (turn === turns - 1 || rnd(3) === 0) continue;
      // The turn is retried and goes through.
    }
    if (rnd(3) === 0) {
      // A run of silent replies (a marker after each).
      for (let k = 2 + rnd(3); k > 0; k--) {
        reply([{ type: "text", text: "NO_REPLY" }]);
        marker();
      }
    } else {
      reply([{ type: "text", text: `«t${turn}-reply» answer ${turn}` }]);
      marker();
    }
  }
  const text = fs.readFileSync(file, "utf8");
  const written = text.split("\n").filter((l) => l.includes('"type":"leaf"')).length;
  process.stdout.write(JSON.stringify({ leafId: sm.getLeafId(), leafRecords: written }) + "\n");
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
