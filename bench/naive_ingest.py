#!/usr/bin/python3
"""The preprocessing people write by hand, as the peer for bench/ingest_bench: cut each video
into fixed-length clips with the ffmpeg command line, then decode every clip with OpenCV (or
PyAV with --reader av), resize to the short side and dump every frame as a JPEG.

usage: naive_ingest.py OUT_DIR CLIP_SECONDS SHORT_SIDE JOBS READER VIDEO...
Prints one line: "<videos ok> <clips> <jpeg bytes>".
"""
import os
import subprocess
import sys
from multiprocessing import Pool


def resize_short_side(frame, short_side, cv2):
    h, w = frame.shape[:2]
    scale = short_side / min(h, w)
    return cv2.resize(frame, (max(1, round(w * scale)), max(1, round(h * scale))),
                      interpolation=cv2.INTER_LINEAR)


def process(job):
    video, out_dir, clip_seconds, short_side, reader = job
    import cv2
    name = os.path.splitext(os.path.basename(video))[0]
    seg_dir = os.path.join(out_dir, name)
    os.makedirs(seg_dir, exist_ok=True)
    # Segmenting: re-encode with a keyframe at every cut so that each segment is one clip.
    cmd = ["ffmpeg", "-v", "error", "-y", "-threads", "1", "-i", video, "-an", "-c:v", "libx264",
           "-preset", "veryfast", "-threads", "1",
           "-force_key_frames", f"expr:gte(t,n_forced*{clip_seconds})",
           "-f", "segment", "-segment_time", str(clip_seconds), "-reset_timestamps", "1",
           os.path.join(seg_dir, "seg%04d.mp4")]
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        return (0, 0, 0)
    clips = 0
    written = 0
    for seg in sorted(f for f in os.listdir(seg_dir) if f.endswith(".mp4")):
        path = os.path.join(seg_dir, seg)
        frames = []
        if reader == "av":
            import av
            try:
                with av.open(path) as container:
                    for frame in container.decode(video=0):
                        frames.append(frame.to_ndarray(format="bgr24"))
            except Exception:
                continue
        else:
            cap = cv2.VideoCapture(path)
            while True:
                ok, frame = cap.read()
                if not ok:
                    break
                frames.append(frame)
            cap.release()
        if not frames:
            continue
        clips += 1
        for i, frame in enumerate(frames):
            jpg = os.path.join(seg_dir, f"{seg[:-4]}_{i:04d}.jpg")
            cv2.imwrite(jpg, resize_short_side(frame, short_side, cv2))
            written += os.path.getsize(jpg)
    return (1, clips, written)


def main():
    out_dir, clip_seconds, short_side, jobs, reader = sys.argv[1:6]
    videos = sys.argv[6:]
    work = [(v, out_dir, float(clip_seconds), int(short_side), reader) for v in videos]
    with Pool(int(jobs)) as pool:
        results = pool.map(process, work, chunksize=1)
    print(sum(r[0] for r in results), sum(r[1] for r in results), sum(r[2] for r in results))


if __name__ == "__main__":
    main()
