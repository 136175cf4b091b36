#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds `reel`, and runs the main job on embedded defaults
# (local storage under ./reel-data, this machine only):
#   1. reel smoke    the storage layer: write, list, read back through the cache, verify
#   2. reel datagen  a synthetic 8-class action dataset as H.264 MP4s in UCF101 layout
#   3. reel ingest   those videos into a sharded dataset (tar shards, index, manifest)
#   4. reel train    a small R(2+1)D on that dataset (configs/synthetic.yaml), data parallel
#                    with 2 worker processes (REEL_NPROC), checkpointed, restarted from the
#                    latest checkpoint if a worker dies; a rerun resumes or, when finished,
#                    reports again
#   5. reel eval     the last checkpoint on the validation split: the per-class table and the
#                    confusion matrix, also written as JSON
#   6. reel models   registers the run in the embedded model registry ($DATA/registry) as
#                    models:/synthetic, points the `production` alias at it and prints its URI
#                    (a rerun of a finished job reuses the version it registered)
#   7. reel serve    serves models:/synthetic@production over KServe v2 HTTP on a free port,
#                    classifies a few validation videos through the API (curl), and stops it
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so a clone in another folder (CI's) reuses
# what an earlier build compiled.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
bash scripts/setup.sh
# Only what the main job needs: no tests or benchmarks (their packages come with setup.sh --tests).
# Release, in its own folder: without debug information `reel` builds in about 3 minutes instead
# of 4 on 2 cores, and scripts/test.sh's RelWithDebInfo build in build/ is left as it is.
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DREEL_BUILD_TESTS=OFF -DREEL_BUILD_BENCH=OFF >/dev/null
ninja -C build-release reel
REEL=./build-release/apps/reel/reel
DATA=${REEL_DATA:-./reel-data}
$REEL smoke --store "$DATA/smoke" --cache-dir "$DATA/cache"
source configs/synthetic-data.sh  # the datagen and ingest flags the recipe was tuned with
[ -f "$DATA/raw/testlist01.txt" ] || $REEL datagen --out "$DATA/raw" "${SYNTHETIC_DATAGEN_ARGS[@]}"
$REEL ingest "$DATA/raw" "$DATA/datasets/synthetic" "${SYNTHETIC_INGEST_ARGS[@]}"
echo "dataset: $DATA/datasets/synthetic/manifest.json"
SET=(--set "data.dataset=$DATA/datasets/synthetic" "run_dir=$DATA/runs/synthetic")
$REEL train --config configs/synthetic.yaml --nproc "${REEL_NPROC:-2}" --max-restarts 2 --resume "${SET[@]}"
# The validation report again, from the last checkpoint as a later `reel eval` sees it:
# per-class accuracy and the confusion matrix, also in eval-last.json.
$REEL eval --config configs/synthetic.yaml "${SET[@]}" --out "$DATA/runs/synthetic/eval-last.json"
echo "report: $DATA/runs/synthetic/eval-last.json"
export REEL_REGISTRY_URI="$DATA/registry"
$REEL models register synthetic "$DATA/runs/synthetic" --skip-unchanged --alias production \
  -m "the main job: configs/synthetic.yaml on reel datagen videos"
echo "model: models:/synthetic@production (reel models show models:/synthetic@production)"
# 7. reel serve: the registered model over KServe v2 HTTP, a few validation videos classified
#    through the API by path, then the server stopped.
bash scripts/serve_demo.sh "$REEL" "$DATA/raw" models:/synthetic@production
