// What the reference scripts share: finding pieces of the installed release's bundled dist/.
//   distDir(oracleDir)            the release's dist/ folder
//   loadFunction(dist, name)      the function `name`, through the export alias of the chunk
//                                 that defines it (exits 2 when no chunk does); chunks are
//                                 `.js` up to 2026.7.x, `.mjs` in the SQLite-era releases
//   loadSessionManager(dist)      the SessionManager class: several chunks are named
//                                 session-manager-* (one in 2026.7.1, more later, `.mjs` from
//                                 2026.8); the one that exports the class is found by its shape
//                                 (exits 2 when none)
//   isolate(oracleDir, stateDir)  the environment the runtime captures when it loads, set
//                                 before it loads: the state dir, and the oracle's own HOME,
//                                 TMPDIR and (unless set) config; returns {oracle, stateDir, dist}
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

export function distDir(oracleDir) {
  return path.join(oracleDir, "node_modules", "openclaw", "dist");
}

export async function loadFunction(dist, name) {
  for (const n of fs.readdirSync(dist).filter((f) => /\.m?js$/.test(f))) {
    const text = fs.readFileSync(path.join(dist, n), "utf8");
    if (!text.includes(`function ${name}(`)) continue;
    const exp = text.slice(text.lastIndexOf("export {"));
    const m = new RegExp(`\\b${name} as ([\\w$]+)`).exec(exp);
    if (!m) continue;
    const mod = await import(pathToFileURL(path.join(dist, n)).href);
    return mod[m[1]];
  }
  console.error(`cannot find ${name} under ${dist}`);
  process.exit(2);
}

export async function loadSessionManager(dist) {
  const chunks = fs.readdirSync(dist).filter((n) => /^session-manager-.*\.m?js$/.test(n)).sort();
  for (const chunk of chunks) {
    const mod = await import(pathToFileURL(path.join(dist, chunk)).href);
    const found = Object.values(mod).find(
      (v) => typeof v === "function" && typeof v.open === "function" && typeof v.inMemory === "function",
    );
    if (found) return found;
  }
  console.error(`no SessionManager in the session-manager chunks under ${dist}`);
  process.exit(2);
}

export function isolate(oracleDir, stateDirArg) {
  const stateDir = path.resolve(stateDirArg);
  const oracle = path.resolve(oracleDir);
  process.env.OPENCLAW_STATE_DIR = stateDir;
  process.env.HOME = path.join(oracle, "home");
  process.env.TMPDIR = path.join(oracle, "tmp");
  process.env.OPENCLAW_CONFIG_PATH ??= path.join(oracle, "empty-config.json");
  return { oracle, stateDir, dist: distDir(oracle) };
}
