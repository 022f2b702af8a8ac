"""`cluda eta` and `cluda image` against aare's own wheel (PyPI `aare==2025.11.21`).

The same clusters (cluda's `find --out` file, read by `aare.ClusterFile`), the same cube (cluda's
`eta.npz`, handed to `aare.Interpolator` as it is): every photon whose eta and energy lie
strictly inside the first and last edges must equal aare's `Interpolator.interpolate*` to the
last bit in x, y and energy, for the default (cumulative) maps and the Rosenblatt transform, for
every eta kind. Bit equality is expected, not a tolerance: cluda evaluates aare's formulas in
the same f64 operations in the same order (exact integer sums, one division; aare's map loops;
`x + 0.5 + u + dX` left to right), so any difference is a bug.

Only the photons strictly inside are handed to aare: above the last edge aare 2025.11.21 reads
past the end of its tables (garbage, or worse), below the first it silently uses bin 0; cluda
flags both (flags 1/2, the photon at its pixel's centre), which is checked here against aare's
own etas. The cube itself is checked against a histogram of aare's etas of the same clusters
(aare's `last_smaller` bins, inclusive edges).

Skipped when `aare` is not importable (tools/test-python installs it when PyPI has it).
"""

import numpy as np
import pytest

aare = pytest.importorskip("aare")

ROWS = COLS = 64
SUBPIXELS = 4

# cluda's kind -> (aare's eta function, aare's interpolate method, eta range of the cube).
KINDS = {
    "eta2": ("calculate_eta2", "interpolate", "-0.1:1.1"),
    "full-eta2": ("calculate_full_eta2", "interpolate_full_eta2", "-0.1:1.1"),
    "eta3": ("calculate_eta3", "interpolate_eta3", "-1.1:1.1"),
    "cross-eta3": ("calculate_cross_eta3", "interpolate_cross_eta3", "-1.1:1.1"),
}


@pytest.fixture(scope="module")
def data(cli, tmp_path_factory):
    """Generated frames and their clusters, as `find --out` writes them."""
    d = tmp_path_factory.mktemp("interp_aare")
    cli("gen", "--out", d, "--frames", 200, "--pedestal-frames", 200,
        "--rows", ROWS, "--cols", COLS)
    p, dd = d / "pedestal.npy", d / "data.npy"
    cli("find", "--pedestal", p, "--data", dd, "--out", d / "c.clust", "--device", "cpu")
    return d, p, dd


def read_clusters(path):
    """Every 3x3 int32 cluster of a cluster file, in file order, as aare reads them: a
    structured array (x, y, data) and the ClusterVector chunks."""
    chunks, arrays = [], []
    with aare.ClusterFile(str(path), chunk_size=4096, dtype=np.int32) as cf:
        for cv in cf:
            chunks.append(cv)
            arrays.append(np.array(cv, copy=True))
    return np.concatenate(arrays), chunks


def aare_etas(kind, chunks):
    """aare's etas (x, y, c, sum) of every cluster, in order."""
    fn = getattr(aare, KINDS[kind][0])
    return np.concatenate([fn(cv) for cv in chunks])


def cluster_vector(rows):
    """A ClusterVector of these clusters (aare interpolates vectors only)."""
    v = aare.ClusterVector((3, 3), np.int32)
    for r in rows:
        v.push_back(aare.Cluster(int(r["x"]), int(r["y"]),
                                 np.ascontiguousarray(r["data"].ravel(), dtype=np.int32)))
    return v


def last_smaller(edges, v):
    """aare's `last_smaller` (algorithm.hpp) for values inside the edges: the index before the
    first edge >= v, at least 0."""
    return np.maximum(np.searchsorted(edges, v, side="left") - 1, 0)


def inside(edges, v, strict=False):
    if strict:
        return (edges[0] < v) & (v < edges[-1])
    return (edges[0] <= v) & (v <= edges[-1])


@pytest.fixture(scope="module")
def cubes(cli, data):
    """`cluda eta` of every kind over the generated frames (flat field = the data)."""
    d, p, dd = data
    out = {}
    for kind, (_, _, rng) in KINDS.items():
        path = d / f"eta_{kind}.npz"
        cli("eta", "--pedestal", p, "--data", dd, "--out", path, "--device", "cpu",
            "--eta-kind", kind, "--eta-range", rng)
        out[kind] = path
    return out


