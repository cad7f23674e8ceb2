#!/usr/bin/env bash
# The GPU checks of a session that has a device lent (see /work/.library/device): the CUDA-marked
# tests, every training task once on cuda (scripts/gpu_smoke.py) and benchmarks/cuda_bench.py.
# Run from the repository root with the built package on PYTHONPATH (ringgnn/ with _core.abi3.so).
# Logs and JSON go to $OUT (default /tmp/gpu-out).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
nvidia-smi -L
python3 -c "import torch, torch_geometric, ringgnn; print('torch', torch.__version__, 'pyg', torch_geometric.__version__, torch.cuda.get_device_name(), 'cpus', __import__('os').cpu_count())"
step() {
    local name=$1; shift
    local t=$(date +%s)
    "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "=== $name: exit $rc in $(( $(date +%s) - t )) s"
    grep -v "jit.script\|warnings.warn" "$OUT/$name.log" | tail -${TAIL:-30}
}
step tests timeout ${TESTS_S:-240} python3 -m pytest -q -rs -p no:cacheprovider tests/test_cuda_path.py \
    tests/test_infer.py -k "cuda or device"
step smoke timeout ${SMOKE_S:-180} python3 scripts/gpu_smoke.py
step bench timeout ${BENCH_S:-300} python3 benchmarks/cuda_bench.py --generate /tmp/cuda-sbm --nodes 1000000 \
    --feature-dim 256 --batches 40 --repeat 2 --infer --json "$OUT/cuda_bench.json"
