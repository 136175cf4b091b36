"""Two training runs logged the same steps: every step from 1 to STEPS in both metrics.jsonl
files, with equal loss and sample count (a resumed run logs the steps after its checkpoint
again; the last line of a step counts). With --rel-tol X, losses may differ by X relative (runs
that sum the same floats in another order). Used by the command-line tests.
usage: same_steps.py [--rel-tol X] A B STEPS [SAMPLES_AT_LAST_STEP]"""
import json
import sys


def steps(path):
    out = {}
    for line in open(path):
        j = json.loads(line)
        if "event" not in j:
            out[j["step"]] = (j["loss"], j["samples"])
    return out


def same(x, y, tolerance):
    return x[1] == y[1] and abs(x[0] - y[0]) <= tolerance * max(1.0, abs(x[0]))


args = sys.argv[1:]
tolerance = 0.0
if args[0] == "--rel-tol":
    tolerance = float(args[1])
    args = args[2:]
a, b = steps(args[0]), steps(args[1])
last = int(args[2])
assert sorted(a) == list(range(1, last + 1)), sorted(a)
assert sorted(b) == sorted(a), sorted(b)
differ = [(s, a[s], b[s]) for s in a if not same(a[s], b[s], tolerance)]
assert not differ, differ[:5]
assert a[1][0] != a[last][0], "the loss never changed"
if len(args) > 3:
    assert a[last][1] == int(args[3]), a[last]
