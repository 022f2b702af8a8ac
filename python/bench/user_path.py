"""What a Python user waits for: `find_iter` over a `.npy` file (every cluster kept), `find_file`
on it, and `find` on frames already in memory, against `cluda find --out` on the same file in
the same run, as a Markdown table (and a CSV).

    python3 python/bench/user_path.py --cli PATH/TO/cluda --tmpfs /dev/shm/cluda-bench \\
        [--frames 20000] [--pedestal-frames 1000] [--sizes 3,9] [--device gpu] [--repeat 2] \\
        [--chunk 1000] [--md out.md] [--csv out.csv]

Needs only python3, numpy, the installed `cluda` wheel and the `cluda` binary. The frames are
written by `cluda gen` into the tmpfs directory (so the file is in memory, as a page-cached
file is), and `cluda find --out` writes its cluster file there too.

Rows (per cluster size; `us/frame` is the best of `--repeat` runs):
* `cluda find --out tmpfs`: the command's data phase (its summary's `seconds`: from the first
  frame read to the cluster file committed; start-up and the pedestal are not counted) and its
  whole wall time;
* `find_iter(np.load(path, mmap_mode="r"), chunk)`: from the call to the last chunk, the
  chunks kept in a list (the memory map is read from its file); `find_iter(np.asarray(map))`:
  the same frames read as memory; `find_file(path)`: one array;
* `find(frames in memory)`: one call on every frame (a plain numpy array), through the engine
  (the default on a GPU) and `via="direct"` (one `find_each` on the array: what the Rust
  library's `GpuFinder::find_each` on a pageable `Vec` does), each with the clusters kept
  and with them only counted (`keep=False`: the library bench's counting visitor);
* the whole Python run of `find_iter` (finder made, pedestal pushed, every chunk) against the
  command's wall time.
Each Python finder is made and given its pedestal before the clock starts (a GPU finder
allocates its frame ring when it is made, as the command does during its start-up). Every
path's cluster count is checked against the command's; with `--verify` (default) the
`find_iter` result is compared row for row with the command's cluster file.
"""

from __future__ import annotations

import argparse
import csv
import gc
import os
import pathlib
import re
import subprocess
import sys
import time

import numpy as np

import cluda


