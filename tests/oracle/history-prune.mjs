// Runs the reference runtime's own history prune (pruneProcessedHistoryImages and its text
// helper pruneHistoryMediaReferenceText) on generated inputs.
//   usage: node history-prune.mjs ORACLE_DIR INPUT.json
// INPUT.json: {"texts": [string...], "contexts": [[message...]...], "sweeps": [template...]}
//   a template is a string with one "{c}" in it.
// Output: {"marker": the media reference marker,
//          "texts": [pruneHistoryMediaReferenceText(text)...],
//          "contexts": [pruneProcessedHistoryImages(messages) ?? messages ...],
//          "sweeps": [[[from, to]...]...]}   per template, the ranges of code points c (no
//                                            surrogates) for which the text helper changes
//                                            the template with "{c}" replaced by c
//
// The functions are not exported by the bundle: the script takes the source of their region
// (src/agents/embedded-agent-runner/run/history-image-prune.ts, self-contained) from the chunk
// that defines them and evaluates it as it is.
import fs from "node:fs";
import path from "node:path";

const [oracleDir, input] = process.argv.slice(2);
const dist = path.join(oracleDir, "node_modules", "openclaw", "dist");
const REGION = "//#region src/agents/embedded-agent-runner/run/history-image-prune.ts";
let source;
for (const n of fs.readdirSync(dist).filter((n) => n.endsWith(".js")).sort()) {
  const text = fs.readFileSync(path.join(dist, n), "utf8");
  const at = text.indexOf(REGION);
  if (at < 0 || !text.includes("function pruneProcessedHistoryImages(")) continue;
  const end = text.indexOf("//#endregion", at);
  source = text.slice(at, end);
  break;
}
if (!source) {
  console.error(`no chunk under ${dist} holds the history-image-prune region`);
  process.exit(2);
}
const rt = new Function(
  `${source}\nreturn { pruneProcessedHistoryImages, pruneHistoryMediaReferenceText, PRUNED_HISTORY_MEDIA_REFERENCE_MARKER };`,
)();
const data = JSON.parse(fs.readFileSync(input, "utf8"));
const sweeps = (data.sweeps ?? []).map((t) => {
  const [pre, post] = t.split("{c}");
  const ranges = [];
  for (let c = 0; c < 0x110000; c++) {
    if (c >= 0xd800 && c < 0xe000) continue;
    const s = pre + String.fromCodePoint(c) + post;
    if (rt.pruneHistoryMediaReferenceText(s) === s) continue;
    const last = ranges[ranges.length - 1];
    if (last && last[1] === c - 1) last[1] = c;
    else ranges.push([c, c]);
  }
  return ranges;
});
const out = {
  marker: rt.PRUNED_HISTORY_MEDIA_REFERENCE_MARKER,
  texts: (data.texts ?? []).map((t) => rt.pruneHistoryMediaReferenceText(t)),
  contexts: (data.contexts ?? []).map((m) => rt.pruneProcessedHistoryImages(m) ?? m),
  sweeps,
};
process.stdout.write(JSON.stringify(out) + "\n");
