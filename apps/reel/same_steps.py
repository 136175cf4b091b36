"""Two training runs logged the same steps: every step from 1 to STEPS in both metrics.jsonl
files, with equal loss and sample count (a resumed run logs the steps after its checkpoint
again; the last line of a step counts). Used by the command-line tests.
usage: same_steps.py A B STEPS [SAMPLES_AT_LAST_STEP]"""
import json
import sys


def steps(path):
    out = {}
    for line in open(path):
        j = json.loads(line)
        if "event" not in j:
            out[j["step"]] = (j["loss"], j["samples"])
    return out


a, b = steps(sys.argv[1]), steps(sys.argv[2])
last = int(sys.argv[3])
assert sorted(a) == list(range(1, last + 1)), sorted(a)
assert a == b, [(s, a[s], b.get(s)) for s in a if a[s] != b.get(s)][:5]
assert a[1][0] != a[last][0], "the loss never changed"
if len(sys.argv) > 4:
    assert a[last][1] == int(sys.argv[4]), a[last]
