#!/usr/bin/env bash
# Side-by-side benchmark of clawkeeper against the reference OpenClaw and against cp/cat of the
# same bytes. Generates its inputs deterministically (examples/gen_bench.rs):
#   (a) a store of $SESSIONS sessions (default 3000, about 1.5 GB),
#   (b) one transcript of about $BIG_MB MB (default 500);
#   (c) two transcripts with one line of about $HUGE_MB MB (default 180): a reply that
#       prune-noreply re-parents, and a 131-line transcript whose user message is that line;
# then prints a Markdown report: times (best of $RUNS), ratios against the baselines, and the
# peak resident memory of every command on the big transcript. Needs 10 GB + 4 × RUNS × 1.6 GB
# free in WORKDIR (used copies of the store are removed only at the end).
# Nothing here is a test: run it on a quiet machine and paste the report into BENCHMARKS.md.
#
#   usage: scripts/bench.sh [WORKDIR]        (default: /tmp/clawkeeper-bench)
#   env:   SESSIONS, MEAN_KB, BIG_MB, HUGE_MB, ENTRIES, ENTRY_TRANSCRIPTS, RUNS (repetitions, best time kept; default 3),
#          CLAWKEEPER_ORACLE (path of the reference wrapper; see scripts/oracle/README.md),
#          JOURNALED_DIR (a directory on another file system, one with a journal: the writers and
#          the copy are measured there too; needs 3.2 GB free there)
set -euo pipefail
cd "$(dirname "$0")/.."
W="${1:-/tmp/clawkeeper-bench}"
SESSIONS="${SESSIONS:-3000}"
MEAN_KB="${MEAN_KB:-500}"
BIG_MB="${BIG_MB:-500}"
HUGE_MB="${HUGE_MB:-180}"
ENTRIES="${ENTRIES:-200000}"
ENTRY_TRANSCRIPTS="${ENTRY_TRANSCRIPTS:-3000}"
RUNS="${RUNS:-3}"
ORACLE="${CLAWKEEPER_ORACLE:-$HOME/.cache/openclaw-oracle/openclaw}"
GEN_VERSION=3 # bump when examples/gen_bench.rs changes what it writes

cargo build --release --quiet --example gen_bench
cargo build --release --quiet
BIN="$PWD/target/release/clawkeeper"
GEN="$PWD/target/release/examples/gen_bench"
for tool in bc /usr/bin/time; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is needed" >&2; exit 1; }
done

mkdir -p "$W"
if [ ! -f "$W/store/.done-$GEN_VERSION-$SESSIONS-$MEAN_KB" ]; then
  rm -rf "$W/store"
  "$GEN" store "$W/store" "$SESSIONS" "$MEAN_KB" >&2
  touch "$W/store/.done-$GEN_VERSION-$SESSIONS-$MEAN_KB"
fi
SID=0b16f11e-0000-4000-8000-000000000500
if [ ! -f "$W/big/.done-$GEN_VERSION-$BIG_MB" ]; then
  rm -rf "$W/big"
  "$GEN" transcript "$W/big/agents/main/sessions/$SID.jsonl" "$BIG_MB" >&2
  now=$(date +%s%3N)
  printf '{\n  "agent:main:main": {\n    "sessionId": "%s",\n    "updatedAt": %s\n  }\n}' "$SID" "$now" \
    > "$W/big/agents/main/sessions/sessions.json"
  touch "$W/big/.done-$GEN_VERSION-$BIG_MB"
fi
for kind in huge-reply huge-message; do
  if [ ! -f "$W/$kind/.done-$GEN_VERSION-$HUGE_MB" ]; then
    rm -rf "$W/$kind"
    "$GEN" "$kind" "$W/$kind/agents/main/sessions/$SID.jsonl" "$HUGE_MB" >&2
    printf '{\n  "agent:main:main": {\n    "sessionId": "%s",\n    "updatedAt": %s\n  }\n}' \
      "$SID" "$(date +%s%3N)" > "$W/$kind/agents/main/sessions/sessions.json"
    touch "$W/$kind/.done-$GEN_VERSION-$HUGE_MB"
  fi
