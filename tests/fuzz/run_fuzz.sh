#!/usr/bin/env bash
# Builds the decoding fuzz target with clang (-fsanitize=fuzzer,address,undefined) and
# runs it for a bounded time from a seed corpus of valid inputs. Usage:
#   tests/fuzz/run_fuzz.sh OUT_DIR [SECONDS]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out=${1:?usage: run_fuzz.sh OUT_DIR [SECONDS]}
seconds=${2:-60}
mkdir -p "$out/corpus"
clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root/include" -I"$root/src" \
  "$root/tests/fuzz/decode_fuzz.cc" \
  "$root/src/comm/message.cc" "$root/src/comm/control_channel.cc" "$root/src/comm/work.cc" \
  "$root/src/common/wait.cc" "$root/src/checkpoint/state_file.cc" "$root/src/checkpoint/checkpointer.cc" \
  -lz -o "$out/decode_fuzz"
python3 "$root/tests/fuzz/make_seeds.py" "$out/corpus"
# -error_exitcode: a crash or sanitizer report fails the test; the corpus grows across runs.
"$out/decode_fuzz" -max_total_time="$seconds" -print_final_stats=1 -error_exitcode=77 \
  -timeout=10 -rss_limit_mb=2048 "$out/corpus"
