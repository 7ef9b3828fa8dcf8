#!/bin/bash
# Self-test of mpc-onnx-node: on a small fake suite built from real cases, the
# runner must flag every kind of problem (a wrong result, an unexpectedly
# passing known failure, a listed case that does not exist), warn about an
# unaccounted case without failing, survive a model mpc rejects, and pass a
# clean allow-list.
#
# usage: runner_selftest.sh RUNNER DATA_DIR WORK_DIR   (exit 77: no data)
set -u
runner=$1 data=$2 work=$3
if [ ! -d "$data/test_add" ]; then
  echo "runner_selftest: SKIPPED: no ONNX node test data at $data"
  exit 77
fi
rm -rf "$work" && mkdir -p "$work/node" || exit 1
fail() { echo "runner_selftest: FAILED: $*"; exit 1; }

for c in test_add test_sub test_abs test_relu; do
  cp -r "$data/$c" "$work/node/$c" || exit 1
done
# Relu's model with Abs's data: a claimed case whose outputs are wrong.
mkdir -p "$work/node/test_relu_wrong"
cp "$data/test_relu/model.onnx" "$work/node/test_relu_wrong/" || exit 1
cp -r "$data/test_abs/test_data_set_0" "$work/node/test_relu_wrong/" || exit 1
# A model that is not ONNX: mpc must reject it with an error, not crash.
mkdir -p "$work/node/test_garbage/test_data_set_0"
printf 'this is not a model' > "$work/node/test_garbage/model.onnx"

# --- every problem at once -------------------------------------------------
cat > "$work/bad.txt" <<'EOF'
[Add]
test_add
test_relu_wrong
test_does_not_exist
[Sub]
test_sub
# test_relu: a reason
# test_acos: a reason for a case that is not in the suite
EOF
echo "test_sub  # listed as failing, but it passes" > "$work/bad-known.txt"
"$runner" --data-dir="$work/node" --claimed="$work/bad.txt" \
  --known-failing="$work/bad-known.txt" > "$work/bad.out" 2>&1
rc=$?
cat "$work/bad.out"
[ $rc -eq 1 ] || fail "expected exit 1 for the bad lists, got $rc"
for want in \
  "FAIL test_relu_wrong: mismatch: test_data_set_0: output 0 'y': " \
  "XPASS test_sub: listed in known-failing.txt but passes" \
  "UNACCOUNTED (warning) test_abs: uses only supported ops" \
  "LIST-ERROR claimed case test_does_not_exist does not exist" \
  "LIST-ERROR unclaimed case test_acos (given a reason) does not exist" \
  "| Add | 2 | 1 | 0 | 0 |" \
  "| Sub | 1 | 1 | 0 | 1 |" \
  "28 of 60 elements differ; worst at [1,0,0]: got 0, expected 2.55298972" \
  "passed 2 / failed 1 / not claimed 3" \
  "onnx-node: FAILED"; do
  grep -qF -- "$want" "$work/bad.out" || fail "missing line: $want"
done
grep -q "CRASH" "$work/bad.out" && fail "a case crashed"

# --- a clean allow-list passes ---------------------------------------------
cat > "$work/good.txt" <<'EOF'
[Add]
test_add
[Sub]
test_sub
[Relu]
test_relu
# test_relu_wrong: its data belongs to Abs
EOF
"$runner" --data-dir="$work/node" --claimed="$work/good.txt" > "$work/good.out" 2>&1
rc=$?
cat "$work/good.out"
[ $rc -eq 0 ] || fail "expected exit 0 for the clean list, got $rc"
grep -qF "passed 3 / failed 0 / not claimed 3" "$work/good.out" ||
  fail "wrong counts for the clean list"
# test_abs is unlisted: a warning and a snippet to paste, not a failure.
grep -qF "UNACCOUNTED (warning) test_abs" "$work/good.out" ||
  fail "no warning for the unaccounted test_abs"
grep -qxF "[Abs]" "$work/good.out" || fail "no claimed.txt snippet for test_abs"

# --- no data: a clean skip ---------------------------------------------------
"$runner" --data-dir="$work/absent" --claimed="$work/good.txt" > "$work/skip.out" 2>&1
rc=$?
[ $rc -eq 77 ] || fail "expected exit 77 without data, got $rc"
grep -q "SKIPPED" "$work/skip.out" || fail "no SKIPPED message without data"
echo "runner_selftest: OK"