done
if [ ! -f "$W/entries/.done-$GEN_VERSION-$ENTRIES-$ENTRY_TRANSCRIPTS" ]; then
  rm -rf "$W/entries"
  "$GEN" entries "$W/entries" "$ENTRIES" "$ENTRY_TRANSCRIPTS" >&2
  touch "$W/entries/.done-$GEN_VERSION-$ENTRIES-$ENTRY_TRANSCRIPTS"
fi
SESS="$W/store/agents/main/sessions"
STORE="$SESS/sessions.json"
BIGDIR="$W/big/agents/main/sessions"
export OPENCLAW_CONFIG_PATH="$W/store/openclaw.json" OPENCLAW_STATE_DIR="$W/store"

# secs CMD...: wall time of one run, in seconds (output discarded), read from bash's own clock:
# no process is started inside the interval (two `date` processes added about 1.5 ms, a tenth
# of a `cleanup --dry-run`). The decimal point is the locale's, hence the substitution.
secs() {
  local t0 t1
  t0=${EPOCHREALTIME/,/.}; "$@" >/dev/null 2>&1 || true; t1=${EPOCHREALTIME/,/.}
  echo "$t1 - $t0" | bc -l
}
# best_of [PREP] -- CMD...: the lowest wall time over $RUNS runs; PREP (a shell function name,
# or "-") runs untimed before each run.
best_of() {
  local prep=$1 best="" d
  shift
  for _ in $(seq "$RUNS"); do
    [ "$prep" = - ] || "$prep"
    d=$(secs "$@")
    if [ -z "$best" ] || [ "$(echo "$d < $best" | bc -l)" = 1 ]; then best=$d; fi
  done
  printf '%.3f' "$best"
}
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }
# Writers and the copy never run right after a mass deletion: ext4 without a journal skips
# inodes freed in the last minutes when it allocates new ones, which would bill one run's
# cleanup to whoever creates files next. So a used copy is moved aside (a rename, no deletion)
# and everything is removed at the end.
stamp() { date +%s%N; }
fresh_work() {
  if [ -d "$W/work" ]; then mv "$W/work" "$W/used-$(stamp)"; fi
  cp -r "$W/store" "$W/work"
  sync
}
fresh_big() { rm -rf "$W/bigwork"; cp -r "$W/big" "$W/bigwork"; sync; }
durable_copy() { cp -r "$W/store" "$W/copy-$(stamp)"; sync; }
cat_all() { find "$SESS" -maxdepth 1 -type f -exec cat {} + >/dev/null; }
# then_sync CMD...: the command, then sync, so that its result is on disk like the copy's.
then_sync() { "$@"; sync; }
# peak_mb CMD...: peak resident memory of one run, in MB.
peak_mb() { /usr/bin/time -f '%M' "$@" 2>&1 >/dev/null | tail -n 1 | awk '{printf "%.1f", $1/1024}'; }

WORK_STORE="$W/work/agents/main/sessions/sessions.json"
BIGWORK="$W/bigwork/agents/main/sessions"
store_mb=$(du -sm "$SESS" | cut -f1)
big_mb=$(du -sm "$BIGDIR/$SID.jsonl" | cut -f1)
files=$(find "$SESS" -maxdepth 1 -type f | wc -l)
cat_all # warm the page cache for every contender alike

echo "## Run of $(date -u +%Y-%m-%dT%H:%MZ), clawkeeper $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
echo
echo "- Machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p' | head -n1)), $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(uname -sr), $(df -T "$W" | awk 'NR==2{print $2}') on $(df "$W" | awk 'NR==2{print $1}')"
echo "- Inputs: store of $SESSIONS sessions, $files files, $store_mb MB; one transcript of $big_mb MB ($(wc -l < "$BIGDIR/$SID.jsonl") lines)"
echo "- Method: best wall time of $RUNS runs, warm page cache; writers work on a fresh copy each run (not timed; no deletions until the end) and are followed by sync"
echo
echo "| measurement | clawkeeper | baseline | ratio | target |"
echo "|---|---|---|---|---|"
ck=$(best_of - "$BIN" cleanup --dry-run --json --store "$STORE")
if [ -x "$ORACLE" ]; then
  "$ORACLE" sessions cleanup --dry-run --json --store "$STORE" > "$W/ref.json" 2>/dev/null || true
  "$BIN" cleanup --dry-run --json --store "$STORE" > "$W/ck.json" 2>/dev/null || true
  same=$(cmp -s "$W/ref.json" "$W/ck.json" && echo "identical output" || echo "OUTPUT DIFFERS")
  ref=$(best_of - "$ORACLE" sessions cleanup --dry-run --json --store "$STORE")
  echo "| cleanup --dry-run --json ($same) | ${ck}s | reference ${ref}s | $(ratio "$ref" "$ck")× faster | ≥ 100× faster |"
