#!/usr/bin/env bash
# Runs every benchmark, each writing its figures with --json, into bench/results/<UTC time>/
# (kept: compare two runs with `bench/run_all.sh --compare OLD NEW`), then prints one table of all
# figures with their ratios to the limit and the peer. A benchmark that fails is reported and the
# rest still run; the exit code is 1 if any failed.
#
#   bench/run_all.sh [--only NAME[,NAME...]]      NAME: loader ingest storage train ddp parallel
#                                                  parallel_scaling sched serve registry amp
#   bench/run_all.sh --compare OLD_DIR NEW_DIR    figures of two runs side by side
set -euo pipefail
cd "$(dirname "$0")/.."

summarise() {  # summarise DIR...: every figure of every JSON file, one line each
  python3 - "$@" <<'PY'
import json, os, sys
dirs = sys.argv[1:]
runs = []
for d in dirs:
    figures = {}
    for name in sorted(os.listdir(d)):
        if not name.endswith(".json"):
            continue
        for r in json.load(open(os.path.join(d, name))):
            if "name" in r:
                figures[(name[:-5], r["name"])] = r
    runs.append(figures)
keys = sorted(set().union(*runs), key=lambda k: (k[0], list(runs[-1]).index(k) if k in runs[-1] else 0))
def cell(r):
    if r is None:
        return f"{'-':>42}"
    ratio = lambda x: "-" if x is None else f"{x:.3g}x"
    return f"{r['value']:>12.4g} {r['unit']:<12} {ratio(r['limit_ratio']):>7} {ratio(r['peer_ratio']):>7}"
print(f"{'bench':<16} {'figure':<58}" + "".join(f" {'value unit /limit /peer (' + os.path.basename(d) + ')':>42}" for d in dirs))
for k in keys:
    print(f"{k[0]:<16} {k[1][:58]:<58}" + "".join(" " + cell(run.get(k)) for run in runs))
PY
}

if [[ ${1:-} == --compare ]]; then
  [[ $# -eq 3 && -d $2 && -d $3 ]] || { echo "usage: bench/run_all.sh --compare OLD_DIR NEW_DIR" >&2; exit 2; }
  summarise "$2" "$3"
  exit 0
fi
only=""
if [[ ${1:-} == --only ]]; then
  [[ $# -eq 2 ]] || { echo "usage: bench/run_all.sh [--only NAME,...]" >&2; exit 2; }
  only=",$2,"
fi

bash scripts/setup.sh
bash scripts/install-packages.sh python3-torch python3-torchvision python3-av python3-opencv \
  python3-fastapi python3-uvicorn git git-lfs borgbackup casync openssl
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREEL_BUILD_BENCH=ON >/dev/null
ninja -C build reel loader_bench ingest_bench storage_bench train_bench ddp_bench parallel_bench \
  sched_bench serve_bench registry_bench amp_bench
export REEL_SOURCE_DIR=$PWD OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
out=bench/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
failed=()

run() {  # run NAME COMMAND...: the command's output in NAME.txt, its figures in NAME.json
  local name=$1
  shift
  [[ -z $only || $only == *",$name,"* ]] || return 0
  echo "== $name: $*" | tee "$out/$name.txt"
  local start=$SECONDS
  if "$@" --json "$PWD/$out/$name.json" >> "$out/$name.txt" 2>&1; then
    echo "   done in $((SECONDS - start)) s"
  else
    echo "   FAILED after $((SECONDS - start)) s: see $out/$name.txt"
    failed+=("$name")
  fi
}

run loader ./build/bench/loader_bench
run ingest ./build/bench/ingest_bench
run storage bash bench/run_storage_bench.sh
run train ./build/bench/train_bench
run ddp ./build/bench/ddp_bench
run parallel ./build/bench/parallel_bench
run parallel_scaling ./build/bench/parallel_bench --scaling 1
run sched ./build/bench/sched_bench
run serve bash bench/run_serve_bench.sh
run registry bash bench/run_registry_bench.sh
run amp ./build/bench/amp_bench

summarise "$out" | tee "$out/summary.txt"
echo "results: $out"
if ((${#failed[@]} > 0)); then
  echo "failed: ${failed[*]}"
  exit 1
fi
