#!/usr/bin/env python3
"""Checks a cluster file of frames made by the patched virtual MOENCH server (photons mode).

    check-clusters.py FILE.clust [--size 3] [--expect-frames N] [--roi XMIN,XMAX,YMIN,YMAX]

Reads aare's cluster file (per frame: i32 frame_number, u32 n_clusters, then n_clusters of
{u16 x, u16 y, i32 data[size*size]}, little-endian) with the standard library only, and checks
that every frame holds a cluster centred on each photon the server put in it (places from the
frame number, the formula of patch-virtual-server.py) whose centre value is the photon's 800 ADU
within the noise. Prints one line of counts; exits 1 when a photon was not found (or the file
is cut short, or holds fewer than --expect-frames frames), 0 otherwise. Clusters that are no
photon (noise above threshold) are counted, not failed.

With --roi (a receiver ROI, detector coordinates, ends inclusive) the file must hold detector
coordinates: only the photons put at least a cluster radius inside the ROI are expected (one on
the ROI's edge rows/columns may or may not be a centre, since its neighbours outside the ROI do
not exist for the finder), and a cluster centred outside the ROI fails.
"""
import argparse
import struct
import sys

NPHOTONS = 20
PHOTON_ADU = 800
TOLERANCE = 100  # 10 sigma of the server's noise


def photon_places(frame):
    """(column, row) of the photons the patched server put in frame number `frame`."""
    return {
        (30 + 70 * (i % 5) + (13 * frame) % 29, 30 + 90 * (i // 5) + (7 * frame) % 31)
        for i in range(NPHOTONS)
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--size", type=int, default=3)
    ap.add_argument("--expect-frames", type=int, default=None)
    ap.add_argument("--roi", default=None, help="XMIN,XMAX,YMIN,YMAX (detector coordinates)")
    args = ap.parse_args()
    roi = None
    if args.roi is not None:
        try:
            roi = tuple(int(v) for v in args.roi.split(","))
        except ValueError:
            roi = ()
        if len(roi) != 4 or roi[0] > roi[1] or roi[2] > roi[3]:
            sys.exit(f"check-clusters: --roi {args.roi!r} is not XMIN,XMAX,YMIN,YMAX")
    r = args.size // 2

    def inside(x, y, margin):
        return roi is None or (
            roi[0] + margin <= x <= roi[1] - margin and roi[2] + margin <= y <= roi[3] - margin
        )

    data = open(args.file, "rb").read()
    n = args.size * args.size
    csize = 4 + 4 * n
    frames = clusters = found = missed = extra = bad_value = outside = edge = 0
    first_miss = None
    put_total = 0
    off = 0
    while off < len(data):
        if off + 8 > len(data):
            sys.exit(f"check-clusters: {args.file}: cut short in a frame header at byte {off}")
        frame, count = struct.unpack_from("<iI", data, off)
        off += 8
        if off + count * csize > len(data):
            sys.exit(f"check-clusters: {args.file}: frame {frame} cut short")
        put = photon_places(frame)
        expected = {p for p in put if inside(*p, r)}
        seen = set()
        for k in range(count):
            x, y = struct.unpack_from("<HH", data, off)
            centre = struct.unpack_from("<i", data, off + 4 + 4 * (n // 2))[0]
            off += csize
            if not inside(x, y, 0):
                outside += 1
            elif (x, y) in expected:
                seen.add((x, y))
                if abs(centre - PHOTON_ADU) > TOLERANCE:
                    bad_value += 1
            elif (x, y) in put:
                edge += 1
            else:
                extra += 1
        frames += 1
        clusters += count
        found += len(seen)
        put_total += len(expected)
        missed += len(expected - seen)
        if expected - seen and first_miss is None:
            first_miss = (frame, sorted(expected - seen)[:3])
    roi_counts = f" roi_edge_photons={edge} outside_roi={outside}" if roi is not None else ""
    print(
        f"frames={frames} clusters={clusters} photons_put={put_total} "
        f"photons_found={found} photons_missed={missed} centre_off={bad_value} not_photons={extra}"
        + roi_counts
    )
    ok = frames > 0 and missed == 0 and bad_value == 0 and outside == 0 and put_total > 0
    if outside:
        print(f"check-clusters: {outside} clusters centred outside the ROI {roi}")
    if args.expect_frames is not None and frames < args.expect_frames:
        print(f"check-clusters: {frames} frames, expected {args.expect_frames}")
        ok = False
    if first_miss:
        print(f"check-clusters: first frame with a photon not found: {first_miss[0]}, places {first_miss[1]}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
