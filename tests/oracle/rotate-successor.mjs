// Runs the reference runtime's own successor rotation (truncateAfterCompaction) on transcripts
// and prints, per transcript, one line {rotated, sessionId, sessionFile, ...} as JSON. Each
// successor file is written next to its input, as the runtime does.
//   usage: node rotate-successor.mjs ORACLE_DIR TRANSCRIPT.jsonl...
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [oracleDir, ...transcripts] = process.argv.slice(2);
const dist = path.join(oracleDir, "node_modules", "openclaw", "dist");
const chunk = fs
  .readdirSync(dist)
  .filter((n) => n.endsWith(".js"))
  .find((n) => {
    const text = fs.readFileSync(path.join(dist, n), "utf8");
    return text.includes("async function rotateTranscriptFileAfterCompaction(") && /^export /m.test(text);
  });
if (!chunk) {
  console.error("no chunk defines rotateTranscriptFileAfterCompaction under " + dist);
  process.exit(2);
}
const mod = await import(pathToFileURL(path.join(dist, chunk)).href);
const src = fs.readFileSync(path.join(dist, chunk), "utf8");
const alias = /rotateTranscriptFileAfterCompaction as (\w+)/.exec(src.slice(src.lastIndexOf("export {")))[1];
for (const transcript of transcripts) {
  try {
    const result = await mod[alias]({ sessionFile: path.resolve(transcript) });
    process.stdout.write(JSON.stringify(result) + "\n");
  } catch (err) {
    process.stdout.write(JSON.stringify({ error: String(err) }) + "\n");
  }
}
