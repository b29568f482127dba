#!/usr/bin/env bash
# Builds one libFuzzer target per decoder of outside bytes with clang (-fsanitize=fuzzer,
# address,undefined) and runs each from a seed corpus of valid inputs (make_seeds.py). One
# binary per decoder, so that each gets its own executions. Usage:
#   tests/fuzz/run_fuzz.sh OUT_DIR [SECONDS] [TARGET...]
# Each target runs until it has executed RUNS inputs or for SECONDS, whichever comes first,
# as many targets at a time as there are cores. CI claims at least MIN_EXECS executions per
# decoder, so the count is checked, not hoped for: the script fails if any target crashes,
# hits a sanitizer, or stops short of MIN_EXECS. RUNS is twice MIN_EXECS, a margin for a
# slower machine within the same SECONDS. Environment (defaults):
#   POSEIDON_FUZZ_MIN_EXECS (1000000)  POSEIDON_FUZZ_RUNS (2 x MIN_EXECS; -1: run SECONDS)
#   POSEIDON_FUZZ_JOBS (the core count)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out=${1:?usage: run_fuzz.sh OUT_DIR [SECONDS] [TARGET...]}
seconds=${2:-200}
shift $(($# < 2 ? $# : 2))
min_execs=${POSEIDON_FUZZ_MIN_EXECS:-1000000}
runs=${POSEIDON_FUZZ_RUNS:-$((2 * min_execs))}
# Not plain nproc: it obeys OMP_NUM_THREADS, which run.sh sets to 1 (the targets then ran
# one at a time).
lanes=${POSEIDON_FUZZ_JOBS:-$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)}

# Each target (tests/fuzz/NAME.cc) and the sources it links; the slowest first, so that
# the lanes finish together.
declare -A sources=(
  [model_file_fuzz]="src/models/model_spec.cc src/coordinator/model_info.cc src/common/words.cc src/common/option_error.cc"
  [compute_profile_fuzz]="src/profile/compute_profile.cc src/coordinator/model_info.cc src/common/words.cc"
  [idx_fuzz]="src/data/idx_reader.cc src/common/option_error.cc"
  [control_reply_fuzz]="src/comm/control_channel.cc src/comm/message.cc src/comm/work.cc src/common/wait.cc"
  [state_file_fuzz]="src/checkpoint/state_file.cc src/common/crc32.cc"
  [manifest_fuzz]="src/checkpoint/checkpointer.cc src/checkpoint/state_file.cc src/common/crc32.cc src/comm/control_channel.cc
                   src/comm/message.cc src/comm/work.cc src/common/wait.cc src/common/fault.cc src/common/files.cc"
  [message_fuzz]="src/comm/message.cc"
)
all_targets=(model_file_fuzz compute_profile_fuzz idx_fuzz control_reply_fuzz state_file_fuzz manifest_fuzz
             message_fuzz)
targets=("$@")
((${#targets[@]} > 0)) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ -v "sources[$t]" ]] || { echo "run_fuzz.sh: no target '$t' (have: ${all_targets[*]})" >&2; exit 2; }
done

# At most `lanes` background jobs: waits for one to end first when all lanes are busy.
# Their statuses are collected by finish, which fails if any job failed.
pids=()
take_lane() {
  while (($(jobs -rp | wc -l) >= lanes)); do wait -n || true; done
}
finish() {
  for pid in "${pids[@]}"; do wait "$pid"; done
  pids=()
}

cxx=(clang++ -std=c++17 -g -O1 -DPOSEIDON_HAVE_ZLIB -fsanitize=address,undefined -fno-sanitize-recover=undefined
     -I"$root/include" -I"$root/src")
mkdir -p "$out/obj" "$out/corpus"

# Library sources are compiled once, then linked into the targets that use them.
declare -A objects=()
for t in "${targets[@]}"; do
  for s in ${sources[$t]}; do objects[$s]="$out/obj/$(basename "${s%.cc}").o"; done
done
for s in "${!objects[@]}"; do
  take_lane
  "${cxx[@]}" -fsanitize=fuzzer-no-link -c "$root/$s" -o "${objects[$s]}" &
  pids+=($!)
done
finish
for t in "${targets[@]}"; do
  objs=()
  for s in ${sources[$t]}; do objs+=("${objects[$s]}"); done
  take_lane
  "${cxx[@]}" -fsanitize=fuzzer "$root/tests/fuzz/$t.cc" "${objs[@]}" -lz -o "$out/$t" &
  pids+=($!)
done
finish

python3 "$root/tests/fuzz/make_seeds.py" "$out/corpus"

# One target: its corpus grows across runs; a crash input is kept as OUT_DIR/TARGET-crash-*.
fuzz() {
  local rc=0
  "$out/$1" -runs="$runs" -max_total_time="$seconds" -print_final_stats=1 -error_exitcode=77 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$out/$1-" "$out/corpus/$1" >"$out/$1.log" 2>&1 || rc=$?
  echo "$rc" >"$out/$1.rc"
}
start=$SECONDS
for t in "${targets[@]}"; do
  take_lane
  fuzz "$t" &
  pids+=($!)
done
finish

failed=()
for t in "${targets[@]}"; do
  log="$out/$t.log"
  rc=$(cat "$out/$t.rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
  printf '%-22s %9s executions in %4s s (%6s/s), exit %s\n' "$t" "${execs:-?}" "${took:-?}" "${rate:-?}" "$rc"
  if ((rc != 0)); then
    tail -n 40 "$log"
    failed+=("$t (crashed or failed: see $log)")
  elif [[ -z $execs ]] || ((execs < min_execs)); then
    failed+=("$t (only ${execs:-0} executions in $seconds s, fewer than $min_execs: allow more seconds)")
  fi
done
echo "run_fuzz.sh: fuzzing took $((SECONDS - start)) s on $lanes lanes"
if ((${#failed[@]} > 0)); then
  printf 'run_fuzz.sh: FAILED %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "run_fuzz.sh: ${#targets[@]} targets, each at least $min_execs executions, no crash"
