#!/usr/bin/env bash
# Installs everything Reel needs on a fresh Debian 12 machine. Idempotent: packages already
# present are skipped, so a second run takes a second.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git curl ca-certificates
  # base
  libspdlog-dev libfmt-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libxxhash-dev
  libssl-dev libzstd-dev
  # storage
  libcurl4-openssl-dev
  # media
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev ffmpeg
  # tensors
  libtorch-dev libopenblas0-pthread
  # registry / sched / serve
  libsqlite3-dev libcpp-httplib-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev python3 python3-numpy
  # parity tests export models from torchvision
  python3-torch python3-torchvision
  # distributed training: Gloo headers for c10d, ip(8) for the two-namespace test, pgrep(1)
  # for the worker-recovery test
  libgloo-dev iproute2 procps
  # a real S3 store for the tests: single-host Ceph with radosgw
  ceph-mon ceph-osd radosgw ceph-common
  # a real Slurm cluster for the tests: slurmctld and several slurmd on one host, private munged
  slurmctld slurmd slurm-client munge
)

bash "$(dirname "$0")/install-packages.sh" "${PACKAGES[@]}"
echo "setup: all dependencies present"
