#!/usr/bin/env python3
"""aare's side of `benches/interp_step.rs`: `aare.Interpolator.interpolate` (the wheel,
aare==2025.11.21) on one thread, timed alone, on the clusters and the eta cube the bench wrote.

    python3 benches/interp_step_aare.py --clusters photons.clust --count N --cube eta.npz
        [--repeats 5] [--site DIR] [--wheels DIR]

Reads every 3x3 int32 cluster of the aare cluster file into one ClusterVector (checked: N of
them, every eta2 and energy strictly inside the cube's edges, where aare's tables are read in
bounds), builds `aare.Interpolator(etacube, xbins, ybins, ebins)` (cumulative maps) and
`Interpolator(xbins, ybins, ebins).rosenblatttransform(etacube)`, and times each one's
`interpolate` over the whole vector: one call to warm up, then the median of `--repeats`
calls. The process is pinned to one CPU and the thread variables are set to 1 before numpy
loads. Prints one JSON line: Python and aare versions, the CPU, and per map the median
ns/photon and every call's seconds.

When aare is not importable it is installed into `--site` from the wheels in `--wheels`
(`tools/aare-wheels` downloads them): `pip install --no-index --no-deps`, or, without pip,
the wheel whose tag is this Python's, unzipped. aare imports matplotlib for its plotting
helpers only; where matplotlib is missing an empty stand-in is put in its place.
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import glob  # noqa: E402
import importlib  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
import zipfile  # noqa: E402

import numpy as np  # noqa: E402

AARE = "2025.11.21"


def install(wheels, site):
    """aare from `wheels` into `site`: pip with no index, else this Python's wheel unzipped.
    Returns how."""
    os.makedirs(site, exist_ok=True)
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
         "--no-compile", "--find-links", wheels, "--target", site, f"aare=={AARE}"],
        capture_output=True, text=True)
    if pip.returncode == 0:
        return "pip"
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    found = sorted(glob.glob(os.path.join(wheels, f"aare-{AARE}-{tag}-{tag}-*.whl")))
    if not found:
        sys.exit(f"interp_step_aare: no aare {AARE} wheel for {tag} in {wheels}, and pip "
                 f"failed: {pip.stderr.strip()[-500:]}")
    with zipfile.ZipFile(found[0]) as z:
        z.extractall(site)
    return "unzip"


def stand_in_matplotlib():
    """Empty matplotlib modules where it is missing (aare.utils imports pyplot and
    mpl_toolkits.axes_grid1 for plotting only). Whether they were needed."""
    try:
        import matplotlib.pyplot  # noqa: F401
        return False
    except ImportError:
        pass
    for name in ("matplotlib", "matplotlib.pyplot", "mpl_toolkits", "mpl_toolkits.axes_grid1"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["mpl_toolkits.axes_grid1"].make_axes_locatable = None
    return True


def load_aare(site, wheels):
    """The aare module (installed first when needed) and how it was found."""
    sys.path.insert(0, site)
    stub = stand_in_matplotlib()
    how = "importable"
    try:
        import aare
    except ImportError:
        if not wheels:
            raise
        how = install(wheels, site)
        importlib.invalidate_caches()
        import aare
    return aare, how + (", matplotlib stand-in" if stub else "")


def read_clusters(aare, path, count):
    """Every cluster of the file, in one ClusterVector."""
    with aare.ClusterFile(path, chunk_size=max(count, 1), dtype=np.int32) as cf:
        cv = cf.read_clusters(count)
    if cv.size != count:
        sys.exit(f"interp_step_aare: {path} holds {cv.size} clusters, expected {count}")
    return cv


def check_inside(aare, cv, z):
    """Every eta2 and energy strictly inside the cube's edges (aare reads past its tables
    above the last edge)."""
    e = aare.calculate_eta2(cv)
    ok = np.ones(len(e), dtype=bool)
    for edges, v in ((z["xbins"], e["x"]), (z["ybins"], e["y"]),
                     (z["ebins"], e["sum"].astype(np.float64))):
        ok &= (edges[0] < v) & (v < edges[-1])
    if not ok.all():
        sys.exit(f"interp_step_aare: {np.count_nonzero(~ok)} clusters outside the cube's edges")


def interpolators(aare, z):
    """The cumulative and the Rosenblatt interpolator of the cube."""
    cube, xb, yb, eb = z["etacube"], z["xbins"], z["ybins"], z["ebins"]
    rosenblatt = aare.Interpolator(xb, yb, eb)
    rosenblatt.rosenblatttransform(cube)
    return {"cumulative": aare.Interpolator(cube, xb, yb, eb), "rosenblatt": rosenblatt}


def time_interpolate(ip, cv, repeats):
    """Seconds of each of `repeats` `interpolate` calls over `cv`, after one warm-up."""
    ip.interpolate(cv)
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        ip.interpolate(cv)
        runs.append(time.perf_counter() - t)
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clusters", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--cube", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--site", default="/tmp/cluda-aare-site")
    ap.add_argument("--wheels")
    a = ap.parse_args()

    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    aare, how = load_aare(a.site, a.wheels)
    cv = read_clusters(aare, a.clusters, a.count)
    z = np.load(a.cube)
    check_inside(aare, cv, z)
    maps = {}
    for name, ip in interpolators(aare, z).items():
        runs = time_interpolate(ip, cv, a.repeats)
        maps[name] = {"ns_per_photon": statistics.median(runs) * 1e9 / max(a.count, 1),
                      "runs_s": runs}
    try:
        version = importlib.metadata.version("aare")
    except Exception:
        version = "?"
    print(json.dumps({"python": sys.version.split()[0], "aare": version, "aare_from": how,
                      "cpu": cpu, "photons": a.count, "maps": maps}))


if __name__ == "__main__":
    main()
