// Runs the reference runtime's own classifiers on generated inputs and prints the verdicts.
//   usage: node classify.mjs ORACLE_DIR INPUT.json
// INPUT.json: {"texts": [string...], "conversations": [[message...]...]}
// Output: {"silent": [bool...], "heartbeat": [{shouldSkip,text,didStrip}...] (heartbeat mode),
//          "message": [{...}] (message mode), "real": [[bool...]...]}
import fs from "node:fs";
import { distDir, loadFunction } from "./dist.mjs";

const [oracleDir, input] = process.argv.slice(2);
const dist = distDir(oracleDir);
const load = (name) => loadFunction(dist, name);
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
