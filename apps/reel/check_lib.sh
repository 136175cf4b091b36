# Shared by the `reel` command-line test scripts (sourced, not run): a scratch folder $WORK
# removed on exit, `check DESCRIPTION COMMAND...` (the command must succeed) and `finish`.
set -u
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
passes=0
failures=0
check() {
  local what=$1; shift
  if "$@"; then echo "ok   $what"; passes=$((passes + 1)); else echo "FAIL $what"; failures=$((failures + 1)); fi
}
finish() {
  echo "$passes passed, $failures failed"
  [ "$failures" -eq 0 ]
}
