#!/usr/bin/env bash
# Copies fixtures/demo to a fresh temp dir, restores the file mtimes that git does not keep
# (fixtures/demo/mtimes.tsv), and prints the environment to point OpenClaw or clawkeeper at it.
#   eval "$(scripts/demo.sh)"   # then: clawkeeper cleanup --store "$DEMO_STORE" --dry-run
set -euo pipefail
src="$(cd "$(dirname "$0")/../fixtures/demo" && pwd)"
dst="$(mktemp -d "${TMPDIR:-/tmp}/clawkeeper-demo.XXXXXX")"
cp -a "$src/." "$dst/"
sessions="$dst/agents/main/sessions"
while IFS=$'\t' read -r name mtime; do
  case "$name" in '#'*|'') continue ;; esac
  touch -m -d "$mtime" "$sessions/$name"
done < "$src/mtimes.tsv"
echo "export OPENCLAW_STATE_DIR='$dst'"
echo "export OPENCLAW_CONFIG_PATH='$dst/openclaw.json'"
echo "export DEMO_STORE='$sessions/sessions.json'"
