// Runs the reference runtime's own silent-reply checks on generated inputs.
//   usage: node silent.mjs ORACLE_DIR INPUT.json
// INPUT.json: {"texts": [string...], "contents": [assistant content...]}
// Output: {"text": [bool...]            isSilentReplyText(text)
//          "payload": [bool...]         isSilentReplyPayloadText(text), what decides delivery
//          "content": [bool...]         the payload check on the text the runtime sends for an
//                                       assistant message with that content
//                                       (extractAssistantVisibleText)
//          "before": [int...], "after": [int...]}
//                                       every code point c (no surrogates) for which
//                                       c + "NO_REPLY", resp. "NO_REPLY" + c, is a silent payload
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
const isSilentReplyPayloadText = await load("isSilentReplyPayloadText");
const extractAssistantVisibleText = await load("extractAssistantVisibleText");
const data = JSON.parse(fs.readFileSync(input, "utf8"));
const before = [];
const after = [];
for (let c = 0; c < 0x110000; c++) {
  if (c >= 0xd800 && c < 0xe000) continue;
  const s = String.fromCodePoint(c);
  if (isSilentReplyPayloadText(s + "NO_REPLY", "NO_REPLY")) before.push(c);
  if (isSilentReplyPayloadText("NO_REPLY" + s, "NO_REPLY")) after.push(c);
}
const out = {
  text: data.texts.map((t) => isSilentReplyText(t, "NO_REPLY")),
  payload: data.texts.map((t) => isSilentReplyPayloadText(t, "NO_REPLY")),
  content: data.contents.map((content) => {
    const t = extractAssistantVisibleText({ role: "assistant", content });
    return Boolean(t) && isSilentReplyPayloadText(t, "NO_REPLY");
  }),
  before,
  after,
};
process.stdout.write(JSON.stringify(out) + "\n");
