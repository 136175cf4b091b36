"""A training run (train.log_samples) read every clip of its dataset once per epoch, however often
it was stopped, resumed and resized: the run's samples-rank*.jsonl lines, the later attempt's
lines of a step replacing an earlier attempt's (a resumed run redoes the steps after its
checkpoint). Every epoch the run finished holds every clip; a clip repeats only as padding (fewer
than WORLD x BATCH_SIZE times per part of the epoch read at one world size). With --resized, some epoch must have
been read at two world sizes or more. Used by the command-line tests.
usage: each_clip_once.py RUN_DIR BATCH_SIZE [--resized]"""
import collections
import glob
import json
import sys

run_dir, batch_size = sys.argv[1], int(sys.argv[2])
resized = "--resized" in sys.argv[3:]

lines = []
for path in glob.glob(run_dir + "/samples-rank*.jsonl"):
    lines += [json.loads(text) for text in open(path)]
assert lines, "no samples-rank*.jsonl lines in " + run_dir
latest = collections.defaultdict(lambda: -2)
for j in lines:
    latest[j["step"]] = max(latest[j["step"]], j["resumed_from"])
kept = [j for j in lines if j["resumed_from"] == latest[j["step"]]]

keys = collections.defaultdict(collections.Counter)
worlds = collections.defaultdict(set)
segments = collections.Counter()  # parts of an epoch read at one world size
last_world = {}
for j in sorted(kept, key=lambda j: j["step"]):
    epoch = j["epoch"]
    keys[epoch].update(j["keys"])
    worlds[epoch].add(j["world_size"])
    if last_world.get(epoch) != j["world_size"]:
        segments[epoch] += 1
        last_world[epoch] = j["world_size"]
every = set().union(*keys.values())
finished = sorted(keys)[:-1]  # the last epoch may have been cut short by max_steps
assert finished, "the run did not finish an epoch: " + str(sorted(keys))
for epoch in finished:
    seen = keys[epoch]
    missing = every - set(seen)
    assert not missing, "epoch %d skipped %s" % (epoch, sorted(missing))
    repeats = sum(seen.values()) - len(seen)
    limit = segments[epoch] * max(worlds[epoch]) * batch_size
    assert repeats < limit, "epoch %d repeated %d clips (padding allows %d)" % (epoch, repeats, limit - 1)
if resized:
    assert any(len(worlds[e]) > 1 for e in finished), "no epoch was read at two world sizes: %s" % (
        {e: sorted(w) for e, w in worlds.items()})
print("%d epochs, each clip once: %s" % (len(finished), {e: sorted(worlds[e]) for e in finished}))
