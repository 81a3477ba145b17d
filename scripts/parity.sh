#!/usr/bin/env bash
# Runs the cleanup parity suite against the reference OpenClaw on many generated cases.
#   scripts/parity.sh            # 300 cases, seeds 1..300
#   scripts/parity.sh 100 5000   # 100 cases starting at seed 5000
# Reproduce one case:   CLAWKEEPER_PARITY_SEED=<seed> cargo test --test cli parity
# Lay one case out:     CLAWKEEPER_PARITY_SEED=<seed> CLAWKEEPER_PARITY_DUMP=/tmp/case \
#                         cargo test --test cli dump_parity_case -- --ignored --nocapture
# Keep failing cases:   CLAWKEEPER_PARITY_KEEP=1 scripts/parity.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CLAWKEEPER_PARITY_CASES="${1:-300}"
export CLAWKEEPER_PARITY_FIRST="${2:-1}"
export CLAWKEEPER_REQUIRE_ORACLE=1
exec cargo test --test cli parity:: -- --nocapture --test-threads=2
