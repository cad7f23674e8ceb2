#!/usr/bin/env bash
# Issue 35's speed targets as same-run A/B commands (benchmarks/ab.py): build A (the baseline,
# 2e31343) against build B (a tree with the change), alternating, each run a fresh process.
#
#   benchmarks/ab35.sh A_TREE B_TREE CASE [ROUNDS]
#
# A_TREE, B_TREE: directories holding the ringgnn package with its built _core (a checkout's
# python/). CASE:
#   capped   R-MAT 23 sampling epoch under memcap --drop-caches 480M, --memory 480M, io_uring
#            with O_DIRECT, hyperbatches auto (target: B/A within 1.05)
#   memory   R-MAT 23 sampling epoch in memory (third of three epochs; target within 1.05)
#   train    end-to-end training epoch of GraphSAGE on sbm2m under memcap --drop-caches 1G,
#            --memory 1G, a 51M hot-row cache, io_uring with O_DIRECT (target within 1.05)
#   hetero   the 6M-paper heterogeneous dataset under memcap --drop-caches 500M, memory=500M:
#            the first 64 batches of epoch 0 with the HeteroLoader's hyperbatch choice (auto),
#            sampled (target: B's hyperbatch > 1 and B/A <= 0.5 against A's per-batch epoch)
#   hetero-loader  the same 64 batches through the loader's own epoch (feature rows, HeteroData);
#            memcap 1G, since torch and PyG alone hold about 430 MiB
# ROUNDS: runs of each build (default 5). Environment: BATCHES (the hetero cases' batches,
# default 64), WORK (default /var/tmp/ringgnn-bench: rmat23, seeds_rmat23.npy, sbm2m), HYPER
# (default /var/tmp/ringgnn-hyper: hetero6000k), LABELS (default A,B), RESULTS (a directory:
# writes ab35-CASE.json there), MEMCAP (memcap's path, if not ../shared/tools/memcap beside the
# checkout). Needs root (memcap). Inputs:
#   ringgnn generate rmat $WORK/rmat23 --scale 23 --edge-factor 16 --self-loops drop --dedup
#   python -c "import numpy as np; v = 1 << 23; np.save('$WORK/seeds_rmat23.npy',
#       np.random.default_rng(0).choice(v, v // 100, replace=False).astype(np.int64))"
#   ringgnn generate sbm $WORK/sbm2m --nodes 2000000 --classes 16 --avg-degree 20 --feature-dim 64 \
#       --split train=0.0123,val=0.001,test=0.001 --seed 1
#   ringgnn generate hetero $HYPER/hetero6000k --papers 6000000 --authors 4500000 \
#       --institutions 30000 --seed 0 --memory 2G
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,/^set /p' "$0" | sed '$d' >&2; exit 2; }
a=$1 b=$2 case=$3 rounds=${4:-5}
here=$(cd "$(dirname "$0")" && pwd)
work=${WORK:-/var/tmp/ringgnn-bench}
hyper=${HYPER:-/var/tmp/ringgnn-hyper}
ab=(python "$here/ab.py" --a "$a" --b "$b" --labels "${LABELS:-A,B}" --rounds "$rounds" --name "issue 35: $case")
[ -n "${MEMCAP:-}" ] && ab+=(--memcap-tool "$MEMCAP")
[ -n "${RESULTS:-}" ] && ab+=(--json "$RESULTS/ab35-$case.json")
rmat=("$work/rmat23" --fanouts 20,15,10 --batch-size 1024 --seeds "$work/seeds_rmat23.npy" --threads 2 --json)
epoch=(--figure 'epoch_s="seconds": ([0-9.]+)')
case $case in
  capped)
    "${ab[@]}" --memcap 480M --drop-caches "${epoch[@]}" --figure 'hyperbatch="hyperbatch": ([0-9.]+)' \
      --figure 'bytes_read="bytes_read": ([0-9]+)' -- \
      ringgnn sample "${rmat[@]}" --epochs 1 --backend uring --direct --memory 480M --hyperbatch auto ;;
  memory)
    "${ab[@]}" "${epoch[@]}" -- ringgnn sample "${rmat[@]}" --epochs 3 --backend memory ;;
  train)
    "${ab[@]}" --memcap 1G --drop-caches --figure 'train_epoch_s="train_epoch_seconds": ([0-9.]+)' \
      --figure 'train_s="train_seconds": ([0-9.]+)' --figure 'wait_s="wait_seconds": ([0-9.]+)' -- \
      ringgnn train "$work/sbm2m" --epochs 1 --batch-size 512 --fanouts 10,5 --hidden 64 --memory 1G \
      --cache 51M --backend uring --direct --threads 2 --eval sampled --out "/tmp/ab35-train-{label}" \
      --overwrite --quiet --json ;;
  hetero|hetero-loader)
    mode=sample cap=500M
    [ "$case" = hetero-loader ] && mode=loader cap=1G
    "${ab[@]}" --memcap $cap --drop-caches "${epoch[@]}" --figure 'hyperbatch="hyperbatch": ([0-9.]+)' \
      --figure 'per_batch_s="per_batch_s": ([0-9.]+)' --figure 'setup_s="setup_s": ([0-9.]+)' -- \
      python "$here/hetero_epoch.py" "$hyper/hetero6000k" --mode $mode --batches "${BATCHES:-64}" --batch-size 512 \
      --memory 500M --hyperbatch auto ;;
  *) echo "ab35.sh: unknown case '$case' (capped, memory, train, hetero, hetero-loader)" >&2; exit 2 ;;
esac
