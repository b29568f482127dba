#!/bin/sh
# The Python extension uses the process's shared C++ runtime: it defines none of libstdc++'s
# stream or locale symbols itself. A private copy of them (once linked in on the GPU test
# host) crashes at the first number it formats, with a locale it never initialised.
#   extension_runtime.sh EXTENSION
ext="$1"
if ! command -v nm > /dev/null; then echo "skipped: no nm here"; exit 77; fi
found=$(nm -D --defined-only "$ext" | grep -E ' _ZNSo9_M_insert| _ZNSt6locale| _ZNSt8ios_base4Init' | head -5)
if [ -n "$found" ]; then
  echo "$ext carries its own copy of libstdc++ (link it against the shared libstdc++.so.6):"
  echo "$found"
  exit 1
fi
echo "$ext: libstdc++ from the shared runtime ($(nm -D --undefined-only "$ext" | grep -c GLIBCXX) symbols)"
