#!/usr/bin/env bash
# The paper's protocols on one GPU (issue 50, goal 5: the whole Fashion-MNIST table, 10 classes x
# ratios 0.1, 0.5, 0.75, seed 0, within 10 minutes; goal 4: CIFAR-10-LT): each (class, ratio or rho) task is one process of
# tests/benchmarks/paper_protocol.py, WORKERS of them at a time on the one GPU (a task of the small CNN
# keeps a GPU a fraction busy: its kernels are short and each batch waits on Python), each with
# cores / WORKERS CPU threads.
#
#   tests/benchmarks/gpu_paper_protocol.sh DATA_ROOT [OUT_DIR]
#
# DATA_ROOT holds fashion_mnist.npz or cifar10.npz (python3 ../shared/data/images/fetch_images.py writes
# them). OUT_DIR (default ./gpu-paper-protocol) receives TAG.jsonl (one line per task and method, with its
# seconds), TAG.md (the table) and TAG.log. Settings, by environment:
#   DATA=fashion_mnist  PROTOCOL=labelled (or long-tailed: RHOS=100,50,10 instead of RATIOS)
#   CLASSES=0,...,9  RATIOS=0.1,0.5,0.75  SEEDS=0  METHODS=DLM-SVDD (any of paper_protocol.LABELLED or
#   LONG_TAILED, separated by ";")  SET="epochs=30 ..." (TrainConfig fields)  WORKERS=8
#   THREADS=cores/WORKERS (CPU threads a process: 1 when several runs of this script share the machine)
#   DEVICE=cuda  TAG=DATA  ALONE=1 (the first task alone before the others: the time of a task on its own)
#   SPLIT_METHODS=1 (each method of a task its own process)  DEADLINE (epoch seconds: no task starts later,
#   and one still running then is stopped; the records of those finished are kept)
# Run from anywhere, with dlmsvdd and dlmsvdd_ext installed (pip install with DLMSVDD_CUDA=ON), or the
# source tree with its built extension (then the tree's python/ goes on PYTHONPATH).
set -uo pipefail
root=$(cd "${1:?usage: $0 DATA_ROOT [OUT_DIR]}" && pwd)
out=$(mkdir -p "${2:-gpu-paper-protocol}" && cd "${2:-gpu-paper-protocol}" && pwd)
here=$(cd "$(dirname "$0")/../.." && pwd)
data=${DATA:-fashion_mnist}; protocol=${PROTOCOL:-labelled}; tag=${TAG:-$data}; workers=${WORKERS:-8}; device=${DEVICE:-cuda}
threads=${THREADS:-$(( $(nproc) / workers > 0 ? $(nproc) / workers : 1 ))}
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads
if compgen -G "$here/dlmsvdd_ext/_C*.so" > /dev/null; then
  export PYTHONPATH="$here/python:$here:$here/tests"  # the tree, with its built extension
else
  export PYTHONPATH="$here/tests"  # the installed package, not the tree's uncompiled extension
fi
shards=$(mktemp -d); log="$out/$tag.log"
(cd /tmp && python3 -c "
import torch, dlmsvdd_ext
print(f'torch {torch.__version__}, CUDA {torch.cuda.is_available()} '
      f'({torch.cuda.get_device_name(0) if torch.cuda.is_available() else \"no GPU\"}), '
      f'dlmsvdd_ext built with CUDA: {dlmsvdd_ext.built_with_cuda()}')") | tee "$log"
if [ "$protocol" = long-tailed ]; then key=rho settings=${RHOS:-100,50,10}; else key=ratio settings=${RATIOS:-0.1,0.5,0.75}; fi
echo "$data $protocol: classes ${CLASSES:-0-9}, ratios or rhos $settings, seeds ${SEEDS:-0}," \
     "methods ${METHODS:-DLM-SVDD}, set '${SET:-}', $workers workers of $threads threads on $device" | tee -a "$log"

task() {  # one task "class|ratio or rho|methods": its records appended to TAG.jsonl, its output to a log of its own
  local c r methods sets=() left
  IFS='|' read -r c r methods <<< "$1"
  for kv in ${SET:-}; do sets+=(--set "$kv"); done
  left=$(( ${DEADLINE:-4102444800} - $(date +%s) ))
  if [ "$left" -lt 20 ]; then echo "class $c $key $r $methods: not started (deadline)" | tee -a "$log"; return; fi
  local name="$c-$r-$(tr -c 'A-Za-z0-9' _ <<< "$methods")"
  timeout "$left" python3 "$here/tests/benchmarks/paper_protocol.py" --data "$data" --root "$root" --protocol "$protocol" \
    --classes "$c" --ratios "$r" --rhos "$r" --seeds "${SEEDS:-0}" --methods "$(tr ';' ',' <<< "$methods")" \
    --device "$device" --threads "$threads" "${sets[@]}" --output "$shards/$name.jsonl" > "$shards/$name.log" 2>&1
  local rc=$?
  cat "$shards/$name.jsonl" >> "$records" 2>/dev/null
  echo "[$(( $(date +%s) - start ))s] class $c $key $r $methods: rc=$rc $(grep -o '"seconds": [0-9.]*' \
        "$shards/$name.jsonl" 2>/dev/null | tr '\n' ' ')" | tee -a "$log"
  [ $rc = 0 ] || tail -25 "$shards/$name.log" | tee -a "$log"
}
records="$out/$tag.jsonl"
export -f task; export here root data protocol key device threads shards log records SET SEEDS DEADLINE
methods=${METHODS:-DLM-SVDD}
if [ "${SPLIT_METHODS:-0}" = 1 ]; then IFS=';' read -r -a groups <<< "$methods"; else groups=("$methods"); fi
jobs=(); for r in $(tr ',' ' ' <<< "$settings"); do
  for c in $(tr ',' ' ' <<< "${CLASSES:-0,1,2,3,4,5,6,7,8,9}"); do
    for m in "${groups[@]}"; do jobs+=("$c|$r|$m"); done; done; done
export start=$(date +%s)
if [ "${ALONE:-1}" = 1 ]; then task "${jobs[0]}"; jobs=("${jobs[@]:1}"); fi
printf '%s\n' "${jobs[@]}" | xargs -P "$workers" -I{} bash -c 'task "$0"' {}
wall=$(( $(date +%s) - start ))
echo "$tag: $(grep -c . "$records") records, $wall s wall" | tee -a "$log"
(cd /tmp && python3 - "$records" "$data" "$protocol" <<'PY') | tee "$out/$tag.md"
import json, sys
from pathlib import Path
from benchmarks import paper_protocol
records = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line.strip()]
table = paper_protocol.long_tailed_table if sys.argv[3] == "long-tailed" else paper_protocol.labelled_table
print(table(records, sys.argv[2]))
for row, holds in paper_protocol.goal_rows(records, sys.argv[2]):
    print(f"{'holds' if holds else 'FAILS'}: {row}")
PY
rm -rf "$shards"
