#!/usr/bin/env bash
# Benchmark of clawkeeper on a SQLite-era agent database (OpenClaw 2026.8.1 and later) against
# the reference OpenClaw 2026.9.6 and against `cat` of the same bytes. The input is the store of
# scripts/bench.sh (examples/gen_bench.rs: $SESSIONS sessions, default 3000, about 1.6 GB)
# imported into SQLite by the reference's own doctor (scripts/oracle/sqlite-import.sh; several
# minutes, cached in WORKDIR). Prints a Markdown report: times (best of $RUNS), ratios, and the
# peak resident memory of every command. Needs about 8 GB free in WORKDIR.
# Nothing here is a test: run it on a quiet machine and paste the report into BENCHMARKS.md.
#
#   usage: scripts/bench-sqlite.sh [WORKDIR]      (default: /tmp/clawkeeper-bench-sqlite)
#   env:   SESSIONS, MEAN_KB, RUNS (default 3),
#          CLAWKEEPER_ORACLE_SQLITE (the 2026.9.6 wrapper; see scripts/oracle/README.md)
set -euo pipefail
cd "$(dirname "$0")/.."
W="${1:-/tmp/clawkeeper-bench-sqlite}"
SESSIONS="${SESSIONS:-3000}"
MEAN_KB="${MEAN_KB:-500}"
RUNS="${RUNS:-3}"
ORACLE="${CLAWKEEPER_ORACLE_SQLITE:-$HOME/.cache/openclaw-oracle-2026.9.6/openclaw}"
GEN_VERSION=3 # as in scripts/bench.sh

[ -x "$ORACLE" ] || { echo "bench-sqlite: the reference 2026.9.6 is needed to make the database: scripts/oracle/install.sh \"\" 2026.9.6" >&2; exit 1; }
for tool in bc /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench-sqlite: $tool is needed" >&2; exit 1; }
done
cargo build --release --quiet --example gen_bench
cargo build --release --quiet
BIN="$PWD/target/release/clawkeeper"
GEN="$PWD/target/release/examples/gen_bench"

mkdir -p "$W"
MARK="$W/state/.done-$GEN_VERSION-$SESSIONS-$MEAN_KB"
if [ ! -f "$MARK" ]; then
  rm -rf "$W/state"
  "$GEN" store "$W/state" "$SESSIONS" "$MEAN_KB" >&2
  echo "bench-sqlite: importing into SQLite with the reference's doctor (minutes)" >&2
  scripts/oracle/sqlite-import.sh "$ORACLE" "$W/state" >&2
  touch "$MARK"
fi
DB="$W/state/agents/main/agent/openclaw-agent.sqlite"
export OPENCLAW_CONFIG_PATH="$W/state/openclaw.json" OPENCLAW_STATE_DIR="$W/state"

secs() {
  local t0 t1
  t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
best_of() {
  local best="" d
  for _ in $(seq "$RUNS"); do
    d=$(secs "$@")
    if [ -z "$best" ] || [ "$(echo "$d < $best" | bc -l)" = 1 ]; then best=$d; fi
  done
  printf '%.3f' "$best"
}
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }
peak_mb() { /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -n 1 | awk '{printf "%.1f", $1/1024}'; }
cat_db() { cat "$DB" "$DB-wal" >/dev/null 2>&1 || cat "$DB" >/dev/null; }

db_mb=$(( $(stat -c %s "$DB") / 1048576 ))
sessions=$("$BIN" inspect --json --no-cleanup --limit 1 --store "$DB" | python3 -c 'import json,sys; print(json.load(sys.stdin)["stores"][0]["entries"])')
cat_db # warm the page cache for every contender alike

