#!/usr/bin/env bash
# `reel pipeline` end to end with real processes: outputs passed from task to task, a failure
# reported with its log and exit code, a retry of only what failed, cached steps on the next run,
# ls/status/logs, and bad pipeline files refused with the README's exit codes.
# Usage: pipeline_cli_test.sh REEL
set -euo pipefail
REEL=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
export REEL_PIPELINE_STATE=$T/state
fail() { echo "FAIL: $*" >&2; for f in out.txt err.txt; do [ -f $f ] && sed 's/^/  /' $f >&2; done; exit 1; }
expect_rc() {  # expect_rc CODE COMMAND...: runs it with output in out.txt and err.txt
  local want=$1; shift
  set +e; "$@" > out.txt 2> err.txt; local rc=$?; set -e
  [ "$rc" = "$want" ] || fail "$* exited $rc, expected $want"
}

cat > p.yaml <<'EOF'
name: demo
inputs: {word: hello}
tasks:
  - name: write
    command: [sh, -c, 'echo "$1" > "$2"', sh, "{{inputs.word}}", "{{outputs.text}}"]
  - name: shout
    command: [sh, -c, 'test -f allow || { echo "not allowed" >&2; exit 7; }; tr a-z A-Z < "$1" > "$2"',
              sh, "{{tasks.write.outputs.text}}", "{{outputs.loud}}"]
  - name: after
    depends_on: [shout]
    command: [sh, -c, 'cat "$1" >> result.txt', sh, "{{tasks.shout.outputs.loud}}"]
    cache: false
EOF

echo "1. a failing task: exit 1, its name, its log and its output; what follows is skipped"
expect_rc 1 "$REEL" pipeline run p.yaml
grep -q "run demo-1 failed: task 'shout' exit 7 after 1 attempt; its log: $T/state/logs/demo-1/shout.log" err.txt ||
  fail "no line naming the failed task"
grep -q "| not allowed" err.txt || fail "the log's tail is not shown"
grep -q "reel pipeline retry demo-1" err.txt || fail "no hint to retry"
grep -Eq "after +skipped +upstream task shout failed" out.txt || fail "after was not skipped"
[ ! -f result.txt ] || fail "after ran"

echo "2. retry: only shout and after run again"
touch allow
expect_rc 0 "$REEL" pipeline retry demo-1
! grep -Eq "^\[.*\] write " out.txt || fail "write ran again"
grep -Eq "shout +succeeded" out.txt || fail "shout did not run"
[ "$(cat result.txt)" = HELLO ] || fail "result: $(cat result.txt)"
expect_rc 0 "$REEL" pipeline status demo-1 --json
python3 - out.txt <<'EOF' || fail "status --json"
import json, sys
run = json.load(open(sys.argv[1]))
assert run["state"] == "succeeded", run
states = {t["name"]: (t["state"], t["attempts"]) for t in run["tasks"]}
assert states == {"write": ("succeeded", 1), "shout": ("succeeded", 1), "after": ("succeeded", 1)}, states
EOF
expect_rc 6 "$REEL" pipeline retry demo-1
grep -q "run demo-1 is succeeded: only a failed or interrupted run is retried" err.txt || fail "retry of a success"

echo "3. a second run reuses write and shout; after (cache: false) runs"
expect_rc 0 "$REEL" pipeline run p.yaml
grep -Eq "write +cached +reused from demo-1" out.txt || fail "write was not cached"
grep -Eq "shout +cached +reused from demo-1" out.txt || fail "shout was not cached"
grep -q "run demo-2 succeeded .* 1 succeeded, 2 cached, 0 failed, 0 skipped" out.txt || fail "summary"
[ "$(cat result.txt)" = $'HELLO\nHELLO' ] || fail "after did not run again"

echo "4. another input is another step; --no-cache runs everything"
expect_rc 0 "$REEL" pipeline run p.yaml --input word=bye
grep -Eq "write +succeeded" out.txt || fail "write was cached across inputs"
[ "$(tail -n 1 result.txt)" = BYE ] || fail "result: $(tail -n 1 result.txt)"
expect_rc 0 "$REEL" pipeline run p.yaml --no-cache
! grep -Eq "^\[.*\] [a-z]+ +cached" out.txt || fail "--no-cache reused a step"

echo "5. ls, status and logs"
expect_rc 0 "$REEL" pipeline ls
[ "$(awk 'NR > 1 {print $1}' out.txt | tr '\n' ' ')" = "demo-4 demo-3 demo-2 demo-1 " ] || fail "ls order"
expect_rc 0 "$REEL" pipeline status demo-2
grep -Eq "^write +cached .*reused from demo-1; text=$T/state/artifacts/demo-1/write/text" out.txt ||
  fail "status of a cached task"
expect_rc 0 "$REEL" pipeline logs demo-1 shout
grep -q "not allowed" out.txt || fail "logs"
grep -q "attempt 1 ===" out.txt || fail "attempt header"
expect_rc 0 "$REEL" pipeline logs latest write
grep -q "attempt 1 ===" out.txt || fail "logs of the latest run's cached task show the run it reused"
expect_rc 2 "$REEL" pipeline logs demo-1 nope
grep -q "run demo-1 has no task 'nope'" err.txt || fail "logs of an unknown task"
expect_rc 2 "$REEL" pipeline status demo-9
grep -q "no pipeline run 'demo-9'" err.txt || fail "status of an unknown run"

echo "6. bad files change nothing and say what is wrong"
before=$(ls state/logs | wc -l)
cat > cycle.yaml <<'EOF'
name: c
tasks:
  - {name: a, command: [true], depends_on: [c]}
  - {name: b, command: [true], depends_on: [a]}
  - {name: c, command: [true], depends_on: [b]}
EOF
expect_rc 3 "$REEL" pipeline run cycle.yaml
grep -q "the pipeline's dependencies form a cycle: a -> c -> b -> a" err.txt || fail "cycle"
printf 'name: u\ntasks:\n  - name: a\n    command: [true]\n    depends_on: [ghost]\n' > unknown.yaml
expect_rc 3 "$REEL" pipeline run unknown.yaml
grep -q "unknown.yaml:3:5: key 'tasks\[0\]': depends_on names an unknown task 'ghost'" err.txt ||
  fail "unknown dependency"
printf 'name: r\ntasks:\n  - {name: a, command: [true], resources: {cpu: 4096}}\n' > big.yaml
expect_rc 3 "$REEL" pipeline run big.yaml
grep -q "task 'a' asks for cpu 4096 but at most" err.txt || fail "too big"
expect_rc 2 "$REEL" pipeline run missing.yaml
grep -q "missing.yaml" err.txt || fail "missing file"
expect_rc 3 "$REEL" pipeline run p.yaml --input word
grep -q "expected KEY=VALUE" err.txt || fail "bad --input"
[ "$(ls state/logs | wc -l)" = "$before" ] || fail "a refused file started a run"
echo "pipeline CLI: all good"
