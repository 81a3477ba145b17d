// Runs the reference runtime's own silent-reply checks on generated inputs.
//   usage: node silent.mjs ORACLE_DIR INPUT.json
// INPUT.json: {"texts": [string...], "contents": [assistant content...]}
// Output: {"text": [bool...]            isSilentReplyText(text)
//          "payload": [bool...]         isSilentReplyPayloadText(text), what decides delivery
//          "dropped": [bool...]         whether the delivery path drops a reply with that
//                                       text as silent: parseReplyDirectives (reply tags out,
//                                       then the payload check) and, for what is left, the
//                                       reply dispatcher's normalizeReplyPayload skipping it
//                                       with the reason "silent" (glued and final tokens)
//          "content": [bool...]         the same for the text the runtime sends for an
//                                       assistant message with that content
//                                       (extractAssistantVisibleText)
//          "before": [int...], "after": [int...]}
//                                       every code point c (no surrogates) for which
//                                       c + "NO_REPLY", resp. "NO_REPLY" + c, is a silent payload
import fs from "node:fs";
import { distDir, loadFunction } from "./dist.mjs";

const [oracleDir, input] = process.argv.slice(2);
const dist = distDir(oracleDir);
const load = (name) => loadFunction(dist, name);
const isSilentReplyText = await load("isSilentReplyText");
const isSilentReplyPayloadText = await load("isSilentReplyPayloadText");
const extractAssistantVisibleText = await load("extractAssistantVisibleText");
const parseReplyDirectives = await load("parseReplyDirectives");
const normalizeReplyPayload = await load("normalizeReplyPayload");
// What buildEmbeddedRunPayloads and the dispatcher do to a final answer's text, as far as
// silence goes: a reply whose text is dropped as silent (one with media is delivered).
function dropped(raw) {
  const parsed = parseReplyDirectives(raw);
  if (parsed.mediaUrls?.length) return false;
  if (parsed.isSilent) return true;
  const text = parsed.text?.trim();
  if (!text) return false;
  let reason;
  normalizeReplyPayload({ text }, { onSkip: (r) => (reason = r) });
  return reason === "silent";
}
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
  dropped: data.texts.map((t) => dropped(t)),
  content: data.contents.map((content) => {
    const t = extractAssistantVisibleText({ role: "assistant", content });
    return Boolean(t) && dropped(t);
  }),
  before,
  after,
};
process.stdout.write(JSON.stringify(out) + "\n");
