# Reel's container image: Debian 12 with the `reel` binary (and `reel-torch`, which runs its
# LibTorch commands) and the runtime libraries they link, nothing else (no compiler, no headers). The Kubernetes objects Reel writes run it
# (`reel jobs submit --executor k8s --image ...`, `reel serve --emit-k8s`).
#
#   podman build -t registry.example.com/reel:0.1 .      (or docker build; 8 min on 2 cores)
#   podman run --rm registry.example.com/reel:0.1 reel --version
#
# The build stage installs what scripts/setup.sh installs and builds `reel` in Release; the
# runtime stage installs the packages whose libraries reel-torch links, a superset of reel's
# (scripts/runtime-packages.sh lists them in the build stage, so the list follows the binary).
ARG DEBIAN=docker.io/library/debian:bookworm-slim

FROM ${DEBIAN} AS build
COPY scripts/setup.sh scripts/install-packages.sh /src/scripts/
RUN bash /src/scripts/setup.sh && rm -rf /var/lib/apt/lists/*
COPY . /src
# Again with the sources there: ui/'s npm packages, which the binary's web console embeds.
RUN bash /src/scripts/setup.sh \
 && cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DREEL_BUILD_TESTS=OFF \
 && cmake --build /build --target reel \
 && install -D -s /build/apps/reel/reel /opt/reel/bin/reel \
 && install -D -s /build/apps/reel/reel-torch /opt/reel/bin/reel-torch \
 && bash /src/scripts/runtime-packages.sh /opt/reel/bin/reel-torch > /opt/reel/runtime-packages.txt

FROM ${DEBIAN} AS runtime
# The packages the binary links, plus the BLAS LibTorch is fast with and the CA bundle S3 needs.
COPY --from=build /opt/reel/runtime-packages.txt /tmp/
RUN apt-get update \
 && apt-get install -y --no-install-recommends $(cat /tmp/runtime-packages.txt) \
      libopenblas0-pthread ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
 && useradd --create-home --uid 1000 reel
COPY --from=build /opt/reel/bin/reel /opt/reel/bin/reel-torch /usr/local/bin/
USER reel
WORKDIR /home/reel
CMD ["reel", "--help"]
