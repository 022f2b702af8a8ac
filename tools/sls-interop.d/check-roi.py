#!/usr/bin/env python3
"""Checks a receiver-ROI acquisition of tools/sls-interop against its raw files, read here directly.

    check-roi.py DARK_master_0.json DATA_master_0.json DATA.clust XMIN,XMAX,YMIN,YMAX FRAMES

Standard library only (struct, array), independent of cluda's reader:
  - both masters name the ROI as docs/file-formats.md ("Receiver ROI") says: format >= 8,
    "Receiver Rois" a list of exactly that one ROI (before: "Receiver Roi", that ROI), "Pixels"
    and "Image Size" (7.x: "Image Size in bytes") still the whole detector's (400 x 400, 320000
    bytes);
  - every data file (`_d0_f*_0.raw`) is a whole number of records of 112 header bytes plus the
    ROI's pixels (2 bytes each), FRAMES records in all, frame numbers consecutive;
  - one frame's pixels as cluda read them: the first data frame's clusters in DATA.clust (cluda's
    output, detector coordinates) against that frame read here from the raw file, minus the
    mean of every dark frame read here (the pedestal window of `find --pedestal DARK` is the
    dark acquisition, and nothing has updated it before the first data frame). Each of the
    cluster's values must be that difference rounded (within 0.5), 0 for a neighbour outside the
    ROI. A cluster read at the wrong place (ROI coordinates, a row or column off, a record
    misaligned) fails.
Prints one line of counts; exits 1 on any mismatch.
"""
import array
import glob
import json
import struct
import sys

HEADER = 112
DETECTOR = (400, 400)  # x (columns), y (rows) of one MOENCH module


def fail(msg):
    sys.exit(f"check-roi: {msg}")


def master_roi(path, roi):
    with open(path) as f:
        m = json.load(f)
    one = dict(zip(("xmin", "xmax", "ymin", "ymax"), roi))
    # Format >= 8 (slsDetectorPackage 10): a list of ROIs; before: one object.
    key, want = ("Receiver Rois", [one]) if float(m.get("Version", 0)) >= 8 else ("Receiver Roi", one)
    got = m.get(key)
    if got != want:
        fail(f"{path}: \"{key}\" is {got!r}, expected {want!r}")
    pix = m.get("Pixels")
    if pix != {"x": DETECTOR[0], "y": DETECTOR[1]}:
        fail(f"{path}: \"Pixels\" is {pix!r}, expected the whole detector's")
    # Master format 8.0 (release 10) calls it "Image Size"; 7.x "Image Size in bytes".
    size_key = "Image Size" if "Image Size" in m else "Image Size in bytes"
    if m.get(size_key) != DETECTOR[0] * DETECTOR[1] * 2:
        fail(f"{path}: \"{size_key}\" is {m.get(size_key)!r}, expected the whole detector's")
    return m


def records(master, roi):
    """(frame number, pixels as array('H')) of every record of the master's _d0_ files."""
    base = master[: -len("_master_0.json")]
    files = sorted(glob.glob(f"{base}_d0_f*_0.raw"), key=lambda p: int(p.rsplit("_f", 1)[1].split("_")[0]))
    if not files:
        fail(f"no data files {base}_d0_f*_0.raw")
    w, h = roi[1] - roi[0] + 1, roi[3] - roi[2] + 1
    size = HEADER + w * h * 2
    out = []
    for path in files:
        data = open(path, "rb").read()
        if len(data) % size:
            fail(f"{path}: {len(data)} bytes is not a whole number of {size}-byte records (ROI {w} x {h})")
        for off in range(0, len(data), size):
            (fnum,) = struct.unpack_from("<Q", data, off)
            px = array.array("H")
            px.frombytes(data[off + HEADER : off + size])
            if sys.byteorder != "little":
                px.byteswap()
            out.append((fnum, px))
    return out, w, h


def main():
    if len(sys.argv) != 6:
        fail("usage: check-roi.py DARK_master_0.json DATA_master_0.json DATA.clust XMIN,XMAX,YMIN,YMAX FRAMES")
    dark_m, data_m, clust, roi_s, nframes = sys.argv[1:]
    roi = tuple(int(v) for v in roi_s.split(","))
    nframes = int(nframes)
    for m in (dark_m, data_m):
        master_roi(m, roi)
    dark, w, h = records(dark_m, roi)
    data, _, _ = records(data_m, roi)
    if len(data) != nframes:
        fail(f"{data_m}: {len(data)} records in its data files, expected {nframes}")
    nums = [f for f, _ in data]
    if nums != list(range(nums[0], nums[0] + nframes)):
        fail(f"{data_m}: frame numbers not consecutive: {nums[:5]} ...")
    # The pedestal: the dark frames' mean, exactly (a sum of integers over their count).
    n = len(dark)
    sums = [0] * (w * h)
    for _, px in dark:
        for i, v in enumerate(px):
            sums[i] += v
    # The first data frame's clusters (aare's cluster file: i32 frame, u32 count, then
    # count x {u16 x, u16 y, i32 data[9]}).
    cdata = open(clust, "rb").read()
    if len(cdata) < 8:
        fail(f"{clust}: no frame")
    frame, count = struct.unpack_from("<iI", cdata, 0)
    fnum, px = data[0]
    if frame != fnum:
        fail(f"{clust}: first frame {frame}, the raw file's first record is frame {fnum}")
    if count == 0:
        fail(f"{clust}: frame {frame} has no cluster to compare")
    values = worst = 0
    off = 8
    for _ in range(count):
        x, y = struct.unpack_from("<HH", cdata, off)
        vals = struct.unpack_from("<9i", cdata, off + 4)
        off += 40
        for k, got in enumerate(vals):
            cx, cy = x - 1 + k % 3, y - 1 + k // 3  # detector coordinates
            rx, ry = cx - roi[0], cy - roi[2]  # ROI coordinates: the raw record's
            if 0 <= rx < w and 0 <= ry < h:
                i = ry * w + rx
                want = px[i] - sums[i] / n
                dev = abs(got - want)
            else:
                want, dev = 0, abs(got)
            worst = max(worst, dev)
            if dev > 0.5 + 1e-9:
                fail(
                    f"frame {frame}: cluster at ({x}, {y}) value {k} (pixel column {cx}, row {cy}) is {got}, "
                    f"the raw file read here gives {want:.3f}"
                )
            values += 1
    print(
        f"masters name the ROI {list(roi)}, whole-detector Pixels and Image Size; {len(dark)} dark and "
        f"{len(data)} data records of {HEADER}+{w * h * 2} bytes; frame {frame}: {count} clusters, "
        f"{values} values equal the raw pixels less the dark mean (largest deviation {worst:.3f})"
    )


if __name__ == "__main__":
    main()
