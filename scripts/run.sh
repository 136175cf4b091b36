#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds `reel`, and runs the main job on embedded defaults
# (local storage under ./reel-data, this machine only) as a pipeline,
# examples/pipelines/main.yaml, with `reel pipeline run`: each step runs once its inputs are
# there and the machine has the CPUs and memory it asks for, and a rerun reuses every step whose
# command, config and inputs are unchanged (the step cache):
#   smoke        the storage layer: write, list, read back through the cache, verify
#   datagen      a synthetic 8-class action dataset as H.264 MP4s in UCF101 layout
#   ingest       those videos into a sharded dataset (tar shards, index, manifest)
#   train        a small R(2+1)D on that dataset (configs/synthetic.yaml), data parallel with 2
#                worker processes (REEL_NPROC), checkpointed, restarted from the latest checkpoint
#                if a worker dies
#   eval         the last checkpoint on the validation split: per-class table, confusion matrix,
#                also written as JSON
#   register     the run into the embedded model registry ($DATA/registry) as models:/synthetic
#                with the `production` alias (an unchanged model is not registered twice)
#   serve_check  reel serve on models:/synthetic@production over KServe v2 HTTP on a free port,
#                a few validation videos classified through the API (curl), the server stopped
# Runs, their logs and outputs are kept in $DATA/pipelines (reel pipeline ls|status|logs).
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
$REEL pipeline --state "$DATA/pipelines" run examples/pipelines/main.yaml \
  --input "data=$DATA" --input "nproc=${REEL_NPROC:-2}"
# The validation report (per class, confusion matrix) and the served answers, from the steps' logs.
$REEL pipeline --state "$DATA/pipelines" logs latest eval | grep -v -e '^{"ts"' -e '^===' || true
$REEL pipeline --state "$DATA/pipelines" logs latest serve_check | grep -v '^===' || true
echo "model: models:/synthetic@production (REEL_REGISTRY_URI=$DATA/registry reel models show models:/synthetic@production)"
echo "to look at the run, the dataset, the model and the pipeline in a browser:"
echo "  $REEL ui --no-auth --runs $DATA --registry $DATA/registry --pipelines $DATA/pipelines   (then open the address it prints)"
