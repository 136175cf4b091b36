# How the main job's dataset is made: the `reel datagen` and `reel ingest` flags that go with
# configs/synthetic.yaml. Sourced by the main job's pipeline (examples/pipelines/main.yaml),
# apps/reel/learn_test.sh and bench/run_recipe_bench.sh, so the three make the same dataset.
#   80 videos per class: 60 train and 20 validation, so one missed video moves a class's
#   accuracy by 0.05 (with 40 per class, by 0.1).
#   Stored clips of 8 frames, every third frame (24 source frames: the shortest video's length),
#   a new clip every 12 frames. A slow small square turns a pixel or more between stored frames,
#   where with consecutive frames it moved a fraction of one.
SYNTHETIC_DATAGEN_ARGS=(--per-class 80)
SYNTHETIC_INGEST_ARGS=(--clip-frames 8 --frame-stride 3 --clip-stride 12 --short-side 112)
