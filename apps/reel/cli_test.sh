#!/usr/bin/env bash
# End-to-end checks of `reel storage` and `reel smoke` on a local store, run by ctest.
# Usage: cli_test.sh PATH_TO_REEL
set -u
REEL=$1
source "$(dirname "$0")/check_lib.sh"

head -c 3000000 /dev/urandom > "$WORK/input.bin"

# cp file -> store key, stat, cat round trip.
check "cp local file into a store" "$REEL" storage cp -q "$WORK/input.bin" "file://$WORK/store/dir/a.bin"
check "copied bytes identical" cmp -s "$WORK/input.bin" "$WORK/store/dir/a.bin"
check "stat reports the size" bash -c "'$REEL' storage stat '$WORK/store/dir/a.bin' | grep -q 'size:     3000000 '"
check "cat round trip" bash -c "'$REEL' storage cat '$WORK/store/dir/a.bin' | cmp -s - '$WORK/input.bin'"

# cp into a "directory" keeps the name; recursive copy of a tree; listing with and without -r.
check "cp into dir/ keeps the name" "$REEL" storage cp -q "$WORK/input.bin" "$WORK/store/other/"
check "file landed under its name" test -f "$WORK/store/other/input.bin"
check "recursive copy" "$REEL" storage cp -q -r "$WORK/store" "$WORK/copy"
check "recursive copy complete" cmp -s "$WORK/store/dir/a.bin" "$WORK/copy/dir/a.bin"
check "ls shows prefixes" bash -c "'$REEL' storage ls '$WORK/copy' | grep -Eq 'PRE +dir/'"
check "ls -r shows keys" bash -c "'$REEL' storage ls -r '$WORK/copy' 2>/dev/null | grep -q ' other/input.bin$'"
check "ls -r counts objects" bash -c "'$REEL' storage ls -r '$WORK/copy' 2>&1 >/dev/null | grep -q '^2 objects'"

# Errors: missing object -> exit 2 with a message naming it; bad scheme -> exit 3.
"$REEL" storage stat "$WORK/store/missing.bin" 2> "$WORK/err"; code=$?
check "stat missing exits 2" test "$code" -eq 2
check "stat missing names the key" grep -q "missing.bin" "$WORK/err"
"$REEL" storage ls "ftp://host/x" 2> "$WORK/err"; code=$?
check "unknown scheme exits 3" test "$code" -eq 3
check "unknown scheme explained" grep -q "unknown scheme 'ftp'" "$WORK/err"
"$REEL" storage rm "$WORK/store/missing.bin" 2>/dev/null; code=$?
check "rm of a missing object exits 2" test "$code" -eq 2

check "rm removes" "$REEL" storage rm "$WORK/store/dir/a.bin"
check "removed object is gone" test ! -e "$WORK/store/dir/a.bin"
check "rm -r removes a tree" "$REEL" storage rm -r "$WORK/copy"
check "tree is gone" bash -c "! find '$WORK/copy' -type f | grep -q ."

# The main job on embedded defaults, small sizes.
check "smoke run" bash -c "cd '$WORK' && '$REEL' smoke --objects 8 --object-kib 64 --large-mib 16 | grep -q 'smoke: OK'"
check "smoke cleaned up" bash -c "! find '$WORK/reel-data/smoke' -type f | grep -q ."

"$REEL" --log-level loud storage ls "$WORK" 2> "$WORK/err"; code=$?
check "bad log level refused" test "$code" -ne 0

# A trace replayed through the scheduler's core: a table per policy; mistakes exit clearly.
head -2001 "$(dirname "$0")/../../testdata/traces/philly.csv" > "$WORK/trace.csv"
check "sched simulate prints a row per policy and backfill setting" bash -c "
  '$REEL' sched simulate --trace '$WORK/trace.csv' --policy fifo,las --json '$WORK/sim.json' > '$WORK/sim.out' &&
  grep -q '^2000 jobs on ' '$WORK/sim.out' && [ \$(grep -Ec '^(fifo|las) +(on|off) ' '$WORK/sim.out') = 4 ] &&
  python3 -c 'import json; rows = json.load(open(\"$WORK/sim.json\")); assert len(rows) == 4 and all(r[\"jobs\"] == 2000 for r in rows)'"
"$REEL" sched simulate --trace "$WORK/trace.csv" --policy random > "$WORK/sim.err" 2>&1
check "an unknown policy exits 3" bash -c "[ $? -eq 3 ] && grep -q \"unknown policy 'random'\" '$WORK/sim.err'"
"$REEL" sched simulate --trace "$WORK/none.csv" > "$WORK/sim.err" 2>&1
check "a missing trace exits 2" bash -c "[ $? -eq 2 ] && grep -q 'cannot read trace' '$WORK/sim.err'"

# reel ui's users are the registry's: with neither a registry nor --no-auth it says so and exits
# 3, and looking creates no registry.
mkdir -p "$WORK/ui-empty"
(cd "$WORK/ui-empty" && env -u REEL_REGISTRY_URI timeout 30 "$REEL" ui --port 0 > out.txt 2> err.txt); code=$?
check "reel ui without a registry or --no-auth exits 3" test "$code" -eq 3
check "and names both ways out" grep -q -- "--registry.*--no-auth" "$WORK/ui-empty/err.txt"
check "and creates nothing" test -z "$(ls -A "$WORK/ui-empty" | grep -v -e out.txt -e err.txt)"

# --help lists exactly the commands that exist (README and docs promise no others).
listed=$("$REEL" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF {print $1}' | tr '\n' ' ')
check "--help lists exactly storage smoke datagen ingest train eval serve predict features models registry pipeline scheduler jobs nodes sched ui" \
  test "$listed" = "storage smoke datagen ingest train eval serve predict features models registry pipeline scheduler jobs nodes sched ui "

# reel links no LibTorch (loading it costs a process 0.4 s) and hands LibTorch's commands to
# reel-torch beside it, which answers as reel would: its help, its errors, its exit codes.
needed() { objdump -p "$1" | awk '$1 == "NEEDED" {print $2}'; }
check "reel links no LibTorch" bash -c "! grep -Eq 'libtorch|libc10' <<< \"$(needed "$REEL")\""
check "reel-torch beside it does" grep -q libtorch_cpu <<< "$(needed "$(dirname "$REEL")/reel-torch")"
check "reel train --help is train's own" bash -c "'$REEL' train --help | grep -q -- '--resume'"
"$REEL" --log-level warn eval --config "$WORK/missing.yaml" > /dev/null 2> "$WORK/err"; code=$?
check "eval after a global option is handed over: exit 2" test "$code" -eq 2
check "with eval's message" grep -q "^reel eval: .*missing.yaml" "$WORK/err"
mkdir -p "$WORK/alone" && cp "$REEL" "$WORK/alone/reel"
"$WORK/alone/reel" train --config "$WORK/missing.yaml" 2> "$WORK/err"; code=$?
check "without reel-torch beside it, train exits 6" test "$code" -eq 6
check "naming the program it looked for" grep -q "^reel train: .*cannot start $WORK/alone/reel-torch" "$WORK/err"
check "and the other commands still run" "$WORK/alone/reel" storage ls "$WORK"

finish
