#!/usr/bin/env bash
# Prints, after a red ctest run in build dir $1, the last lines each failed
# test printed (from ctest's LastTest.log): the end of a CI log then says
# why, not only which tests failed, whatever the runner keeps of the top.
set -uo pipefail
dir="${1:-build}/Testing/Temporary"
[ -f "$dir/LastTestsFailed.log" ] || exit 0
echo "=== output of the failed tests (last 40 lines each) ==="
cut -d: -f2- "$dir/LastTestsFailed.log" | while IFS= read -r name; do
  echo "--- $name"
  awk -v name="$name" '
    index($0, "Testing: " name) && substr($0, index($0, "Testing: ") + 9) == name { on = 1; next }
    on && /^<end of output>$/ { exit }
    on && /^Output:$/ { keep = 1; next }
    on && keep { print }' "$dir/LastTest.log" | tail -n 40
done
