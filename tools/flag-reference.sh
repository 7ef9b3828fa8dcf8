#!/usr/bin/env bash
# Writes docs/flags.md, the flag reference: a short intro, then the flag
# tables of mpc-opt and mpc-run as their --help-markdown prints them (the
# tables in tools/mpc-opt/opt_flags.cpp, passes/compile_flags.cpp and
# tools/mpc-run/run_flags.cpp). The flag-reference test compares the page
# with this script's output; after changing a flag, regenerate it with
#   tools/flag-reference.sh build/bin > docs/flags.md
#
# Usage: tools/flag-reference.sh BIN_DIR
set -euo pipefail
bin=${1:?usage: tools/flag-reference.sh BIN_DIR}
cat <<'INTRO'
# Flag reference

Every flag of `mpc-opt` and `mpc-run`, with what it does, its default and its range. This page
is generated from the tools' flag tables, the same tables their parsers and `--help` read, by
`tools/flag-reference.sh build/bin > docs/flags.md`; the `flag-reference` test fails when it is
out of date. [mpc-opt.md](mpc-opt.md) and [mpc-run.md](mpc-run.md) explain the flags at work.

`F` is a decimal number, `N` a bounded decimal integer, `REGEX` an RE2 pattern searched
anywhere in a name, `BYTES` a size with an optional K, M or G suffix. A value is given as
`--flag=VALUE`; a switch is given bare. A flag given wrongly (unknown, missing its value, a value
out of range) is one line naming it and exit code 1.

INTRO
"$bin/mpc-opt" --help-markdown
echo
"$bin/mpc-run" --help-markdown
