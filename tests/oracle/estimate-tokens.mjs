// Prints the reference runtime's own token estimates for a list of context messages.
//   usage: node estimate-tokens.mjs ORACLE_DIR MESSAGES.json
// MESSAGES.json is a JSON array of arrays of messages. Output: one JSON array with, per inner
// array, {"perMessage": [estimateTokens(m)...], "context": estimateContextTokens(msgs)}, null
// where the runtime throws.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [oracleDir, input] = process.argv.slice(2);
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
const cases = JSON.parse(fs.readFileSync(input, "utf8"));
// A message the runtime's estimator throws on is reported as null (and the context too).
const tryOr = (f) => {
  try {
    return f();
  } catch {
    return null;
  }
};
const out = cases.map((msgs) => ({
  perMessage: msgs.map((m) => tryOr(() => estimateTokens(m))),
  context: tryOr(() => estimateContextTokens(msgs)),
}));
process.stdout.write(JSON.stringify(out) + "\n");
