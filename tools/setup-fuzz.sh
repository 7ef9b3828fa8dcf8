#!/usr/bin/env bash
# Installs what `make fuzz` needs beyond tools/setup.sh: clang 14 and the
# compiler-rt runtimes (libFuzzer, ASan, UBSan) from Debian. Idempotent and
# quiet when everything is there; make test never calls it.
set -euo pipefail

packages=(
  clang-14            # the compiler for -fsanitize=fuzzer
  libclang-rt-14-dev  # libclang_rt.fuzzer, asan and ubsan runtimes
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup-fuzz: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
