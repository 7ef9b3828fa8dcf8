#!/usr/bin/env bash
# Installs what `make fuzz` needs beyond tools/setup.sh: clang 14 and the
# compiler-rt runtimes (libFuzzer, ASan, UBSan) from Debian. Idempotent and
# quiet when everything is there; make test never calls it.
set -euo pipefail
exec "$(dirname "$0")/setup.sh" \
  clang-14 \
  libclang-rt-14-dev # libclang_rt.fuzzer, asan and ubsan runtimes
