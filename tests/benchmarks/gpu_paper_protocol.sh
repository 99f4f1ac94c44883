#!/usr/bin/env bash
# The paper's Fashion-MNIST table (Table II's column: 10 classes x ratios 0.1, 0.5, 0.75, seed 0) on one
# GPU, DLM-SVDD at its defaults (issue 50, goal 5: the whole table within 10 minutes), then, with the
# time left, the peers of tests/benchmarks/paper_protocol.py on the same tasks.
#
#   tests/benchmarks/gpu_paper_protocol.sh DATA_ROOT [OUT_DIR] [PEERS_SECONDS]
#
# DATA_ROOT holds fashion_mnist.npz (python3 ../shared/data/images/fetch_images.py writes it; 31 MB)
# or FashionMNIST/raw. OUT_DIR (default: ./gpu-paper-protocol) receives records.jsonl (one line per task
# and method, with its seconds), table.md and log.txt. PEERS_SECONDS (default 0: none) bounds the peers'
# run. Run from the repository root, with dlmsvdd and dlmsvdd_ext importable (an installed package, or
# the source tree with its built extension: PYTHONPATH is set below for the latter). DEVICE (default
# cuda) and CLASSES (default 0,...,9) change the device and the classes, for a smoke test elsewhere.
set -euo pipefail
root=${1:?usage: $0 DATA_ROOT [OUT_DIR] [PEERS_SECONDS]}
out=${2:-gpu-paper-protocol}
peers_seconds=${3:-0}
device=${DEVICE:-cuda}
classes=${CLASSES:-0,1,2,3,4,5,6,7,8,9}
here=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH="$here/python:$here:$here/tests${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$out"
python - <<'PY' | tee "$out/log.txt"
import torch, dlmsvdd_ext
print(f"torch {torch.__version__}, CUDA {torch.cuda.is_available()} "
      f"({torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'}), "
      f"dlmsvdd_ext built with CUDA: {dlmsvdd_ext.built_with_cuda()}")
PY
start=$(date +%s)
python "$here/tests/benchmarks/paper_protocol.py" --data fashion_mnist --root "$root" --protocol labelled \
    --ratios 0.1,0.5,0.75 --classes "$classes" --seeds 0 --methods DLM-SVDD --device "$device" \
    --output "$out/records.jsonl" \
    2>&1 | tee -a "$out/log.txt"
end=$(date +%s)
echo "DLM-SVDD, classes $classes x 3 ratios: $((end - start)) s wall (goal for the 30 tasks: within 600 s)" \
    | tee -a "$out/log.txt"
if [ "$peers_seconds" -gt 0 ]; then
    timeout "$peers_seconds" python "$here/tests/benchmarks/paper_protocol.py" --data fashion_mnist --root "$root" \
        --protocol labelled --ratios 0.1,0.75 --classes "$classes" --seeds 0 --device "$device" \
        --output "$out/records.jsonl" \
        2>&1 | tee -a "$out/log.txt" || echo "peers stopped at ${peers_seconds} s" | tee -a "$out/log.txt"
fi
python - "$out" <<'PY' | tee "$out/table.md"
import json, sys
from pathlib import Path
from benchmarks import paper_protocol
records = [json.loads(line) for line in (Path(sys.argv[1]) / "records.jsonl").read_text().splitlines()]
print(paper_protocol.labelled_table(records, "fashion_mnist"))
PY
