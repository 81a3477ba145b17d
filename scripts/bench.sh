#!/usr/bin/env bash
# Side-by-side benchmark of clawkeeper against the reference OpenClaw and against cp/cat of the
# same bytes. Generates its inputs deterministically (examples/gen_bench.rs):
#   (a) a store of $SESSIONS sessions (default 3000, about 1.5 GB),
#   (b) one transcript of about $BIG_MB MB (default 500);
# then prints a Markdown table of ratios and peak memory. Needs ~6 GB free in WORKDIR.
#
#   usage: scripts/bench.sh [WORKDIR]        (default: /tmp/clawkeeper-bench)
#   env:   SESSIONS, MEAN_KB, BIG_MB, RUNS (repetitions, best time kept; default 3),
#          CLAWKEEPER_ORACLE (path of the reference wrapper; see ../shared/oracle)
set -euo pipefail
cd "$(dirname "$0")/.."
W="${1:-/tmp/clawkeeper-bench}"
SESSIONS="${SESSIONS:-3000}"
MEAN_KB="${MEAN_KB:-500}"
BIG_MB="${BIG_MB:-500}"
RUNS="${RUNS:-3}"
ORACLE="${CLAWKEEPER_ORACLE:-$HOME/.cache/openclaw-oracle/openclaw}"

cargo build --release --quiet --example gen_bench
cargo build --release --quiet
BIN="$PWD/target/release/clawkeeper"
GEN="$PWD/target/release/examples/gen_bench"

mkdir -p "$W"
if [ ! -f "$W/store/.done-$SESSIONS-$MEAN_KB" ]; then
  rm -rf "$W/store"
  "$GEN" store "$W/store" "$SESSIONS" "$MEAN_KB"
  touch "$W/store/.done-$SESSIONS-$MEAN_KB"
fi
if [ ! -f "$W/big/.done-$BIG_MB" ]; then
  rm -rf "$W/big"
  sid=0b16f11e-0000-4000-8000-000000000500
  "$GEN" transcript "$W/big/agents/main/sessions/$sid.jsonl" "$BIG_MB"
  now=$(date +%s%3N)
  printf '{\n  "agent:main:main": {\n    "sessionId": "%s",\n    "updatedAt": %s\n  }\n}' "$sid" "$now" \
    > "$W/big/agents/main/sessions/sessions.json"
  touch "$W/big/.done-$BIG_MB"
fi
STORE="$W/store/agents/main/sessions/sessions.json"
BIGSTORE="$W/big/agents/main/sessions/sessions.json"
export OPENCLAW_CONFIG_PATH="$W/store/openclaw.json" OPENCLAW_STATE_DIR="$W/store"

# best_of CMD...: the lowest wall time over $RUNS runs, in seconds.
best_of() {
  local best="" t0 t1 d
  for _ in $(seq "$RUNS"); do
    t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s.%N)
    d=$(echo "$t1 - $t0" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$d < $best" | bc -l)" = 1 ]; then best=$d; fi
  done
  printf '%.3f' "$best"
}
# best_of_fresh CMD...: like best_of, but each run works on a fresh copy of the store in
# $W/work (the copy is not timed); "$WORK_STORE" names the copy's sessions.json.
best_of_fresh() {
  local best="" t0 t1 d
  for _ in $(seq "$RUNS"); do
    rm -rf "$W/work"; cp -r "$W/store" "$W/work"; sync
    t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; sync; t1=$(date +%s.%N)
    d=$(echo "$t1 - $t0" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$d < $best" | bc -l)" = 1 ]; then best=$d; fi
  done
  printf '%.3f' "$best"
}
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }
durable_copy() { rm -rf "$W/copy"; cp -r "$W/store" "$W/copy"; sync; }
cat_all() { find "$W/store/agents/main/sessions" -maxdepth 1 -type f -exec cat {} + >/dev/null; }
peak_mb() { /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -n 1 | awk '{printf "%.1f", $1/1024}'; }
supported() { "$BIN" "$1" --help >/dev/null 2>&1 && ! "$BIN" "$1" --dry-run --store "$BIGSTORE" 2>&1 | grep -q 'not available yet'; }

WORK_STORE="$W/work/agents/main/sessions/sessions.json"
store_mb=$(du -sm "$W/store/agents/main/sessions" | cut -f1)
big_mb=$(du -sm "$W/big/agents/main/sessions" | cut -f1)
cat_all # warm the page cache for every contender alike

echo "## Run of $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "Machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p' | head -n1)), $(free -g | awk '/Mem:/{print $2}') GiB RAM; store $SESSIONS sessions, $store_mb MB; big transcript $big_mb MB; best of $RUNS runs, warm page cache."
echo
echo "| measurement | clawkeeper | baseline | ratio | target |"
echo "|---|---|---|---|---|"

ck=$(best_of "$BIN" cleanup --dry-run --json --store "$STORE")
if [ -x "$ORACLE" ]; then
  ref=$(RUNS=1 best_of "$ORACLE" sessions cleanup --dry-run --json --store "$STORE")
  echo "| cleanup --dry-run --json | ${ck}s | reference ${ref}s | $(ratio "$ref" "$ck")× faster | ≥ 50× faster |"
else
  echo "| cleanup --dry-run --json | ${ck}s | reference not installed | – | ≥ 50× faster |"
fi
copy=$(best_of durable_copy)
for sub in strip-images prune-noreply; do
  if supported "$sub"; then
    t=$(best_of_fresh "$BIN" "$sub" --enforce --json --store "$WORK_STORE")
    echo "| $sub --enforce | ${t}s | cp -r + sync ${copy}s | $(ratio "$t" "$copy")× the copy | ≤ 1.5× |"
  else
    echo "| $sub --enforce | not available yet | cp -r + sync ${copy}s | – | ≤ 1.5× |"
  fi
done
c=$(best_of cat_all)
if supported inspect; then
  t=$(best_of "$BIN" inspect --json --store "$STORE")
  echo "| inspect --json | ${t}s | cat ${c}s | $(ratio "$t" "$c")× cat | ≤ 3× |"
else
  echo "| inspect --json | not available yet | cat ${c}s | – | ≤ 3× |"
fi
echo
echo "Peak resident memory on the ${big_mb} MB transcript (target ≤ 64 MB):"
echo
echo "| command | peak RSS |"
echo "|---|---|"
echo "| cleanup --dry-run | $(peak_mb "$BIN" cleanup --dry-run --json --store "$BIGSTORE") MB |"
for sub in strip-images prune-noreply compact inspect; do
  if supported "$sub"; then
    if [ "$sub" = inspect ]; then
      echo "| inspect | $(peak_mb "$BIN" inspect --json --store "$BIGSTORE") MB |"
    else
      echo "| $sub --dry-run | $(peak_mb "$BIN" "$sub" --dry-run --json --store "$BIGSTORE") MB |"
    fi
  else
    echo "| $sub | not available yet |"
  fi
done
rm -rf "$W/work" "$W/copy"
