#!/usr/bin/env bash
# Builds serve_bench and runs it as `reel serve` runs: OpenMP threads that sleep between batches
# (OMP_WAIT_POLICY=PASSIVE), LibTorch threads = cores; and against its peer, FastAPI + uvicorn +
# PyTorch (bench/fastapi_serve_peer.py) serving the same model:
#   1. serve_bench --write-model: the bench's R(2+1)D (random weights) as safetensors + config;
#   2. that model exported as TorchScript (torch.jit.script of the same layers, the same weights);
#   3. the peer serving the TorchScript, OMP_WAIT_POLICY=PASSIVE, the same thread count, 1 worker;
#   4. serve_bench serving the same TorchScript itself, driving both with the same requests.
# The peer is stopped (SIGTERM) when this script exits, however it exits.
#
# Arguments go to serve_bench (--seconds S per row, default 5 here; --threads N, which the peer
# gets too; --precision fp32|bf16|auto, which the peer gets too (torch.autocast); --rate R,...;
# --requests N; --concurrency ...; --video FILE; see serve_bench.cc).
# SERVE_BENCH=path/to/serve_bench runs that binary without the setup and the build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=/usr/bin/python3  # Debian's, with python3-torch
if [[ -z "${SERVE_BENCH:-}" ]]; then
  bash scripts/setup.sh
  bash scripts/install-packages.sh python3-torch python3-torchvision python3-fastapi \
    python3-uvicorn python3-av
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREEL_BUILD_BENCH=ON >/dev/null
  ninja -C build serve_bench
  SERVE_BENCH=./build/bench/serve_bench
fi
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

threads=$(nproc)
precision=fp32
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  [[ ${args[i]} == --threads ]] && threads=${args[i + 1]}
  [[ ${args[i]} == --precision ]] && precision=${args[i + 1]}
done
# --precision auto: the peer computes as Reel does on this CPU.
if [[ $precision == auto ]]; then
  precision=fp32
  grep -qw avx512_bf16 /proc/cpuinfo && precision=bf16
  grep -qw amx_bf16 /proc/cpuinfo && precision=bf16
fi

work=$(mktemp -d)
peer_pid=""
stop_peer() {
  if [[ -n $peer_pid ]] && kill -0 "$peer_pid" 2>/dev/null; then
    kill -TERM "$peer_pid" 2>/dev/null || true
    wait "$peer_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap stop_peer EXIT

"$SERVE_BENCH" --write-model "$work" >/dev/null

# The TorchScript: the bench model's layers as Reel builds them (src/models/video_resnet.cc, the
# parameter names of torchvision's R(2+1)D; the (3,1,1) temporal convolutions computed as a
# Conv2d over [B, C, T, H*W] as Reel does), loaded with the weights serve_bench wrote. (A file,
# not stdin: torch.jit.script reads the classes' source.)
cat >"$work/export.py" <<'EOF'
import json, struct, sys
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from torchvision.models.video.resnet import BasicBlock, Conv2Plus1D

class TemporalConv(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        self.weight = nn.Parameter(torch.empty(cout, cin, 3, 1, 1))

    def forward(self, x):
        b, c, t, h, w = x.shape
        y = F.conv2d(x.reshape(b, c, t, h * w), self.weight.squeeze(-1), None, (self.stride, 1), (1, 0))
        return y.view(b, y.shape[1], y.shape[2], h, w)

def temporal(in_planes, out_planes, midplanes, stride=1):
    block = Conv2Plus1D(in_planes, out_planes, midplanes, stride)
    block[3] = TemporalConv(midplanes, out_planes, stride)
    return block
temporal.get_downsample_stride = Conv2Plus1D.get_downsample_stride

class R2Plus1D(nn.Module):
    def __init__(self, width, layers, classes):
        super().__init__()
        mid = max(1, (45 * width + 32) // 64)
        self.stem = nn.Sequential(
            nn.Conv3d(3, mid, (1, 7, 7), (1, 2, 2), (0, 3, 3), bias=False), nn.BatchNorm3d(mid),
            nn.ReLU(inplace=True), TemporalConv(mid, width, 1), nn.BatchNorm3d(width),
            nn.ReLU(inplace=True))
        self.inplanes = width
        self.layer1 = self.layer(width, layers[0], 1)
        self.layer2 = self.layer(2 * width, layers[1], 2)
        self.layer3 = self.layer(4 * width, layers[2], 2)
        self.layer4 = self.layer(8 * width, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool3d(1)
        self.fc = nn.Linear(8 * width, classes)

    def layer(self, planes, blocks, stride):
        out = []
        for b in range(blocks):
            s = stride if b == 0 else 1
            down = None
            if s != 1 or self.inplanes != planes:
                down = nn.Sequential(nn.Conv3d(self.inplanes, planes, 1, s, bias=False),
                                     nn.BatchNorm3d(planes))
            out.append(BasicBlock(self.inplanes, planes, temporal, s, down))
            self.inplanes = planes
        return nn.Sequential(*out)

    def forward(self, x):
        x = self.layer4(self.layer3(self.layer2(self.layer1(self.stem(x)))))
        return self.fc(self.avgpool(x).flatten(1))

def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    kinds = {"F32": np.float32, "I64": np.int64}
    return {k: torch.from_numpy(np.frombuffer(blob[v["data_offsets"][0]:v["data_offsets"][1]],
                                              dtype=kinds[v["dtype"]]).reshape(v["shape"]).copy())
            for k, v in header.items() if k != "__metadata__"}

work = sys.argv[1]
model = R2Plus1D(16, [1, 1, 1, 1], 8)  # bench.yaml's model section
missing, unexpected = model.load_state_dict(read_safetensors(f"{work}/bench.safetensors"), strict=False)
missing = [k for k in missing if not k.endswith("num_batches_tracked")]
if missing or unexpected:
    sys.exit(f"the weights do not fit: missing {missing}, unexpected {unexpected}")
torch.jit.script(model.eval()).save(f"{work}/bench.pt")
EOF
"$PYTHON" "$work/export.py" "$work"

OMP_WAIT_POLICY=PASSIVE "$PYTHON" bench/fastapi_serve_peer.py "$work/bench.pt" --name bench \
  --port 0 --workers 1 --threads "$threads" --precision "$precision" >"$work/peer.out" 2>"$work/peer.err" &
peer_pid=$!
url=""
for _ in $(seq 600); do  # up to a minute: imports, the model, its warm-up
  url=$(sed -n 's/^listening on //p' "$work/peer.out" | head -n 1)
  [[ -n $url ]] && curl -fs --max-time 5 "$url/v2/health/ready" >/dev/null 2>&1 && break
  if ! kill -0 "$peer_pid" 2>/dev/null; then
    cat "$work/peer.err" >&2
    echo "run_serve_bench: the peer did not start" >&2
    exit 1
  fi
  sleep 0.1
done
[[ -n $url ]] || { echo "run_serve_bench: the peer gave no address" >&2; exit 1; }

"$SERVE_BENCH" --seconds 5 --model "$work/bench.pt" --peer-url "$url" --peer-model bench \
  --video testdata/videos/mmaction2_demo.mp4 "$@"
