#!/usr/bin/env bash
# The `unit` label built in Debug with AddressSanitizer + UndefinedBehaviorSanitizer, and the
# concurrency tests (thread pool and sync points, caching store, loader, process groups and
# reducer, the HTTP layer, the registry's parallel pulls, its server and garbage collector, the
# inference batcher and service) with
# ThreadSanitizer, each in its own build folder. CI runs it after scripts/test.sh.
# Usage: scripts/test-sanitizers.sh [address|thread|all (default)] [CTEST_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
# ccache keys on paths relative to the checkout, so a clone in another folder (CI's) reuses
# what an earlier build compiled.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
which=${1:-all}
case "$which" in address | thread | all) shift || true ;; *) which=all ;; esac
bash scripts/setup.sh --tests

configure() {  # configure DIR SANITIZER
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DREEL_SANITIZE="$2" -DREEL_BUILD_TESTS=ON \
    -DREEL_BUILD_BENCH=OFF -DREEL_HEADER_CHECK=OFF > /dev/null
}

# LibTorch, Gloo and FFmpeg are not instrumented: ASan's leak check would report their caches at
# exit, so leaks are checked by media_asan_test on Reel's own FFmpeg handles instead.
# What the unit label runs: its test binaries, `reel` (the command-line tests) and
# k8s_emit_tool (the Kubernetes schema test), not the examples or the binaries of integration
# tests, which this build never runs.
unit_targets() {  # unit_targets DIR
  local name
  echo reel
  echo k8s_emit_tool
  for name in $(cd "$1" && ctest -N -L unit | sed -n 's/^ *Test *#[0-9]*: //p'); do
    ninja -C "$1" -t query "$name" > /dev/null 2>&1 && echo "$name"
  done
}

if [[ "$which" != thread ]]; then
  configure build-asan address
  mapfile -t targets < <(unit_targets build-asan)
  ninja -C build-asan "${targets[@]}"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest -L unit --output-on-failure --timeout 900 --parallel "$(nproc)" "$@")
fi
[[ "$which" == address ]] && exit 0

TSAN_TESTS=(base_test storage_unit_test loader_test parallel_torch_test http_test registry_test serve_test sched_test
            console_test)
configure build-tsan thread
ninja -C build-tsan "${TSAN_TESTS[@]}"
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/../scripts/tsan.supp" \
  ctest -R "^($(IFS='|'; echo "${TSAN_TESTS[*]}"))\$" --output-on-failure --timeout 900 \
  --parallel "$(nproc)" "$@")
