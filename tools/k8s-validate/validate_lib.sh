# The validator's verdicts, for tests that write Kubernetes objects. Needs VALIDATOR set to
# tools/k8s-validate/validate.mjs.
# validates NAME FILE OKS INVALIDS [PATTERN]: the validator's exit code (0 when INVALIDS is 0,
# else 1), its number of "ok" and "invalid:" lines, and PATTERN among the invalid lines.
validates() {
  local name=$1 file=$2 oks=$3 invalids=$4 pattern=${5:-} out rc want=0
  out=$(node "$VALIDATOR" "$file" 2>&1); rc=$?
  [ "$invalids" -gt 0 ] && want=1
  local got_ok got_invalid
  got_ok=$(grep -c '^ok ' <<<"$out")
  got_invalid=$(grep -c '^invalid: ' <<<"$out")
  if [ "$rc" -ne "$want" ] || [ "$got_ok" -ne "$oks" ] || [ "$got_invalid" -ne "$invalids" ] ||
     { [ -n "$pattern" ] && ! grep '^invalid: ' <<<"$out" | grep -q -- "$pattern"; }; then
    echo "     $name: exit $rc (want $want), $got_ok ok (want $oks), $got_invalid invalid (want $invalids${pattern:+, matching '$pattern'}):"
    sed 's/^/       /' <<<"$out"
    return 1
  fi
}