def test_default_cube_file_is_what_aare_takes(cli, data):
    d, p, dd = data
    path = d / "eta_default.npz"
    cli("eta", "--pedestal", p, "--data", dd, "--out", path, "--device", "cpu")
    z = np.load(path)
    assert sorted(z.files) == ["ebins", "etacube", "xbins", "ybins"]
    want = np.linspace(-0.1, 1.1, 202)
    assert z["xbins"].dtype == np.float64 and z["etacube"].dtype == np.float64
    assert z["xbins"].tobytes() == want.tobytes()
    assert z["ybins"].tobytes() == want.tobytes()
    assert z["ebins"].tolist() == [0.0, float("inf")]
    assert z["etacube"].shape == (201, 201, 1)
    # aare's constructor takes the archive as it is.
    aare.Interpolator(**z)


@pytest.mark.parametrize("kind", list(KINDS))
def test_cube_is_histogram_of_aare_etas(data, cubes, kind):
    d, _, _ = data
    z = np.load(cubes[kind])
    xb, yb, eb = z["xbins"], z["ybins"], z["ebins"]
    _, chunks = read_clusters(d / "c.clust")
    e = aare_etas(kind, chunks)
    energy = e["sum"].astype(np.float64)
    ok = inside(xb, e["x"]) & inside(yb, e["y"]) & inside(eb, energy)
    want = np.zeros(z["etacube"].shape)
    np.add.at(want, (last_smaller(xb, e["x"][ok]), last_smaller(yb, e["y"][ok]),
                     last_smaller(eb, energy[ok])), 1.0)
    assert ok.sum() > 0.5 * len(e)
    np.testing.assert_array_equal(z["etacube"], want)


@pytest.mark.parametrize("maps", ["cumulative", "rosenblatt"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_photons_equal_aare(cli, data, cubes, kind, maps):
    d, p, dd = data
    img_path, ph_path = d / f"img_{kind}_{maps}.npy", d / f"ph_{kind}_{maps}.npy"
    cli("image", "--pedestal", p, "--data", dd, "--eta", cubes[kind], "--maps", maps,
        "--subpixels", SUBPIXELS, "--out", img_path, "--photons", ph_path, "--device", "cpu")
    ph = np.load(ph_path)
    assert ph.dtype.names == ("frame", "x", "y", "energy", "flags")
    clusters, chunks = read_clusters(d / "c.clust")
    assert len(ph) == len(clusters), "one photon per cluster, in the file's order"

    z = np.load(cubes[kind])
    xb, yb, eb = z["xbins"], z["ybins"], z["ebins"]
    e = aare_etas(kind, chunks)
    energy = e["sum"].astype(np.float64)

    # Flags against aare's etas; flagged photons at their pixel's centre.
    eta_out = ~(inside(xb, e["x"]) & inside(yb, e["y"]))
    e_out = ~inside(eb, energy)
    np.testing.assert_array_equal(ph["flags"], eta_out * 1 + e_out * 2)
    flagged = ph["flags"] != 0
    np.testing.assert_array_equal(ph["x"][flagged], clusters["x"][flagged] + 0.5)
    np.testing.assert_array_equal(ph["y"][flagged], clusters["y"][flagged] + 0.5)
    assert ph["energy"].tobytes() == energy.tobytes()

    # Strictly inside: aare's photons, bit for bit.
    strict = inside(xb, e["x"], True) & inside(yb, e["y"], True) & inside(eb, energy, True)
    assert strict.sum() > 0.5 * len(ph)
    assert (ph["flags"][strict] == 0).all()
    if maps == "cumulative":
        ip = aare.Interpolator(z["etacube"], xb, yb, eb)
    else:
        ip = aare.Interpolator(xb, yb, eb)
        ip.rosenblatttransform(z["etacube"])
    theirs = getattr(ip, KINDS[kind][1])(cluster_vector(clusters[strict]))
    ours = ph[strict]
    for f in ("x", "y", "energy"):
        a = np.ascontiguousarray(ours[f])
        b = np.ascontiguousarray(theirs[f])
        bad = np.flatnonzero(a.view(np.uint64) != b.view(np.uint64))
        assert bad.size == 0, (
            f"{kind} {maps}: {f} differs for {bad.size} of {len(a)} photons; first: cluster "
            f"{clusters[strict][bad[0]]} cluda {a[bad[0]]!r} aare {b[bad[0]]!r}"
        )

    # The image counts the placed photons at [floor(y * N), floor(x * N)].
    img = np.load(img_path)
    assert img.dtype == np.dtype("<u4") and img.shape == (ROWS * SUBPIXELS, COLS * SUBPIXELS)
    placed = ph[ph["flags"] == 0]
    r = np.floor(placed["y"] * SUBPIXELS)
    c = np.floor(placed["x"] * SUBPIXELS)
    keep = (r >= 0) & (r < img.shape[0]) & (c >= 0) & (c < img.shape[1])
    want = np.zeros(img.shape, dtype=np.int64)
    np.add.at(want, (r[keep].astype(np.int64), c[keep].astype(np.int64)), 1)
    np.testing.assert_array_equal(img, want)
