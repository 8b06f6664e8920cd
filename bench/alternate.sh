#!/usr/bin/env bash
# Same-run comparison for the workloads that `../shared/bench/rounds.sh` cannot start (its
# twin has no W9, W10 or main-job entry, and it runs forgia without mpirun): runs the forgia
# command and its twin alternately N times, so the machine's drifting load hits both alike,
# takes KEY from each run's output, and prints both medians and the ratio forgia / twin —
# the same arithmetic as rounds.sh.
#
# Usage:  bench/alternate.sh N KEY 'FORGIA COMMAND' 'TWIN COMMAND'
#   KEY   a `key=value` field of the output lines (the last one printed wins), e.g.
#         median_ms, lora_ms, seconds; several comma-separated (`lora_ms,full_ms`) give one
#         line each from the same runs
# Examples (from the project's root, after `cargo build --release -p forgia-cli`):
#   bench/alternate.sh 3 lora_ms 'target/release/forgia bench W9 --threads 2' \
#       '/work/.venv-torch/bin/python bench/torch_w9.py --threads 2'
#   bench/alternate.sh 3 seconds 'target/release/forgia train --quiet-summary' \
#       '/work/.venv-torch/bin/python bench/torch_mnist.py --threads 2'
set -u
[ $# -eq 4 ] || { sed -n '2,15p' "$0"; exit 2; }
n=$1 keys=$2 ours=$3 twin=$4
field() { grep -o "\b$1=[0-9.eE+-]*" | tail -1 | cut -d= -f2; }
med() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
outs=(); touts=()
for ((i = 0; i < n; i++)); do
  outs+=("$(bash -c "$ours" 2>&1)")
  touts+=("$(bash -c "$twin" 2>&1)")
done
for key in ${keys//,/ }; do
  fs=(); ts=()
  for ((i = 0; i < n; i++)); do
    fs+=("$(field "$key" <<<"${outs[i]}")")
    ts+=("$(field "$key" <<<"${touts[i]}")")
  done
  fm=$(printf '%s\n' "${fs[@]}" | med); tm=$(printf '%s\n' "${ts[@]}" | med)
  r=$(awk -v a="$fm" -v b="$tm" 'BEGIN{ if (b+0 == 0) print "nan"; else printf "%.2f", a/b }')
  echo "$key forgia ${fs[*]} | twin ${ts[*]} | median forgia $fm twin $tm | ratio $r"
done