else
  echo "| cleanup --dry-run --json | ${ck}s | reference not installed | – | ≥ 100× faster |"
fi
copy=$(best_of - durable_copy)
# The floor of any in-place rewrite that is locked, atomic and durable, batched as clawkeeper
# batches (no parsing).
floor=$(best_of fresh_work then_sync python3 scripts/rewrite_floor.py "$W/work/agents/main/sessions")
for sub in strip-images prune-noreply; do
  t=$(best_of fresh_work then_sync "$BIN" "$sub" --enforce --json --store "$WORK_STORE")
  echo "| $sub --enforce (store) | ${t}s | cp -r + sync ${copy}s | $(ratio "$t" "$copy")× the copy | ≤ 1.2× |"
  echo "| $sub --enforce (store) | ${t}s | locked atomic rewrite of every transcript (scripts/rewrite_floor.py) ${floor}s | $(ratio "$t" "$floor")× the floor | – |"
done
# The same writers and copy on another file system, when one is given. On an ext4 without a
# journal (this VM's root) every inode a rewrite frees (the old file, the lock) is skipped,
# and looked at again, by each later allocation in its group for minutes: a run over
# thousands of files pays for its own frees, a copy frees nothing. A journalled ext4 does not
# check (see BENCHMARKS.md). Deleting there between runs is harmless for the same reason.
if [ -n "${JOURNALED_DIR:-}" ]; then
  J="$JOURNALED_DIR"
  jfs="$(df -T "$J" | awk 'NR==2{print $2}') on $(df "$J" | awk 'NR==2{print $1}')"
  jclear() { rm -rf "$J/work" "$J/copy"; sync; }
  jwork() { jclear; cp -r "$W/store" "$J/work"; sync; }
  jcopy() { cp -r "$W/store" "$J/copy"; sync; }
  jcopy_t=$(best_of jclear jcopy)
  for sub in strip-images prune-noreply; do
    t=$(best_of jwork then_sync "$BIN" "$sub" --enforce --json --store "$J/work/agents/main/sessions/sessions.json")
    echo "| $sub --enforce (store on $jfs, JOURNALED_DIR) | ${t}s | cp -r + sync there ${jcopy_t}s | $(ratio "$t" "$jcopy_t")× the copy | – |"
  done
  jclear
fi
c=$(best_of - cat_all)
t=$(best_of - "$BIN" inspect --json --store "$STORE")
echo "| inspect --json (store) | ${t}s | cat ${c}s | $(ratio "$t" "$c")× cat | ≤ 1.5× |"
t=$(best_of - "$BIN" inspect --json --no-cleanup --store "$STORE")
echo "| inspect --json --no-cleanup (store) | ${t}s | cat ${c}s | $(ratio "$t" "$c")× cat | – |"
echo
echo "Peak resident memory on the $big_mb MB transcript (target ≤ 32 MB for every command):"
echo
echo "| command | peak RSS |"
echo "|---|---|"
BIGSTORE="$BIGDIR/sessions.json"
echo "| cleanup --dry-run | $(peak_mb "$BIN" cleanup --dry-run --json --store "$BIGSTORE") MB |"
for sub in strip-images prune-noreply compact; do
  echo "| $sub --dry-run | $(peak_mb "$BIN" "$sub" --dry-run --json --store "$BIGSTORE") MB |"
  fresh_big
  echo "| $sub --enforce | $(peak_mb "$BIN" "$sub" --enforce --json --store "$BIGWORK/sessions.json") MB |"
