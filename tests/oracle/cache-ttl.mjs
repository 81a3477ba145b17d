// The cache-TTL timestamps the reference runtime reads, with its own readLastCacheTtlTimestamp,
// compared between transcripts and their rewrites; and transcripts written by the runtime's
// own SessionManager and appendAttemptCacheTtlIfNeeded.
//
//   node cache-ttl.mjs ORACLE_DIR compare SCRATCH BEFORE AFTER [BEFORE AFTER]...
//     For each pair, prints "@@ttl " + JSON {before, problems, contexts, forks, tips, found}.
//     Contexts: every provider/model pair of the markers in either file as written, each
//     also upper-cased and padded, provider only, model only, an empty one and none at all.
//     The whole file must read the same timestamp for every context. So must a fork
//     (createBranchedSession) at every branch tip (an entry without children); a fork at
//     other entries that both files hold (24 of them, spread over the file) must find a
//     timestamp exactly where it found one.
//     Files are opened in place: pass copies (the runtime may rewrite what it opens); forks
//     are written into SCRATCH.
//
//   node cache-ttl.mjs ORACLE_DIR write FILE SEED
//     Writes a session the way the runtime does: user and assistant messages, a marker after
//     each attempt through appendAttemptCacheTtlIfNeeded (cache-ttl mode, several providers and
//     models), model changes, branches (SessionManager.branch) and compactions
//     (appendCompaction). Prints {leafId, entries}.
import fs from "node:fs";
import path from "node:path";
import { distDir, loadFunction, loadSessionManager } from "./dist.mjs";

const [oracleDir, mode, ...rest] = process.argv.slice(2);
const dist = distDir(oracleDir);
const SessionManager = await loadSessionManager(dist);

const isMarker = (e) => e?.type === "custom" && e?.customType === "openclaw.cache-ttl";

function contextsOf(files) {
  const seen = new Map();
  const add = (ctx) => seen.set(JSON.stringify(ctx ?? null), ctx);
  add(undefined);
  add({});
  for (const f of files) {
    for (const e of f.getEntries().filter(isMarker)) {
      const p = e.data?.provider;
      const m = e.data?.modelId;
      add({ provider: p, modelId: m });
      add({ provider: p });
      add({ modelId: m });
      if (typeof p === "string" && typeof m === "string") {
        add({ provider: ` ${p.toUpperCase()}\t`, modelId: m.toUpperCase() });
      }
    }
  }
  return [...seen.values()];
}

if (mode === "compare") {
  const read = await loadFunction(dist, "readLastCacheTtlTimestamp");
  const [scratch, ...files] = rest;
  const open = (f) => SessionManager.open(path.resolve(f), scratch);
  for (let k = 0; k + 1 < files.length; k += 2) {
    const [before, after] = [files[k], files[k + 1]];
    const problems = [];
    const [a, b] = [open(before), open(after)];
    const contexts = contextsOf([a, b]);
    const reads = (sm) => contexts.map((c) => read(sm, c));
    const show = (c) => JSON.stringify(c ?? null);
    const [ra, rb] = [reads(a), reads(b)];
    let found = 0;
    contexts.forEach((c, i) => {
      if (ra[i] !== null) found++;
      if (ra[i] !== rb[i]) problems.push(`file, context ${show(c)}: ${ra[i]} before, ${rb[i]} after`);
    });
    // Branch tips of the original, and the entries both files hold.
    const parents = new Set(a.getEntries().map((e) => e.parentId));
    const kept = new Set(b.getEntries().map((e) => e.id));
    // Every tip, and at most 24 other entries spread over the file (a fork costs a file).
    const both = a.getEntries().map((e) => e.id).filter((id) => kept.has(id));
    const inner = both.filter((id) => parents.has(id));
    const stride = Math.max(1, Math.ceil(inner.length / 24));
    const ids = both.filter((id) => !parents.has(id) || inner.indexOf(id) % stride === 0);
    let tips = 0;
    for (const id of ids) {
      const tip = !parents.has(id);
      tips += tip ? 1 : 0;
      const fork = (f) => {
        const sm = open(f);
        sm.createBranchedSession(id);
        return reads(sm);
      };
      const [fa, fb] = [fork(before), fork(after)];
      contexts.forEach((c, i) => {
        const same = tip ? fa[i] === fb[i] : (fa[i] === null) === (fb[i] === null);
        if (!same) {
          problems.push(
            `fork at ${id}${tip ? " (tip)" : ""}, context ${show(c)}: ${fa[i]} before, ${fb[i]} after`,
          );
        }
      });
    }
    const result = { before, problems, contexts: contexts.length, forks: ids.length, tips, found };
    process.stdout.write("@@ttl " + JSON.stringify(result) + "\n");
  }
} else if (mode === "write") {
  const append = await loadFunction(dist, "appendAttemptCacheTtlIfNeeded");
  const [file, seedText] = rest;
  let seed = Number(seedText) >>> 0 || 1;
  const rnd = (n) => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return seed % n;
  };
  fs.rmSync(file, { force: true });
  const sm = SessionManager.open(path.resolve(file), path.dirname(path.resolve(file)));
  const models = [
    ["anthropic", "claude-opus-4-5"],
    ["anthropic", "claude-sonnet-4-5"],
    ["Anthropic", "Claude-Sonnet-4-5"],
    ["openrouter", "anthropic/claude-opus-4-5"],
    ["google", "gemini-2.5-pro"],
  ];
  const config = { agents: { defaults: { contextPruning: { mode: "cache-ttl" } } } };
  let [provider, modelId] = models[0];
  let now = Date.parse("2026-03-01T08:00:00.000Z");
  for (let turn = 0; turn < 40; turn++) {
    now += 60_000 + rnd(3_600_000);
    if (rnd(8) === 0) {
      [provider, modelId] = models[rnd(models.length)];
      sm.appendModelChange(provider, modelId);
    }
    if (turn > 4 && rnd(9) === 0) {
      // Go back to an earlier entry and continue from there (a new branch).
      const entries = sm.getEntries();
      sm.branch(entries[rnd(entries.length)].id);
    }
    const user = sm.appendMessage({ role: "user", content: `turn ${turn}`, timestamp: now });
    sm.appendMessage({
      role: "assistant",
      content: [{ type: "text", text: `answer ${turn}` }],
      api: "anthropic-messages",
      provider,
      model: modelId,
      usage: {
        input: 10,
        output: 5,
        cacheRead: 100,
        cacheWrite: 0,
        totalTokens: 115,
        cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 },
      },
      stopReason: "stop",
      timestamp: now + 1000,
    });
    if (turn > 6 && rnd(10) === 0) {
      sm.appendCompaction(`summary ${turn}`, user, 5000);
    } else {
      append({
        config,
        isCacheTtlEligibleProvider: () => true,
        provider,
        modelId,
        sessionManager: sm,
        now: now + 2000,
      });
    }
  }
  process.stdout.write(JSON.stringify({ leafId: sm.getLeafId(), entries: sm.getEntries().length }) + "\n");
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
