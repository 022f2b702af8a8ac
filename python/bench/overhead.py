"""Python call overhead of cluda's finder: `ClusterFinder.find` on the same frames through
Python and through the Rust library (the `cluda find` CLI's data-phase time, which counts the
finding alone), interleaved, best of several passes; and, within each Python call, its wall
time against the time the Rust finder spent in it (`ClusterFinder.last_find_seconds`).

    python bench/overhead.py [--device cpu|gpu|auto] [--frames 200] [--repeat 5]

Prints one line per side and the overhead ratio (goal: under 5%).

This measures the wrapper around one Rust call, not what a user waits for: the `in-call` line
compares the call with the time spent in Rust inside it (which includes writing the result
rows). `user_path.py` beside this file measures the whole wait (`find_iter` over a file,
`find_file`, `find` on memory) against `cluda find --out` on the same file.
"""

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

import cluda

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="auto, cpu or gpu (default cpu)")
    ap.add_argument("--frames", type=int, default=200, help="data frames per pass")
    ap.add_argument("--pedestal-frames", type=int, default=100)
    ap.add_argument("--shape", type=int, nargs=2, default=(400, 400))
    ap.add_argument("--cluster-size", type=int, default=3)
    ap.add_argument("--threads", type=int, help="CPU worker threads (default every core)")
    ap.add_argument("--repeat", type=int, default=5, help="passes per side (best is kept)")
    ap.add_argument("--cli", default=os.environ.get("CLUDA_BIN", ROOT / "target/release/cluda"),
                    help="the cluda binary (default target/release/cluda)")
    args = ap.parse_args()

    shape = tuple(args.shape)
    ped = cluda.generate(args.pedestal_frames, 0, False, shape=shape)
    data = cluda.generate(args.frames, args.pedestal_frames, True, shape=shape)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cluda-bench-"))
    np.save(tmp / "p.npy", ped)
    np.save(tmp / "d.npy", data)
    cmd = [str(args.cli), "find", "--pedestal", str(tmp / "p.npy"), "--data", str(tmp / "d.npy"),
           "--device", args.device, "--cluster", str(args.cluster_size)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]

    py_times, inner_times, rust_times, n_py, n_rust = [], [], [], None, None
    for _ in range(args.repeat):
        finder = cluda.ClusterFinder(shape, cluster_size=args.cluster_size, device=args.device,
                                     pedestal_frames=len(ped), threads=args.threads)
        finder.push_pedestal(ped)
        finder.find(data[:2])  # warm-up: first-call allocations, GPU start-up
        finder = cluda.ClusterFinder(shape, cluster_size=args.cluster_size, device=args.device,
                                     pedestal_frames=len(ped), threads=args.threads)
        finder.push_pedestal(ped)
        t0 = time.perf_counter()
        clusters = finder.find(data)
        py_times.append(time.perf_counter() - t0)
        inner_times.append(finder.last_find_seconds)
        n_py = len(clusters)

        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        line = out.strip().splitlines()[-1]
        rust_times.append(float(re.search(r"seconds=([0-9.e+-]+)", line).group(1)))
        n_rust = int(re.search(r"clusters=(\d+)", line).group(1))

    assert n_py == n_rust, f"python found {n_py} clusters, the CLI {n_rust}"
    py, rust = min(py_times), min(rust_times)
    us = lambda s: 1e6 * s / args.frames
    print(f"frames={args.frames} shape={shape[0]}x{shape[1]} cluster={args.cluster_size} "
          f"device={finder.device} clusters={n_py}")
    print(f"python find: {us(py):9.2f} us/frame (best of {args.repeat}; all: "
          + " ".join(f"{us(t):.1f}" for t in py_times) + ")")
    print(f"rust (cli) : {us(rust):9.2f} us/frame (best of {args.repeat}; all: "
          + " ".join(f"{us(t):.1f}" for t in rust_times) + ")")
    print(f"overhead   : {100 * (py / rust - 1):+.2f}%  (python/rust = {py / rust:.4f}; separate "
          "processes, so sensitive to machine load)")
    # The same call seen from inside: wall time of the Python call against the time the Rust
    # finder spent in it, pass by pass (immune to load differences between passes).
    ratios = [p / i for p, i in zip(py_times, inner_times)]
    print(f"in-call    : {100 * (min(ratios) - 1):+.3f}% best, {100 * (np.median(ratios) - 1):+.3f}% "
          f"median  (Python call wall time over the Rust finder's time in it)")


if __name__ == "__main__":
    sys.exit(main())
