#!/usr/bin/env bash
# Poseidon variants (builds, or knobs in the environment) against DDP in the same rounds: a
# torchvision model on 4 ranks behind capped links (bench/papers/papers_models_vs_ddp.py, one
# system per run, 20 iterations). Each round runs DDP, then every variant, the variants'
# order rotating by one per round, so none is always first after DDP. Needs root (the lab).
#   TAG=poll M=resnet50 L=10gbit R=4 \
#   VARIANTS="A=/tmp/base/build: B=build: C=build:BENCH_FUSION_BYTES=26214400" \
#     bench/system/variants_rounds.sh
# A variant is NAME=BUILD_DIR:ENV (ENV: space-free VAR=VALUE pairs, comma-joined, or empty);
# BUILD_DIR's apps/poseidon and python/ package are the ones run. SYS=poseidon-bf16 runs
# that system instead of fp32 Poseidon. Knobs bench/jobs/torchvision_train.py reads:
# BENCH_FUSION_BYTES, BENCH_KVSTORE. Output: one line per run, "[NAME, round r] ... images/s";
# each run's report under /tmp/variants/TAG/NAMEr.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${TAG:?} ${M:?} ${L:?} ${R:?} ${VARIANTS:?}"
SYS=${SYS:-poseidon}
ITERATIONS=${ITERATIONS:-20}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
read -r -a variants <<< "$VARIANTS"
n=${#variants[@]}
run() {  # label, output folder, build dir, system, env
  local label=$1 out=$2 dir=$3 system=$4 envs=${5//,/ }
  # shellcheck disable=SC2086
  env $envs .venv/bin/python bench/papers/papers_models_vs_ddp.py --poseidon "$dir/apps/poseidon" --models "$M" \
    --bandwidths "$L" --repeats 1 --iterations "$ITERATIONS" --systems "$system" --out "/tmp/variants/$TAG/$out" \
    | grep "images/s" | sed "s/^/[$label] /"
}
for r in $(seq 1 "$R"); do
  run "ddp, round $r" "ddp$r" build ddp ""
  for k in $(seq 0 $((n - 1))); do
    v=${variants[$(((k + r - 1) % n))]}
    name=${v%%=*} rest=${v#*=}
    run "$name, round $r" "$name$r" "${rest%%:*}" "$SYS" "${rest#*:}"
  done
done
