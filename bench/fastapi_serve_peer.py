#!/usr/bin/python3
"""The peer of bench/serve_bench: a TorchScript video classifier served the way people write it
with FastAPI + uvicorn + PyTorch (Debian's python3-fastapi, python3-uvicorn, python3-torch), over
the KServe v2 REST protocol, so that serve_bench sends it the very bodies it sends `reel serve`.

  POST /v2/models/{name}/infer   one input (any name), as `reel serve` takes it:
        FP32 [B, C, T, H, W] (or [C, T, H, W]): normalised pixels, flat or nested JSON list;
        UINT8 of that shape: raw pixels, normalised here with the Kinetics mean and std;
        BYTES [B]: encoded video files, decoded with PyAV, cut into clips and normalised as
        `reel serve` does (src/serve/video.cc); the clips' logits are averaged per video.
        Tensors come as JSON "data" or with the binary tensor data extension (the
        Inference-Header-Content-Length header, "binary_data_size"), as Reel's codec writes them:
        a BYTES element in JSON is the string's UTF-8 bytes (no base64), and in binary data a
        4-byte little-endian length before its bytes. A video file is not UTF-8, so a KServe
        client (and serve_bench) sends it as binary data.
      Answer: JSON outputs "logits" and "probabilities", FP32 [B, classes] (only the requested
      ones when the request names "outputs").
  GET /v2/health/live, /v2/health/ready, /v2/models/{name}/ready, /v2 (server metadata, with
      the thread settings this process runs with).

The handler is an `async def` that reads the body, parses it (json.loads, list -> torch.tensor)
and runs the model on the event loop, as such apps usually are: one request computes at a time,
the intra-op threads (torch.set_num_threads) are the only parallelism, so the cores are never
oversubscribed; no batching across requests.

usage: fastapi_serve_peer.py MODEL.pt [--name bench] [--host 127.0.0.1] [--port 8000]
                             [--workers 1] [--threads N] [--frames 8] [--size 112] [--clips 4]
--port 0 takes a free port. The first line on stdout is always "listening on http://HOST:PORT".
SIGTERM (or SIGINT) stops it: uvicorn finishes the requests in flight, then it exits 0.
"""
import argparse
import io
import json
import math
import os
import signal
import socket
import struct
import sys

import av
import numpy as np
import torch
import uvicorn
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response

MEAN = np.array([0.43216, 0.394666, 0.37645], dtype=np.float32)  # Kinetics, as torchvision
STD = np.array([0.22803, 0.22145, 0.216989], dtype=np.float32)
DTYPES = {"FP32": np.float32, "UINT8": np.uint8}

args = None
model = None
app = FastAPI()


def bad(message):
    return HTTPException(status_code=400, detail=message)


# --- request decoding --------------------------------------------------------------------------