echo "## SQLite-era run of $(date -u +%Y-%m-%dT%H:%MZ), clawkeeper $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
echo
echo "- Machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p' | head -n1)), $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -sr), $(df -T "$W" | awk 'NR==2{print $2}') on $(df "$W" | awk 'NR==2{print $1}')"
echo "- Input: the scripts/bench.sh store ($SESSIONS sessions) imported by OpenClaw $("$ORACLE" --version 2>/dev/null | head -n1 | awk '{print $2}'): $sessions entries, database of $db_mb MB"
echo "- Method: best wall time of $RUNS runs, warm page cache"
echo
echo "| measurement | clawkeeper | baseline | ratio |"
echo "|---|---|---|---|"
c=$(best_of cat_db)
t=$(best_of "$BIN" inspect --json --no-cleanup --store "$DB")
echo "| inspect --json --no-cleanup | ${t}s | cat of the database ${c}s | $(ratio "$t" "$c")× cat |"
# With the cleanup prediction, inspect runs cleanup --enforce on a scratch copy of the
# database: as long as the real run (minutes on a store over its disk budget), so once, and
# only with PREDICT=1.
if [ "${PREDICT:-0}" = 1 ]; then
  t=$(RUNS=1 best_of "$BIN" inspect --json --store "$DB")
  echo "| inspect --json (with the cleanup prediction) | ${t}s | cat of the database ${c}s | $(ratio "$t" "$c")× cat |"
fi
ref=$(best_of "$ORACLE" sessions cleanup --dry-run --json --store "$DB")
if "$BIN" cleanup --dry-run --json --store "$DB" >/dev/null 2>&1; then
  ck=$(best_of "$BIN" cleanup --dry-run --json --store "$DB")
  echo "| cleanup --dry-run --json | ${ck}s | reference ${ref}s | $(ratio "$ref" "$ck")× faster |"
else
  echo "| cleanup --dry-run --json | not built for SQLite-era agents yet | reference ${ref}s | – |"
fi
t=$(best_of "$BIN" vacuum --json --store "$DB")
echo "| vacuum (preview) | ${t}s | – | – |"
t=$(best_of "$BIN" strip-images --json --store "$DB")
echo "| strip-images (preview) | ${t}s | – | – |"
# strip-images --enforce on a fresh copy of the database each run (its own state dir: no
# leases, its own lifecycle lock), followed by sync, against cp + sync of the same files.
C="$W/copy"
CDB="$C/state/agents/main/agent/openclaw-agent.sqlite"
fresh_copy() {
  rm -rf "$C"; mkdir -p "$(dirname "$CDB")"
  cp "$DB" "$CDB"; if [ -f "$DB-wal" ]; then cp "$DB-wal" "$CDB-wal"; fi
  sync
}
copy_sync() { rm -f "$C/plain.sqlite"; cp "$DB" "$C/plain.sqlite"; sync; }
strip_sync() { "$BIN" strip-images --enforce --json --store "$CDB" >"$C/strip.json" 2>"$C/strip.err"; sync; }
best_copy="" best_strip=""
for _ in $(seq "$RUNS"); do
  fresh_copy
  d=$(secs copy_sync)
  if [ -z "$best_copy" ] || [ "$(echo "$d < $best_copy" | bc -l)" = 1 ]; then best_copy=$d; fi
  rm -f "$C/plain.sqlite"
  d=$(secs strip_sync)
  if [ -z "$best_strip" ] || [ "$(echo "$d < $best_strip" | bc -l)" = 1 ]; then best_strip=$d; fi
done
freed=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["totals"]; print(t.get("changed",0), t["imagesReplaced"], t["bytesFreed"])' "$C/strip.json")
echo "| strip-images --enforce + sync | $(printf '%.3f' "$best_strip")s | cp + sync of the database $(printf '%.3f' "$best_copy")s | $(ratio "$best_strip" "$best_copy")× cp |"
echo
echo "strip-images --enforce: sessions rewritten, images replaced, bytes freed in the rows: $freed"
echo
echo "Peak resident memory (target ≤ 64 MB for every command):"
echo
echo "| command | peak RSS |"
echo "|---|---|"
echo "| inspect --json --no-cleanup | $(peak_mb "$BIN" inspect --json --no-cleanup --store "$DB") MB |"
if [ "${PREDICT:-0}" = 1 ]; then
  echo "| inspect --json (with the cleanup prediction) | $(peak_mb "$BIN" inspect --json --store "$DB") MB |"
fi
echo "| vacuum (preview) | $(peak_mb "$BIN" vacuum --json --store "$DB") MB |"
echo "| cleanup --dry-run --json | $(peak_mb "$BIN" cleanup --dry-run --json --store "$DB") MB |"
echo "| strip-images (preview) | $(peak_mb "$BIN" strip-images --json --store "$DB") MB |"
fresh_copy
echo "| strip-images --enforce | $(peak_mb "$BIN" strip-images --enforce --json --store "$CDB") MB |"
rm -rf "$C"