def cli_find(cli, ped, data, size, device, out):
    """One `cluda find --out`: (data-phase seconds, wall seconds, clusters)."""
    cmd = [cli, "find", "--pedestal", ped, "--data", data, "--device", device, "--cluster",
           str(size), "--out", out, "--overwrite"]
    t = time.perf_counter()
    res = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    line = res.stdout.strip().splitlines()[-1]
    seconds = float(re.search(r"seconds=([0-9.e+-]+)", line).group(1))
    clusters = int(re.search(r"clusters=(\d+)", line).group(1))
    return seconds, wall, clusters


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", required=True, help="the cluda binary")
    ap.add_argument("--tmpfs", required=True, type=pathlib.Path,
                    help="a directory on a tmpfs (e.g. /dev/shm/cluda-bench): input and output files")
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--pedestal-frames", type=int, default=1000)
    ap.add_argument("--sizes", default="3,9")
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=1000, help="find_iter's chunk")
    ap.add_argument("--memory-frames", type=int, default=None,
                    help="frames for the in-memory find rows (default --frames)")
    ap.add_argument("--no-verify", dest="verify", action="store_false")
    ap.add_argument("--md", type=pathlib.Path, help="also write the Markdown table here")
    ap.add_argument("--csv", type=pathlib.Path, help="also write the rows as CSV here")
    args = ap.parse_args()

    tmp = args.tmpfs
    tmp.mkdir(parents=True, exist_ok=True)
    ped_path, data_path = tmp / "pedestal.npy", tmp / "data.npy"
    if not (data_path.exists() and np.load(data_path, mmap_mode="r").shape[0] == args.frames):
        subprocess.run([args.cli, "gen", "--out", str(tmp), "--frames", str(args.frames),
                        "--pedestal-frames", str(args.pedestal_frames), "--rows", "400",
                        "--cols", "400", "--seed", "1", "--overwrite"], check=True,
                       capture_output=True)
    ped = np.load(ped_path)
    n = args.frames
    mem_n = args.memory_frames or n
    in_memory = np.array(np.load(data_path, mmap_mode="r")[:mem_n])  # a plain array
    out = tmp / "cli.clust"
    rows = []

    def finder(size):
        f = cluda.ClusterFinder((400, 400), cluster_size=size, device=args.device,
                                pedestal_frames=len(ped))
        f.push_pedestal(ped)
        return f

    def best(run, repeat=args.repeat):
        """The best of `repeat` runs of `run() -> (seconds, clusters, extra)`."""
        results = []
        for _ in range(repeat):
            gc.collect()
            results.append(run())
        return min(results, key=lambda r: r[0])

    for size in map(int, args.sizes.split(",")):
        print(f"== {size}x{size}, {n} frames, device {args.device}", flush=True)
        c_sec, c_wall, c_count = None, None, None
        for _ in range(args.repeat):
            s, w, c = cli_find(args.cli, ped_path, data_path, size, args.device, out)
            if c_sec is None or s < c_sec:
                c_sec, c_wall, c_count = s, w, c
        row = lambda what, sec, frames, count, note="": rows.append(dict(
            size=f"{size}x{size}", run=what, us_per_frame=1e6 * sec / frames, seconds=sec,
            frames=frames, clusters=count, vs_cli=(sec / frames) / (c_sec / n), note=note))
        row("cluda find --out tmpfs (data phase)", c_sec, n, c_count)
        row("cluda find --out tmpfs (whole command)", c_wall, n, c_count)

        def iter_run(frames_of, label):
            def one():
                f = finder(size)
                src = frames_of()
                t = time.perf_counter()
                chunks = list(f.find_iter(src, chunk=args.chunk))
                sec = time.perf_counter() - t
                return sec, sum(len(c) for c in chunks), chunks
            sec, count, chunks = best(one)
            row(label, sec, n, count)
            return chunks

        chunks = iter_run(lambda: np.load(data_path, mmap_mode="r"),
                          f"find_iter(np.load(path, mmap_mode='r'), chunk={args.chunk}), kept")
        if args.verify:
            want = cluda.read_cluster_file(out, size)
            got = np.concatenate(chunks)
            same = got.shape == want.shape and np.array_equal(
                got.view(np.uint32), want.view(np.uint32))
            print(f"find_iter rows identical to the command's cluster file: {same}", flush=True)
            if not same:
                sys.exit("MISMATCH between find_iter and the command's cluster file")
            del want, got
        del chunks
        iter_run(lambda: np.asarray(np.load(data_path, mmap_mode="r")),
                 f"find_iter(np.asarray(map), chunk={args.chunk}) (memory), kept")

        def file_run():
            f = finder(size)
            t = time.perf_counter()
            c = f.find_file(data_path)
            return time.perf_counter() - t, len(c), None
        sec, count, _ = best(file_run)
        row("find_file(path), kept", sec, n, count)

        def whole_run():
            t = time.perf_counter()
            f = finder(size)
            chunks = list(f.find_iter(np.load(data_path, mmap_mode="r"), chunk=args.chunk))
            return time.perf_counter() - t, sum(len(c) for c in chunks), None
        sec, count, _ = best(whole_run)
        row("find_iter whole run (finder, pedestal, chunks) vs the whole command", sec, n, count,
            note=f"vs_cli here: against the command's wall {c_wall:.3f} s: "
                 f"{sec / c_wall:.2f}")

        for via in ("engine", "direct"):
            for keep in (True, False):
                def mem_run():
                    f = finder(size)
                    t = time.perf_counter()
                    r = cluda._cluda.ClusterFinder.find(f, in_memory, None, None, via, keep)
                    return time.perf_counter() - t, (len(r) if keep else r), None
                sec, count, _ = best(mem_run)
                row(f"find(frames in memory), via={via}, {'kept' if keep else 'counted only'}",
                    sec, mem_n, count)
        for r in rows:
            if r["size"] == f"{size}x{size}" and r["frames"] == n and r["clusters"] != c_count:
                sys.exit(f"MISMATCH: {r['run']} found {r['clusters']} clusters, the command {c_count}")
        out.unlink(missing_ok=True)

    head = (f"{n} frames of 400x400 (`cluda gen --seed 1`), {len(ped)} pedestal frames, "
            f"device {args.device}, best of {args.repeat}; files on {args.tmpfs} (tmpfs)")
    lines = ["| size | run | us/frame | s | clusters | vs cluda find (data phase) |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['size']} | {r['run']} | {r['us_per_frame']:.2f} | {r['seconds']:.3f} | "
                     f"{r['clusters']} | {r['vs_cli']:.2f}{' (' + r['note'] + ')' if r['note'] else ''} |")
    shown, hide = [], False
    for a in sys.argv[1:]:
        shown.append("PATH" if hide else a)
        hide = a in ("--cli", "--tmpfs", "--md", "--csv")
    cmd = "python3 python/bench/user_path.py " + " ".join(shown)
    text = "\n".join([head, "", *lines, "", f"command: `{cmd}`"])
    print(text)
    if args.md:
        args.md.write_text(text + "\n")
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
