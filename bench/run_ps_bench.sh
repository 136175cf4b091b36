#!/usr/bin/env bash
# Parameter servers against data-parallel all-reduce on the main job's task (configs/synthetic.yaml
# on `reel datagen` videos): 2 and 4 workers, each as DP (Reel's bucketed all-reduce over Gloo),
# PS BSP and PS SSP (staleness 2) with one server, all with the same budget (EPOCHS epochs: the
# same clips seen). Prints per run: the median step time, the bytes on the wire per step and
# worker (loopback's transmit counter over the run, so store traffic and HTTP headers count too),
# validation top-1 at the end and the wall time, with each PS figure's ratio to DP at the same
# worker count.
# Usage: bench/run_ps_bench.sh [EPOCHS]   (default 3); REEL picks the binary (default: a build).
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS=${1:-3}
if [ -z "${REEL:-}" ]; then
  bash scripts/setup.sh
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C build reel >/dev/null
  REEL=$PWD/build/apps/reel/reel
fi
source configs/synthetic-data.sh
WORK=${REEL_PS_BENCH_WORK:-$(mktemp -d)}
[ -n "${REEL_PS_BENCH_WORK:-}" ] || trap 'rm -rf "$WORK"' EXIT
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1);" \
  "LibTorch threads 1 per process, OMP_WAIT_POLICY=$OMP_WAIT_POLICY; budget $EPOCHS epochs"
"$REEL" datagen --out "$WORK/raw" "${SYNTHETIC_DATAGEN_ARGS[@]}" --seed 1 --quiet
"$REEL" ingest "$WORK/raw" "$WORK/ds" "${SYNTHETIC_INGEST_ARGS[@]}" > /dev/null
tx() { cat /sys/class/net/lo/statistics/tx_bytes; }
run() {  # run NAME WORKERS PARALLEL
  local name=$1 workers=$2 parallel=$3 before after start
  before=$(tx)
  start=$(date +%s%N)
  "$REEL" train --config configs/synthetic.yaml --nproc "$workers" --quiet --json \
    --set data.dataset="$WORK/ds" run_dir="$WORK/$name" train.epochs="$EPOCHS" \
    "parallel=$parallel" > "$WORK/$name.out" 2> "$WORK/$name.err" ||
    { tail -n 20 "$WORK/$name.err"; exit 1; }
  after=$(tx)
  echo "{\"name\": \"$name\", \"workers\": $workers, \"wire_bytes\": $((after - before)), \"wall_s\": $(( ($(date +%s%N) - start) / 1000000 )).0e-3}" \
    >> "$WORK/runs.jsonl"
}
for n in 2 4; do
  run "dp-$n" "$n" "{pipeline_stages: 1}"
  run "ps-bsp-$n" "$n" "{parameter_servers: 1}"
  run "ps-ssp-$n" "$n" "{parameter_servers: 1, sync: ssp, staleness: 2}"
done
python3 - "$WORK" <<'PY'
import json, statistics, sys
work = sys.argv[1]
runs = [json.loads(l) for l in open(f"{work}/runs.jsonl")]
batch = 4  # configs/synthetic.yaml data.batch_size, per worker
rows = {}
for r in runs:
    lines = [json.loads(l) for l in open(f"{work}/{r['name']}/metrics.jsonl")]
    steps = [m for m in lines if "clips_per_s" in m and m["clips_per_s"] > 0]
    step_s = statistics.median(batch * r["workers"] / m["clips_per_s"] for m in steps)
    total_steps = max(m["step"] for m in steps)
    top1 = json.load(open(f"{work}/{r['name']}/eval.json"))["top1"]
    rows[r["name"]] = dict(r, step_s=step_s, steps=total_steps, top1=top1,
                           wire=r["wire_bytes"] / total_steps / r["workers"],
                           wall_s=float(r["wall_s"]))
print(f"{'run':<12} {'workers':>7} {'step s':>8} {'x DP':>6} {'MB/step/worker':>15} {'x DP':>6}"
      f" {'top-1':>6} {'x DP':>6} {'wall s':>7}")
for name, r in rows.items():
    dp = rows[f"dp-{r['workers']}"]
    print(f"{name:<12} {r['workers']:>7} {r['step_s']:>8.3f} {r['step_s'] / dp['step_s']:>6.2f}"
          f" {r['wire'] / 1e6:>15.2f} {r['wire'] / dp['wire']:>6.2f} {r['top1']:>6.3f}"
          f" {r['top1'] / max(dp['top1'], 1e-9):>6.2f} {r['wall_s']:>7.1f}")
print("x DP: the ratio to data parallel with as many workers (step time and bytes: lower is better)")
PY
