#!/usr/bin/env bash
# The container image (Dockerfile) built with podman from Debian's packages alone, and `reel`
# run in it. No container registry can be reached here, so the base image is made the way
# Docker's debian:bookworm-slim is: debootstrap --variant=minbase from deb.debian.org, imported
# into podman (kept for later runs as localhost/reel-test/debian:bookworm-slim). The build stage
# (Reel from source, 8 min on 2 cores) is replaced by the binary under test (--build-context
# build=...), so what this builds and checks is the runtime stage: that its packages are all the
# binary needs, and nothing else.
# Skipped (77) where podman, runc or debootstrap are missing or containers cannot run, saying why.
# Usage: image_test.sh PATH_TO_REEL SOURCE_DIR
set -u
REEL=$1
SRC=$2
source "$SRC/apps/reel/check_lib.sh"
skip() { echo "SKIP: $*"; exit 77; }
for tool in podman runc debootstrap; do
  command -v "$tool" > /dev/null || skip "no $tool (Debian: apt install podman runc debootstrap)"
done
[ "$(id -u)" -eq 0 ] || skip "root is needed for podman's default storage and debootstrap"

# This machine's containers: runc (crun cannot use a hybrid cgroup hierarchy) and rlimits no
# higher than podman may set here (it caps its own process count at 32768).
nproc=$(ulimit -Hu)
[ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
cat > "$WORK/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$WORK/containers.conf"
IMAGE=localhost/reel-test/reel:$$
trap 'podman rmi -f "$IMAGE" > /dev/null 2>&1; rm -rf "$WORK"' EXIT

BASE=localhost/reel-test/debian:bookworm-slim
if ! podman image exists "$BASE"; then
  echo "making $BASE with debootstrap"
  debootstrap --variant=minbase bookworm "$WORK/rootfs" http://deb.debian.org/debian > "$WORK/debootstrap.log" 2>&1 ||
    skip "debootstrap cannot reach deb.debian.org: $(tail -n 1 "$WORK/debootstrap.log")"
  rm -f "$WORK/rootfs/etc/apt/sources.list"
  cat > "$WORK/rootfs/etc/apt/sources.list.d/debian.sources" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
  tar -C "$WORK/rootfs" -c . | podman import --change 'CMD ["bash"]' - "$BASE" > /dev/null 2>&1 ||
    skip "podman cannot import an image here"
  rm -rf "$WORK/rootfs"
fi
podman run --rm "$BASE" true > "$WORK/run.log" 2>&1 || skip "containers cannot run here: $(tail -n 1 "$WORK/run.log")"

# The build stage's output, from the binary under test.
mkdir -p "$WORK/built/opt/reel/bin"
strip -o "$WORK/built/opt/reel/bin/reel" "$REEL"
strip -o "$WORK/built/opt/reel/bin/reel-torch" "$(dirname "$REEL")/reel-torch"
bash "$SRC/scripts/runtime-packages.sh" "$(dirname "$REEL")/reel-torch" > "$WORK/built/opt/reel/runtime-packages.txt"
start=$(date +%s)
if ! podman build --build-context build="$WORK/built" --build-arg DEBIAN="$BASE" --target runtime \
  -t "$IMAGE" -f "$SRC/Dockerfile" "$SRC" > "$WORK/build.log" 2>&1; then
  # The machine's fault (no way out of the build container to the mirror) is a skip; the
  # Dockerfile's (a package that does not exist, a bad step) is a failure.
  if grep -Eq "Temporary failure resolving|Could not resolve|Failed to fetch|Network is unreachable" "$WORK/build.log"; then
    skip "the build container cannot reach deb.debian.org: $(grep -Em1 'resolv|fetch|unreachable' "$WORK/build.log")"
  fi
  tail -n 20 "$WORK/build.log"
fi
check "the image builds (runtime stage)" podman image exists "$IMAGE"
echo "     | built in $(($(date +%s) - start)) s, $(podman image inspect "$IMAGE" --format '{{.Size}}' | awk '{printf "%.0f MiB", $1 / 1048576}')"
check "reel --version in it says what it says here" \
  bash -c "[ \"\$(podman run --rm '$IMAGE' reel --version)\" = \"\$('$REEL' --version)\" ]"
check "every library the binaries need is in the image" \
  bash -c "! podman run --rm '$IMAGE' sh -c 'ldd /usr/local/bin/reel /usr/local/bin/reel-torch' | grep 'not found'"
check "it runs as a user, not root" bash -c "[ \"\$(podman run --rm '$IMAGE' id -u)\" = 1000 ]"
check "a real command works in it: datagen writes and decodes videos" bash -c "podman run --rm '$IMAGE' sh -c \
  'reel datagen --out d --per-class 1 --classes 2 --width 32 --height 32 --min-frames 8 --max-frames 8 --quiet && ls d/*/*' | grep -c . | grep -qx 2"
check "and a LibTorch command is handed to reel-torch" \
  bash -c "podman run --rm '$IMAGE' reel train --help | grep -q -- --resume"
check "and no compiler or headers" bash -c "[ -z \"\$(podman run --rm '$IMAGE' sh -c 'command -v c++ gcc cmake; test -e /usr/include/torch && echo headers')\" ]"
finish
