// Prints the reference runtime's own token estimates.
//   usage: node estimate-tokens.mjs ORACLE_DIR MESSAGES.json
//          node estimate-tokens.mjs ORACLE_DIR --loaded MESSAGES.json
//          node estimate-tokens.mjs ORACLE_DIR --files TRANSCRIPT...
// MESSAGES.json is a JSON array of arrays of messages. Output: one JSON array with, per inner
// array (or per transcript), {"perMessage": [estimateTokens(m)...], "context":
// estimateContextTokens(msgs)}, null where the runtime throws.
// --loaded first passes each message through the runtime's transcript loader (as the
// `message` of an entry line parsed by its parseSessionEntries, which normalises message
// shapes), and estimates what comes out, as the runtime does for a message read from a file.
// --files opens each transcript with the runtime's SessionManager and estimates the context
// it rebuilds (custom_message, branch_summary and compaction entries included).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [oracleDir, ...rest] = process.argv.slice(2);
const mode = rest[0] === "--loaded" || rest[0] === "--files" ? rest.shift() : "--direct";
const dist = path.join(oracleDir, "node_modules", "openclaw", "dist");
// The chunk that defines the runtime's estimator (agent-core compaction code).
const chunk = fs
  .readdirSync(dist)
  .filter((n) => n.endsWith(".js"))
  .find((n) => /^function estimateContextTokens\(/m.test(fs.readFileSync(path.join(dist, n), "utf8")));
if (!chunk) {
  console.error("no chunk defines estimateContextTokens under " + dist);
  process.exit(2);
}
const mod = await import(pathToFileURL(path.join(dist, chunk)).href);
// The chunk exports the compaction helpers under short aliases; find them by behaviour.
const fns = Object.values(mod).filter((v) => typeof v === "function");
const probe = { role: "user", content: "abcdefgh" };
const estimateTokens = fns.find((f) => {
  try { return f.length === 1 && f(probe) === 2 && f({ role: "bashExecution", command: "ab", output: "cd" }) === 1; } catch { return false; }
});
const estimateContextTokens = fns.find((f) => {
  try { const r = f([probe]); return r && r.tokens === 2 && r.lastUsageIndex === null; } catch { return false; }
});
if (!estimateTokens || !estimateContextTokens) {
  console.error("cannot find estimateTokens/estimateContextTokens in " + chunk);
  process.exit(2);
}
// The transcript loader's chunk: parseSessionEntries (JSONL text to normalised entries) and
// SessionManager, found by behaviour.
let parseSessionEntries;
let SessionManager;
if (mode !== "--direct") {
  const smChunk = fs.readdirSync(dist).find((n) => /^session-manager-.*\.js$/.test(n) &&
    /function normalizeLoadedFileEntry\(/.test(fs.readFileSync(path.join(dist, n), "utf8")));
  if (!smChunk) {
    console.error("no session-manager chunk with the loader under " + dist);
    process.exit(2);
  }
  const sm = await import(pathToFileURL(path.join(dist, smChunk)).href);
  const line = JSON.stringify({ type: "message", id: "a", parentId: null, message: { role: "assistant", content: "ab" } });
  parseSessionEntries = Object.values(sm).find((f) => {
    if (typeof f !== "function" || f.length !== 1) return false;
    try { const r = f(line + "\n"); return Array.isArray(r) && r.length === 1 && Array.isArray(r[0].message?.content); } catch { return false; }
  });
  SessionManager = Object.values(sm).find(
    (v) => typeof v === "function" && typeof v.open === "function" && typeof v.inMemory === "function",
  );
  if (!parseSessionEntries || !SessionManager) {
    console.error("cannot find parseSessionEntries/SessionManager in " + smChunk);
    process.exit(2);
  }
}
// A message the runtime's estimator throws on is reported as null (and the context too).
const tryOr = (f) => {
  try {
    return f();
  } catch {
    return null;
  }
};
const estimate = (msgs) => ({
  perMessage: msgs.map((m) => tryOr(() => estimateTokens(m))),
  context: tryOr(() => estimateContextTokens(msgs)),
});
let out;
if (mode === "--files") {
  out = rest.map((file) => {
    try {
      return estimate(SessionManager.open(path.resolve(file)).buildSessionContext().messages);
    } catch {
      return null;
    }
  });
} else {
  const cases = JSON.parse(fs.readFileSync(rest[0], "utf8"));
  const load = (msgs) => {
    const text = msgs
      .map((m, i) => JSON.stringify({ type: "message", id: `m${i}`, parentId: i ? `m${i - 1}` : null, message: m }))
      .join("\n");
    const entries = parseSessionEntries(text + "\n");
    if (entries.length !== msgs.length) throw new Error("the loader dropped a line");
    return entries.map((e) => e.message);
  };
  out = cases.map((msgs) => estimate(mode === "--loaded" ? load(msgs) : msgs));
}
process.stdout.write(JSON.stringify(out) + "\n");
