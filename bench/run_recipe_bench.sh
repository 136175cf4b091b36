#!/usr/bin/env bash
# The main job's recipe on several seeds: for each seed s, `reel datagen --seed s`, `reel ingest`
# and `reel train --nproc 2` with configs/synthetic.yaml and training seed s, as scripts/run.sh
# does. Prints, per seed, overall and per-class validation top-1 and the training time, then the
# worst figures against the goals (overall >= 0.95, every class >= 0.85).
# Usage: bench/run_recipe_bench.sh [SEEDS...]   (default: 1 2 3); REEL_RECIPE_WORK picks the
# scratch folder (default: a new temporary one, removed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=("$@")
[ ${#SEEDS[@]} -gt 0 ] || SEEDS=(1 2 3)
bash scripts/setup.sh
bash scripts/install-packages.sh python3  # the summary below
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build reel >/dev/null
REEL=$PWD/build/apps/reel/reel
source configs/synthetic-data.sh  # the main job's datagen and ingest flags
WORK=${REEL_RECIPE_WORK:-$(mktemp -d)}
[ -n "${REEL_RECIPE_WORK:-}" ] || trap 'rm -rf "$WORK"' EXIT
# Two worker processes of one LibTorch thread each (configs/synthetic.yaml): never more threads
# than this machine's cores.
echo "recipe: configs/synthetic.yaml, reel train --nproc 2, threads 1 per process," \
  "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}, $(nproc) cores"
for seed in "${SEEDS[@]}"; do
  dir=$WORK/seed-$seed
  mkdir -p "$dir"
  "$REEL" datagen --out "$dir/raw" "${SYNTHETIC_DATAGEN_ARGS[@]}" --seed "$seed" --quiet
  "$REEL" ingest "$dir/raw" "$dir/ds" "${SYNTHETIC_INGEST_ARGS[@]}" > /dev/null
  start=$(date +%s%N)
  "$REEL" train --config configs/synthetic.yaml --nproc 2 --quiet \
    --set data.dataset="$dir/ds" run_dir="$dir/run" seed="$seed" > "$dir/train.out" 2>&1 ||
    { tail -n 20 "$dir/train.out"; exit 1; }
  echo $(( $(date +%s%N) - start )) > "$dir/nanoseconds"
done
python3 - "$WORK" "${SEEDS[@]}" <<'EOF'
import json, sys
work, seeds = sys.argv[1], sys.argv[2:]
rows = []
for s in seeds:
    e = json.load(open(f"{work}/seed-{s}/run/eval.json"))
    secs = int(open(f"{work}/seed-{s}/nanoseconds").read()) / 1e9
    rows.append((s, e, secs))
names = rows[0][1]["class_names"]
print(f"{'seed':>4} {'top-1':>6} {'video':>6} {'train s':>8}  " + " ".join(n[:9].rjust(9) for n in names))
for s, e, secs in rows:
    print(f"{s:>4} {e['top1']:6.3f} {e['video_top1']:6.3f} {secs:8.1f}  " +
          " ".join(f"{p:9.3f}" for p in e["per_class"]))
worst_top1 = min(e["top1"] for _, e, _ in rows)
worst_class = min((p, names[i], s) for s, e, _ in rows for i, p in enumerate(e["per_class"]))
slowest = max(secs for _, _, secs in rows)
print(f"worst overall top-1 {worst_top1:.3f} (goal 0.95: ratio {worst_top1 / 0.95:.3f})")
print(f"worst class {worst_class[1]} {worst_class[0]:.3f} on seed {worst_class[2]} "
      f"(goal 0.85: ratio {worst_class[0] / 0.85:.3f})")
print(f"slowest training {slowest:.1f} s (goal: about 300 s, ratio {slowest / 300:.2f})")
EOF
