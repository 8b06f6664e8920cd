#!/usr/bin/env bash
# Runs the hostile-input property test (crates/forgia/tests/hostile_ops.rs) over many fixed
# seeds, reporting every seed that fails and every one that runs past 20 s (a hang; its stack
# is printed with gdb when gdb is installed). CI draws one random seed of 256 cases a run; this
# draws FIRST..LAST seeds of CASES cases each. Run it before changing kernels or op checks.
#
#   tools/hostile_sweep.sh [FIRST LAST CASES]     (default: 1 100 3000)
set -uo pipefail
first=${1:-1} last=${2:-100} cases=${3:-3000}
cd "$(dirname "$0")/.."
bin=$(cargo test -p forgia --test hostile_ops --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("executable") and m.get("target",{}).get("name")=="hostile_ops": print(m["executable"])')
[ -x "$bin" ] || { echo "could not build the hostile_ops test" >&2; exit 1; }
regressions=crates/forgia/tests/hostile_ops.proptest-regressions
cp "$regressions" /tmp/hostile_regressions.$$
log=$(mktemp)
for s in $(seq "$first" "$last"); do
  PROPTEST_RNG_SEED=$s PROPTEST_CASES=$cases "$bin" every_op_on_hostile > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 40); do sleep 0.5; kill -0 $pid 2>/dev/null || break; done
  if kill -0 $pid 2>/dev/null; then
    echo "seed $s: still running after 20 s"
    command -v gdb > /dev/null && gdb -p $pid -batch -ex 'thread apply all bt 16' 2>/dev/null | grep -E '^#.*forgia::' | head -4
    kill -9 $pid; wait $pid 2>/dev/null
  elif ! wait $pid; then
    echo "seed $s: $(grep -o 'Test failed: .*' "$log" | head -1 | cut -c1-400)"
  fi
  cp /tmp/hostile_regressions.$$ "$regressions" # a failure appends its case; keep the file as committed
done
rm -f "$log" /tmp/hostile_regressions.$$
