// Runs the reference runtime's own classifiers on generated inputs and prints the verdicts.
//   usage: node classify.mjs ORACLE_DIR INPUT.json
// INPUT.json: {"texts": [string...], "conversations": [[message...]...]}
// Output: {"silent": [bool...], "heartbeat": [{shouldSkip,text,didStrip}...] (heartbeat mode),
//          "message": [{...}] (message mode), "real": [[bool...]...]}
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [oracleDir, input] = process.argv.slice(2);
const dist = path.join(oracleDir, "node_modules", "openclaw", "dist");
const files = fs.readdirSync(dist).filter((n) => n.endsWith(".js"));
// Find the chunk defining `name` and return that function through its export alias.
async function load(name) {
  for (const n of files) {
    const text = fs.readFileSync(path.join(dist, n), "utf8");
    if (!text.includes(`function ${name}(`)) continue;
    const exp = text.slice(text.lastIndexOf("export {"));
    const m = new RegExp(`\\b${name} as ([\\w$]+)`).exec(exp);
    if (!m) continue;
    const mod = await import(pathToFileURL(path.join(dist, n)).href);
    return mod[m[1]];
  }
  console.error(`cannot find ${name}`);
  process.exit(2);
}
const isSilentReplyText = await load("isSilentReplyText");
const stripHeartbeatToken = await load("stripHeartbeatToken");
const isRealConversationMessage = await load("isRealConversationMessage");
const data = JSON.parse(fs.readFileSync(input, "utf8"));
const out = {
  silent: data.texts.map((t) => isSilentReplyText(t)),
  heartbeat: data.texts.map((t) => stripHeartbeatToken(t, { mode: "heartbeat", maxAckChars: 300 })),
  message: data.texts.map((t) => stripHeartbeatToken(t, { mode: "message" })),
  real: data.conversations.map((msgs) => msgs.map((m, i) => isRealConversationMessage(m, msgs, i))),
};
process.stdout.write(JSON.stringify(out) + "\n");
