"""Find photon clusters in MOENCH-like frames and show their energy spectrum.

    python examples/spectrum.py                      # generated frames, CPU or GPU
    python examples/spectrum.py --pedestal p.npy --data d.npy --out spectrum.png

Without matplotlib the histogram is printed as text.
"""

import argparse
import sys

import numpy as np

import cluda


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pedestal", help="uint16 .npy dark frames (default: generated)")
    ap.add_argument("--data", help="uint16 .npy frames with photons (default: generated)")
    ap.add_argument("--frames", type=int, default=40, help="generated data frames")
    ap.add_argument("--cluster-size", type=int, default=3)
    ap.add_argument("--device", default="auto", help="auto, cpu or gpu")
    ap.add_argument("--out", default="spectrum.png", help="PNG to write (with matplotlib)")
    args = ap.parse_args()

    if args.pedestal and args.data:
        pedestal = cluda.read_npy_frames(args.pedestal)
        data = np.load(args.data, mmap_mode="r")  # streamed a chunk at a time
    else:
        pedestal = cluda.generate(200, first=0, photons=False, shape=(200, 200))
        data = cluda.generate(args.frames, first=200, photons=True, shape=(200, 200))

    finder = cluda.ClusterFinder(
        pedestal.shape[1:], cluster_size=args.cluster_size, device=args.device,
        pedestal_frames=len(pedestal),
    )
    finder.push_pedestal(pedestal)
    sums = np.concatenate([cluda.cluster_sums(c) for c in finder.find_iter(data, chunk=20)])
    print(f"{len(sums)} clusters in {finder.frames_found} frames on {finder.device}")

    counts, edges = np.histogram(sums, bins=40, range=(0, 1000))
    peak = edges[np.argmax(counts)]
    print(f"photon peak near {peak:.0f} ADU")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            f"note: {args.out} was not written: drawing it needs matplotlib "
            "(pip install matplotlib); the histogram follows as text",
            file=sys.stderr,
        )
        width = 50 / max(counts.max(), 1)
        for c, lo in zip(counts, edges):
            print(f"{lo:7.0f} {c:6d} {'#' * int(c * width)}")
        return
    plt.stairs(counts, edges)
    plt.xlabel("cluster sum (ADU)")
    plt.ylabel("clusters")
    plt.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
