#!/bin/bash
# Full-disk driver for tests/lit/tools/mpc-run-full-disk.test.
#
# usage: full_disk_log.sh MODEL DATA DIR
# Mounts a 64 KiB tmpfs at DIR/fs in a private mount namespace (unshare; as
# root, else in a user namespace) and has mpc-run write --log and
# --eval-log there: on a full file system (the header cannot be written) and
# on one that fills mid-run (2000 rows do not fit). Each must end with exit
# 1 and one line naming the file, never exit 0 with a short log. Prints
# "LABEL: skipped (why)" where no tmpfs can be mounted.
set -u
model=$1 data=$2 dir=$3
mkdir -p "$dir/fs"
inner='
  set -u
  skip() { for l in full full-eval mid-run; do echo "$l: skipped ($1)"; done; }
  fs=$dir/fs
  if ! mount -t tmpfs -o size=64k tmpfs "$fs" 2> /dev/null; then
    skip "cannot mount a tmpfs"
    exit 0
  fi
  expect_fail() { # LABEL ARGS...: mpc-run must exit 1 naming the file
    label=$1; shift
    mpc-run "$model" --data="$data" --quiet "$@" > /dev/null 2> "$dir/err"
    rc=$?
    echo "$label: exit $rc: $(cat "$dir/err")"
  }
  dd if=/dev/zero of="$fs/fill" bs=4k 2> /dev/null
  expect_fail full --steps=3 --log="$fs/log.csv"
  expect_fail full-eval --steps=3 --eval-data="$data" --eval-log="$fs/eval.csv"
  rm -f "$fs/fill" "$fs/log.csv" "$fs/eval.csv"
  dd if=/dev/zero of="$fs/fill" bs=4k count=12 2> /dev/null
  expect_fail mid-run --steps=2000 --log="$fs/log.csv"
'
export model data dir
if unshare -m true 2> /dev/null; then
  unshare -m bash -c "$inner"
elif unshare -rm true 2> /dev/null; then
  unshare -rm bash -c "$inner"
else
  for l in full full-eval mid-run; do
    echo "$l: skipped (cannot unshare a mount namespace)"
  done
fi
