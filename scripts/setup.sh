#!/usr/bin/env bash
# Installs what Reel needs on a fresh Debian 12 machine. Idempotent: packages already present are
# skipped, so a second run takes a second.
#   scripts/setup.sh          what building `reel` and running the main job needs (scripts/run.sh)
#   scripts/setup.sh --tests  that, plus what the tests need: GoogleTest, the Python peers of the
#                             parity tests, a single-host Ceph cluster and a Slurm cluster, node
#                             and tools/k8s-validate's npm packages (scripts/test.sh)
set -euo pipefail

RUN_PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config
  # base
  libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libxxhash-dev
  libssl-dev libzstd-dev
  # http (Boost.Beast and Boost.Asio, header-only)
  libboost-dev
  # serve: the KServe v2 request parser; curl is the main job's client of `reel serve`
  libsimdjson-dev curl
  # storage
  libcurl4-openssl-dev ca-certificates
  # metadata (the registry): SQLite embedded, libpq for a team's PostgreSQL
  libsqlite3-dev libpq-dev
  # media (ffmpeg's command line is not needed: Reel links the libraries)
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev
  # tensors, and Gloo headers for c10d's process groups
  libtorch-dev libopenblas0-pthread libgloo-dev
  # reel ui: the page's chart and graph-layout libraries come from npm (ui/package-lock.json)
  # and are built into the binary
  nodejs
)

TEST_PACKAGES=(
  # test frameworks, the reference decoder of the media tests, the scripts' checks
  libgtest-dev libgmock-dev ffmpeg git curl python3
  # parity tests export models from torchvision and run PyTorch DDP
  python3-numpy python3-torch python3-torchvision
  # ip(8) for the two-namespace test, pgrep(1) for the worker-recovery test
  iproute2 procps
  # a real S3 store for the tests: single-host Ceph with radosgw
  ceph-mon ceph-osd radosgw ceph-common
  # a real Slurm cluster for the tests: slurmctld and several slurmd on one host, private munged
  slurmctld slurmd slurm-client munge
  # a real PostgreSQL server for the metadata tests (started as a private instance per test)
  postgresql-15
  # formatting and lint checks
  clang-format clang-tidy
  # load for `reel serve`'s hot-reload test (no failed request while a version swaps)
  wrk
  # `reel serve --emit-k8s`'s objects checked against the Kubernetes API schema, offline
  # (tools/k8s-validate; npm is added below)
  nodejs
  # the Dockerfile's image built and run (podman with runc; the base image by debootstrap)
  podman runc debootstrap
  # reel ui's pages in a real browser (playwright-core drives Debian's Chromium)
  chromium
)

packages=("${RUN_PACKAGES[@]}")
tests=0
case "${1:-}" in
  --tests) packages+=("${TEST_PACKAGES[@]}"); tests=1 ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--tests]" >&2; exit 3 ;;
esac
# Debian's npm, unless the node installed brings its own (NodeSource's nodejs does, and conflicts
# with Debian's npm package).
if ! command -v npm > /dev/null; then
  packages+=(npm)
fi
# kubectl for `reel jobs submit --executor k8s` against recorded API responses: Debian's, unless
# one is installed already (Google Cloud SDK's, for one).
if ((tests)) && ! command -v kubectl > /dev/null; then
  packages+=(kubernetes-client)
fi

bash "$(dirname "$0")/install-packages.sh" "${packages[@]}"

# A folder's npm packages, exactly as its package-lock.json pins them; installed again only when
# the lock file has changed since (a stamp in node_modules holds its hash).
npm_ci() {
  local dir=$1
  local lock_hash stamp
  [[ -f "$dir/package-lock.json" ]] || return 0  # a copy of scripts/ alone (the Dockerfile's first step)
  lock_hash=$(sha256sum < "$dir/package-lock.json")
  stamp="$dir/node_modules/.reel-lock-sha256"
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$lock_hash" ]]; then
    echo "installing ${dir#"$root/"}'s npm packages (npm ci)"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error > /dev/null)
    echo "$lock_hash" > "$stamp"
  fi
}
root="$(cd "$(dirname "$0")/.." && pwd)"
npm_ci "$root/ui"  # uPlot and dagre, built into `reel ui`; playwright-core for its browser test
# (pinned to 1.61, the last release that runs on Debian 12's Node 18)
if ((tests)); then
  npm_ci "$root/tools/k8s-validate"
fi
echo "setup: all dependencies present"