def bytes_elements(raw):
    """BYTES binary data: elements, each a 4-byte little-endian length and its bytes."""
    out, offset = [], 0
    while offset < len(raw):
        if len(raw) - offset < 4:
            raise bad("BYTES data ends inside a length")
        (n,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        if n > len(raw) - offset:
            raise bad("a BYTES element runs past the data")
        out.append(raw[offset:offset + n])
        offset += n
    return out


def parse_request(body, json_length):
    """The KServe v2 request: its JSON and the single input as (datatype, shape, values), where
    values is a list (JSON data) or bytes (binary data)."""
    length = len(body) if json_length is None else json_length
    if length > len(body):
        raise bad("Inference-Header-Content-Length is past the body")
    try:
        message = json.loads(body[:length])
    except ValueError as e:
        raise bad(f"malformed JSON: {e}")
    inputs = message.get("inputs") if isinstance(message, dict) else None
    if not inputs or len(inputs) != 1:
        raise bad("the request needs exactly one input")
    tensor = inputs[0]
    datatype, shape = tensor.get("datatype"), tensor.get("shape")
    if datatype not in ("FP32", "UINT8", "BYTES") or not isinstance(shape, list):
        raise bad("the input must be FP32, UINT8 or BYTES, with a shape")
    size = (tensor.get("parameters") or {}).get("binary_data_size")
    if size is not None:
        if length + size != len(body):
            raise bad("binary_data_size does not match the body")
        values = body[length:length + size]
    elif "data" in tensor:
        values = tensor["data"]
    else:
        raise bad("the input needs data or binary_data_size")
    return message, datatype, shape, values


def pixels_to_input(datatype, shape, values):
    """FP32 or UINT8 [B, C, T, H, W] (B optional) -> a float tensor of the model's input shape."""
    if isinstance(values, (bytes, bytearray)):
        x = torch.from_numpy(np.frombuffer(values, dtype=DTYPES[datatype]).copy())
    else:
        x = torch.tensor(values, dtype=torch.float32 if datatype == "FP32" else torch.uint8)
    sample = (3, args.frames, args.size, args.size)
    if len(shape) == 4:
        shape = [1] + shape
    if tuple(shape[1:]) != sample or x.numel() != math.prod(shape):
        raise bad(f"input shape {shape} is not [B, 3, {args.frames}, {args.size}, {args.size}]")
    x = x.reshape(shape)
    if datatype == "UINT8":
        mean = torch.from_numpy(MEAN).view(1, 3, 1, 1, 1)
        std = torch.from_numpy(STD).view(1, 3, 1, 1, 1)
        x = (x.float() / 255.0 - mean) / std
    return x


# --- video: the cut `reel serve` makes (src/ingest/clip_plan.cc, src/loader/clip_transform.cc) --

def short_side_size(width, height, short):
    """The frame size with the short side `short`, the long side truncated (torchvision's)."""
    if width <= height:
        return short, max(1, height * short // width)
    return max(1, width * short // height), short


def plan_clips(n, clip_frames, clips):
    """Start frames of the clips: back to back, `clips` of them spread evenly, first and last
    included; a video shorter than one clip gives one clip (its last frame repeated)."""
    starts = list(range(0, n - clip_frames + 1, clip_frames))
    if not starts:
        return [0]
    if len(starts) > clips:
        if clips == 1:
            starts = [starts[len(starts) // 2]]
        else:
            starts = [starts[int(math.floor(i * (len(starts) - 1) / (clips - 1) + 0.5))]
                      for i in range(clips)]
    return starts


def centre_crop_taps(origin, extent, limit, n):
    """Bilinear sampling of [origin, origin + extent) onto n pixels (align_corners = False)."""
    src = origin + (np.arange(n) + 0.5) * extent / n - 0.5
    src = np.clip(src, 0, limit - 1)
    i0 = np.floor(src).astype(np.int64)
    i1 = np.minimum(i0 + 1, limit - 1)
    return i0, i1, (src - i0).astype(np.float32)


def video_to_input(data):
    """An encoded video -> [clips, 3, T, S, S] normalised clips."""
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            stream = container.streams.video[0]
            frames = list(container.decode(stream))
    except (av.AVError, IndexError) as e:
        raise bad(f"not a video the server can decode: {e}")
    if not frames:
        raise bad("the video has no frames")
    t, s = args.frames, args.size
    width, height = frames[0].width, frames[0].height
    rw, rh = short_side_size(width, height, s)
    # A resize is bilinear; a same-size conversion bicubic (as Reel's decoder and ffmpeg do).
    interpolation = "BILINEAR" if (rw, rh) != (width, height) else "BICUBIC"
    # Resize the short side to s (already s: the crop box is the centre s x s square).
    scale = s / min(rw, rh)
    extent = s / scale
    ys = centre_crop_taps((rh - extent) / 2, extent, rh, s)
    xs = centre_crop_taps((rw - extent) / 2, extent, rw, s)
    clips = []
    for start in plan_clips(len(frames), t, args.clips):
        picked = [frames[min(start + k, len(frames) - 1)] for k in range(t)]
        rgb = np.stack([f.reformat(width=rw, height=rh, format="rgb24",
                                   interpolation=interpolation).to_ndarray() for f in picked])
        rgb = rgb.astype(np.float32)  # T H W 3
        top = rgb[:, ys[0]] + (rgb[:, ys[1]] - rgb[:, ys[0]]) * ys[2][None, :, None, None]
        img = top[:, :, xs[0]] + (top[:, :, xs[1]] - top[:, :, xs[0]]) * xs[2][None, None, :, None]
        img = (img / 255.0 - MEAN) / STD
        clips.append(torch.from_numpy(np.ascontiguousarray(img.transpose(3, 0, 1, 2))))
    return torch.stack(clips)


# --- routes ------------------------------------------------------------------------------------

def check_model(name):
    if name != args.name:
        raise HTTPException(status_code=404, detail=f"unknown model '{name}'")


@app.get("/v2/health/live")
def live():
    return Response(status_code=200)


@app.get("/v2/health/ready")
def ready():
    return Response(status_code=200 if model is not None else 503)


@app.get("/v2/models/{name}/ready")
def model_ready(name: str):
    check_model(name)
    return Response(status_code=200 if model is not None else 503)


@app.get("/v2")
def metadata():
    return {"name": "fastapi-uvicorn-pytorch", "version": torch.__version__, "extensions": [],
            "torch_threads": torch.get_num_threads(), "workers": args.workers,
            "precision": args.precision,
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "(unset)")}


@app.post("/v2/models/{name}/infer")
async def infer(name: str, request: Request):
    check_model(name)
    body = await request.body()
    header = request.headers.get("inference-header-content-length")
    if header is not None and not header.isdigit():
        raise bad("Inference-Header-Content-Length must be a byte count")
    message, datatype, shape, values = parse_request(body, None if header is None else int(header))
    with torch.inference_mode(), autocast():
        if datatype == "BYTES":
            videos = (bytes_elements(values) if isinstance(values, (bytes, bytearray))
                      else [v.encode("utf-8") for v in values])
            if not videos:
                raise bad("the input holds no video")
            logits = torch.stack([model(video_to_input(v)).mean(dim=0) for v in videos])
        else:
            logits = model(pixels_to_input(datatype, shape, values))
        logits = logits.float()
        probabilities = torch.softmax(logits, dim=1)
    wanted = {o.get("name") for o in message.get("outputs") or []} or {"logits", "probabilities"}
    outputs = [{"name": n, "datatype": "FP32", "shape": list(t.shape), "data": t.flatten().tolist()}
               for n, t in (("logits", logits), ("probabilities", probabilities)) if n in wanted]
    answer = {"model_name": name, "model_version": "1", "outputs": outputs}
    if "id" in message:
        answer["id"] = message["id"]
    return JSONResponse(answer)


# --- start-up ----------------------------------------------------------------------------------

def autocast():
    """bf16 autocast on the CPU with --precision bf16, as `reel serve --precision bf16` runs."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16")


def load_model():
    global model
    torch.set_num_threads(args.threads)
    model = torch.jit.load(args.model, map_location="cpu").eval()
    with torch.inference_mode(), autocast():  # warm up: kernels and the profiling executor's first runs
        for _ in range(3):
            model(torch.zeros(1, 3, args.frames, args.size, args.size))


def serve(sock):
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])  # handles SIGTERM: drains, then returns


def main():
    global args
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--name", default="bench")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--size", type=int, default=112)
    parser.add_argument("--clips", type=int, default=4)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(2048)
    address = f"listening on http://{args.host}:{sock.getsockname()[1]}"
    if args.workers <= 1:
        load_model()
        print(address, flush=True)
        serve(sock)
        return 0
    print(address, flush=True)
    # Several workers share the listening socket, each with its own model (uvicorn --workers).
    children = []
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:
            load_model()
            serve(sock)
            os._exit(0)
        children.append(pid)
    forward = lambda signum, _frame: [os.kill(pid, signum) for pid in children]  # noqa: E731
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    for pid in children:
        _, code = os.waitpid(pid, 0)
        status = status or os.waitstatus_to_exitcode(code)
    return status


if __name__ == "__main__":
    sys.exit(main())