done
fresh_big
echo "| compact --successor --enforce | $(peak_mb "$BIN" compact --successor --enforce --json --store "$BIGWORK/sessions.json") MB |"
echo "| inspect | $(peak_mb "$BIN" inspect --json --store "$BIGSTORE") MB |"
echo
reply_mb=$(du -sm "$W/huge-reply/agents/main/sessions/$SID.jsonl" | cut -f1)
message_mb=$(du -sm "$W/huge-message/agents/main/sessions/$SID.jsonl" | cut -f1)
echo "Peak resident memory on one huge line: a $reply_mb MB transcript whose $HUGE_MB MB reply follows"
echo "a removed silent reply (prune-noreply re-parents it), and a $message_mb MB transcript of 131 lines"
echo "whose $HUGE_MB MB user message is followed by a tool result with an image:"
echo
echo "| command | peak RSS |"
echo "|---|---|"
REPLY="$W/huge-reply/agents/main/sessions/sessions.json"
MESSAGE="$W/huge-message/agents/main/sessions/sessions.json"
echo "| prune-noreply --dry-run (huge reply) | $(peak_mb "$BIN" prune-noreply --dry-run --json --store "$REPLY") MB |"
rm -rf "$W/replywork"; cp -r "$W/huge-reply" "$W/replywork"; sync
echo "| prune-noreply --enforce (huge reply) | $(peak_mb "$BIN" prune-noreply --enforce --json --store "$W/replywork/agents/main/sessions/sessions.json") MB |"
echo "| compact --dry-run (huge message) | $(peak_mb "$BIN" compact --dry-run --json --store "$MESSAGE") MB |"
echo "| inspect (huge message) | $(peak_mb "$BIN" inspect --json --store "$MESSAGE") MB |"
echo
ENTRY_STORE="$W/entries/agents/main/sessions/sessions.json"
entries_mb=$(du -sm "$ENTRY_STORE" | cut -f1)
echo "Peak resident memory on a store of $ENTRIES entries ($entries_mb MB of sessions.json),"
echo "$ENTRY_TRANSCRIPTS of them with a transcript (target: under 64 MB plus the size of sessions.json):"
echo
echo "| command | peak RSS |"
echo "|---|---|"
(
  export OPENCLAW_CONFIG_PATH="$W/entries/openclaw.json" OPENCLAW_STATE_DIR="$W/entries"
  echo "| inspect | $(peak_mb "$BIN" inspect --store "$ENTRY_STORE") MB |"
  echo "| inspect --json | $(peak_mb "$BIN" inspect --json --store "$ENTRY_STORE") MB |"
  for sub in prune-noreply strip-images compact prune-cache-ttl; do
    echo "| $sub --dry-run | $(peak_mb "$BIN" "$sub" --dry-run --store "$ENTRY_STORE") MB |"
    echo "| $sub --dry-run --json | $(peak_mb "$BIN" "$sub" --dry-run --json --store "$ENTRY_STORE") MB |"
  done
  echo "| cleanup --dry-run --json | $(peak_mb "$BIN" cleanup --dry-run --json --store "$ENTRY_STORE") MB |"
  echo "| maintain (every step, previews) | $(peak_mb "$BIN" maintain --store "$ENTRY_STORE") MB |"
  # Each writer on a fresh copy of the store.
  WORK_ENTRY_STORE="$W/entrieswork/agents/main/sessions/sessions.json"
  export OPENCLAW_CONFIG_PATH="$W/entrieswork/openclaw.json" OPENCLAW_STATE_DIR="$W/entrieswork"
  for cmd in "cleanup --enforce --json" "prune-noreply --enforce --json" "strip-images --enforce --json" \
    "compact --enforce --json" "prune-cache-ttl --enforce --json" "maintain --enforce"; do
    rm -rf "$W/entrieswork"; cp -r "$W/entries" "$W/entrieswork"; sync
    # shellcheck disable=SC2086 # the command's words
    echo "| $cmd | $(peak_mb "$BIN" $cmd --store "$WORK_ENTRY_STORE") MB |"
  done
)
rm -rf "$W/work" "$W"/used-* "$W"/copy-* "$W/bigwork" "$W/replywork" "$W/entrieswork"
