#!/usr/bin/env bash
# Runs the whole workload suite, one process per workload (so each peak belongs to one), with
# the release build, the FMA peak probe first (W5 is read against it). Usage: bench/run.sh [--threads N]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q
for w in peak W1 W2 W3 W4 W5 W6 W7 W7ckpt W8; do
  ./target/release/forgia bench "$w" "$@" || echo "name=$w impl=forgia failed"
done
