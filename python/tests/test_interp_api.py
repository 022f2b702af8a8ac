"""The aare-like Python API of eta interpolation: `cluda.Interpolator`, `cluda.eta2` & co.

Against the CLI: `Interpolator(**np.load(eta.npz)).interpolate*(clusters)` on the clusters of
`find --out` (read with `cluda.read_cluster_file`) equals `cluda image --photons` bit for bit
(x, y, energy, flags), every eta kind, both maps, 3x3 and 5x5: both place through the same
library functions. Against aare's wheel (skipped without it): the maps (`get_ietax`,
`get_ietay`) equal aare's, the photons of clusters strictly inside the edges equal aare's
`interpolate*` bit for bit, and the etas equal aare's `calculate_*` (sum as float64 here).
Then the accepted cluster arrays and the errors.
"""

import numpy as np
import pytest

import cluda

ROWS = COLS = 64

# cluda's kind -> (Python eta function, Interpolator method, aare's eta function, eta range).
KINDS = {
    "eta2": ("eta2", "interpolate", "calculate_eta2", "-0.1:1.1"),
    "full-eta2": ("full_eta2", "interpolate_full_eta2", "calculate_full_eta2", "-0.1:1.1"),
    "eta3": ("eta3", "interpolate_eta3", "calculate_eta3", "-1.1:1.1"),
    "cross-eta3": ("cross_eta3", "interpolate_cross_eta3", "calculate_cross_eta3", "-1.1:1.1"),
}


@pytest.fixture(scope="module")
def data(cli, tmp_path_factory):
    """Generated frames, their 3x3 and 5x5 clusters (`find --out`) and a cube of every kind."""
    d = tmp_path_factory.mktemp("interp_api")
    cli("gen", "--out", d, "--frames", 150, "--pedestal-frames", 200,
        "--rows", ROWS, "--cols", COLS)
    p, dd = d / "pedestal.npy", d / "data.npy"
    for n in (3, 5):
        cli("find", "--pedestal", p, "--data", dd, "--out", d / f"c{n}.clust",
            "--device", "cpu", "--cluster", n)
    for kind, (_, _, _, rng) in KINDS.items():
        cli("eta", "--pedestal", p, "--data", dd, "--out", d / f"eta_{kind}.npz",
            "--device", "cpu", "--eta-kind", kind, "--eta-range", rng)
    return d, p, dd


def same_bits(a, b):
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def interpolator(npz, maps):
    z = np.load(npz)
    if maps == "cumulative":
        return cluda.Interpolator(**z)
    ip = cluda.Interpolator(z["xbins"], z["ybins"], z["ebins"])
    ip.rosenblatttransform(z["etacube"])
    return ip


@pytest.mark.parametrize("size", [3, 5])
@pytest.mark.parametrize("maps", ["cumulative", "rosenblatt"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_interpolate_equals_cli_photons(cli, data, kind, maps, size):
    d, p, dd = data
    ph_path = d / f"ph_{kind}_{maps}_{size}.npy"
    cli("image", "--pedestal", p, "--data", dd, "--eta", d / f"eta_{kind}.npz",
        "--maps", maps, "--cluster", size, "--out", d / f"img_{kind}_{maps}_{size}.npy",
        "--photons", ph_path, "--device", "cpu")
    ph = np.load(ph_path)
    clusters = cluda.read_cluster_file(d / f"c{size}.clust", size)
    ip = interpolator(d / f"eta_{kind}.npz", maps)
    ours = getattr(ip, KINDS[kind][1])(clusters)
    assert ours.dtype == cluda.PHOTON_DTYPE
    assert len(ours) == len(ph) == len(clusters) > 1000
    assert (ours["flags"] == 0).sum() > 0.5 * len(ours)
    for f in ("x", "y", "energy", "flags"):
        assert same_bits(ours[f], ph[f]), f"{kind} {maps} {size}x{size}: {f} differs"


def test_cumulative_maps_default_when_cube_given(data):
    d, _, _ = data
    z = np.load(d / "eta_eta2.npz")
    a = cluda.Interpolator(z["etacube"], z["xbins"], z["ybins"], z["ebins"])
    b = cluda.Interpolator(**z)
    assert a.maps_kind == b.maps_kind == "cumulative"
    assert same_bits(a.get_ietax(), b.get_ietax()) and same_bits(a.get_ietay(), b.get_ietay())
    assert a.get_ietax().shape == z["etacube"].shape and a.get_ietax().dtype == np.float64
    c = cluda.Interpolator(z["xbins"], z["ybins"], z["ebins"])
    assert c.maps_kind is None
    c.rosenblatttransform(z["etacube"])
    assert c.maps_kind == "rosenblatt"
    xb, yb, eb = c.bins
    assert same_bits(xb, z["xbins"]) and same_bits(eb, z["ebins"])


def test_cluster_array_forms_agree(data):
    """The package's rows, aare's (x, y, data (3, 3)) rows, (n, 9) data, a strided slice and
    an empty array give the same photons and etas."""
    d, _, _ = data
    clusters = cluda.read_cluster_file(d / "c3.clust", 3)
    ip = interpolator(d / "eta_eta2.npz", "cumulative")
    want = ip.interpolate(clusters)
    aare_like = np.empty(len(clusters), dtype=[("x", "<u2"), ("y", "<u2"), ("data", "<i4", (3, 3))])
    aare_like["x"], aare_like["y"] = clusters["x"], clusters["y"]
    aare_like["data"] = clusters["data"].reshape(-1, 3, 3)
    plain = np.empty(len(clusters), dtype=[("data", "<i4", (9,)), ("y", "<u2"), ("x", "<u2")])
    plain["x"], plain["y"], plain["data"] = clusters["x"], clusters["y"], clusters["data"]
    for other in (aare_like, plain):
        assert same_bits(ip.interpolate(other), want)
        assert same_bits(cluda.eta2(other), cluda.eta2(clusters))
    assert same_bits(ip.interpolate(clusters[::3]), want[::3])
    empty = ip.interpolate(clusters[:0])
    assert empty.dtype == cluda.PHOTON_DTYPE and len(empty) == 0
    assert len(cluda.eta3(clusters[:0])) == 0


def test_eta_values_by_hand():
    """One cluster, every kind, against the formulas of docs/interpolation.md."""
    c = np.zeros(1, dtype=[("x", "<u2"), ("y", "<u2"), ("data", "<i4", (3, 3))])
    c["x"], c["y"] = 5, 6
    c["data"] = np.array([[1, 2, 3], [4, 100, 50], [7, 30, 10]], dtype=np.int32)
    e = cluda.eta2(c)[0]
    # Quadrants TL 107, TR 155, BL 141, BR 190: BR (c = 3); x = 50/150, y = 30/130.
    assert (e["c"], e["sum"]) == (3, 190.0)
    assert e["x"] == 50 / 150 and e["y"] == 30 / 130
    f = cluda.full_eta2(c)[0]
    assert f["c"] == 3 and f["x"] == 60 / 190 and f["y"] == 40 / 190
    e3 = cluda.eta3(c)[0]
    assert (e3["c"], e3["sum"]) == (0, 207.0)
    assert e3["x"] == ((3 + 50 + 10) - (1 + 4 + 7)) / 207
    assert e3["y"] == ((7 + 30 + 10) - (1 + 2 + 3)) / 207
    x3 = cluda.cross_eta3(c)[0]
    assert x3["x"] == (50 - 4) / 154 and x3["y"] == (30 - 2) / 132 and x3["sum"] == 207.0
    assert cluda.eta2(c).dtype == cluda.ETA_DTYPE


def test_flags_and_pixel_centres():
    """Flag 1 (eta outside), 2 (energy outside), 3 (both) put the photon at its pixel's
    centre; a placed photon is the cluster's position plus its map value."""
    edges = np.linspace(0.0, 1.0, 3)
    ip = cluda.Interpolator(np.ones((2, 2, 1)), edges, edges, np.array([0.0, 1000.0]))
    c = np.zeros(3, dtype=[("x", "<u2"), ("y", "<u2"), ("data", "<i4", (9,))])
    c["x"], c["y"] = [10, 20, 30], [11, 21, 31]
    c["data"][0] = [0, 0, 0, 0, 100, 50, 0, 30, 10]  # inside
    c["data"][1] = [0, 0, 0, 0, 100, 50, 0, 30, 900]  # energy 1080 > 1000
    c["data"][2] = [0, 0, 0, 0, -100, 50, 0, 30, 10000]  # eta outside [0, 1] and energy
    ph = ip.interpolate(c)
    assert ph["flags"].tolist() == [0, 2, 3]
    assert ph["x"][1:].tolist() == [20.5, 30.5] and ph["y"][1:].tolist() == [21.5, 31.5]
    assert ph["energy"].tolist() == [190.0, 1080.0, 9980.0]
    # BR quadrant, eta (1/3, 3/13): bins 0 and 0; cumulative map of a flat cube: 0 at bin 0.
    assert (ph["x"][0], ph["y"][0]) == (10 + 0.5 + 0.0, 11 + 0.5 + 0.0)


# --- against aare's wheel -----------------------------------------------------------------


def read_aare(path):
    aare = pytest.importorskip("aare")
    chunks = []
    with aare.ClusterFile(str(path), chunk_size=4096, dtype=np.int32) as cf:
        for cv in cf:
            chunks.append(cv)
    return aare, chunks


def cluster_vector(aare, rows):
    v = aare.ClusterVector((3, 3), np.int32)
    for r in rows:
        v.push_back(aare.Cluster(int(r["x"]), int(r["y"]),
                                 np.ascontiguousarray(r["data"].ravel(), dtype=np.int32)))
    return v


@pytest.mark.parametrize("kind", list(KINDS))
def test_etas_equal_aare(data, kind):
    d, _, _ = data
    aare, chunks = read_aare(d / "c3.clust")
    theirs = np.concatenate([getattr(aare, KINDS[kind][2])(cv) for cv in chunks])
    ours = np.concatenate([getattr(cluda, KINDS[kind][0])(cv) for cv in chunks])
    # The same from the package's own arrays of the file.
    clusters = cluda.read_cluster_file(d / "c3.clust", 3)
    assert same_bits(getattr(cluda, KINDS[kind][0])(clusters), ours)
    assert len(ours) == len(theirs) > 1000
    for f in ("x", "y", "c"):
        assert same_bits(ours[f], theirs[f]), f"{kind}: {f} differs from aare's"
    assert same_bits(ours["sum"], theirs["sum"].astype(np.float64))


@pytest.mark.parametrize("maps", ["cumulative", "rosenblatt"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_maps_and_photons_equal_aare(data, kind, maps):
    d, _, _ = data
    aare, chunks = read_aare(d / "c3.clust")
    z = np.load(d / f"eta_{kind}.npz")
    ours = interpolator(d / f"eta_{kind}.npz", maps)
    if maps == "cumulative":
        theirs = aare.Interpolator(z["etacube"], z["xbins"], z["ybins"], z["ebins"])
    else:
        theirs = aare.Interpolator(z["xbins"], z["ybins"], z["ebins"])
        theirs.rosenblatttransform(z["etacube"])
    assert same_bits(ours.get_ietax(), theirs.get_ietax())
    assert same_bits(ours.get_ietay(), theirs.get_ietay())

    clusters = cluda.read_cluster_file(d / "c3.clust", 3)
    e = np.concatenate([getattr(aare, KINDS[kind][2])(cv) for cv in chunks])
    energy = e["sum"].astype(np.float64)
    xb, yb, eb = z["xbins"], z["ybins"], z["ebins"]
    strict = ((xb[0] < e["x"]) & (e["x"] < xb[-1]) & (yb[0] < e["y"]) & (e["y"] < yb[-1])
              & (eb[0] < energy) & (energy < eb[-1]))
    assert strict.sum() > 0.5 * len(clusters)
    method = KINDS[kind][1]
    want = getattr(theirs, method)(cluster_vector(aare, clusters[strict]))
    got = getattr(ours, method)(clusters[strict])
    assert (got["flags"] == 0).all()
    for f in ("x", "y", "energy"):
        assert same_bits(got[f], want[f]), f"{kind} {maps}: {f} differs from aare's"
    # aare's ClusterVector is taken as it is, too.
    cv = cluster_vector(aare, clusters[strict][:500])
    assert same_bits(getattr(ours, method)(cv), got[:500])


# --- errors ---------------------------------------------------------------------------------

EDGES = np.linspace(-0.1, 1.1, 5)
EB = np.array([0.0, np.inf])
CUBE = np.ones((4, 4, 1))


def some_clusters(n=4):
    c = np.zeros(n, dtype=cluda.cluster_dtype(3))
    c["data"][:, 4] = 100
    return c


def test_no_maps_is_a_clear_error():
    ip = cluda.Interpolator(EDGES, EDGES, EB)
    for call in (lambda: ip.interpolate(some_clusters()), lambda: ip.interpolate_eta3(some_clusters()),
                 ip.get_ietax, ip.get_ietay):
        with pytest.raises(RuntimeError, match="no maps yet.*rosenblatttransform"):
            call()
    ip.rosenblatttransform(CUBE)
    assert len(ip.interpolate(some_clusters())) == 4


@pytest.mark.parametrize("args, exc, match", [
    ((np.ones((4, 4)), EDGES, EDGES, EB), ValueError, "etacube must be a 3-D"),
    ((np.ones((4, 5, 1)), EDGES, EDGES, EB), ValueError, r"etacube must have shape .*\(4, 4, 1\)"),
    ((np.ones((4, 4, 2)), EDGES, EDGES, EB), ValueError, "etacube must have shape"),
    ((CUBE, EDGES[::-1], EDGES, EB), ValueError, "xbins.*strictly increase"),
    ((CUBE, EDGES, np.array([0.0, 0.5, 0.5, 0.7, 1.0]), EB), ValueError, "ybins.*strictly increase"),
    ((CUBE, EDGES, EDGES, np.array([0.0])), ValueError, "ebins"),
    ((CUBE, EDGES, EDGES, np.array([0.0, np.nan])), ValueError, "ebins.*NaN"),
    ((CUBE, EDGES.reshape(1, -1), EDGES, EB), ValueError, "xbins must be a 1-D"),
    ((np.full((4, 4, 1), np.nan), EDGES, EDGES, EB), ValueError, "etacube.*not a finite"),
    ((CUBE.astype(bool), EDGES, EDGES, EB), TypeError, "etacube must be an array of real"),
    ((CUBE, EDGES.astype(str), EDGES, EB), TypeError, "xbins must be an array of real"),
    ((CUBE, EDGES, EDGES), ValueError, "xbins must be a 1-D"),  # the cube taken for xbins
    ((EDGES, EDGES), TypeError, "takes"),
    ((CUBE, EDGES, EDGES, EB, EB), TypeError, "takes"),
])
def test_constructor_errors(args, exc, match):
    with pytest.raises(exc, match=match):
        cluda.Interpolator(*args)


def test_constructor_keywords():
    ip = cluda.Interpolator(xbins=EDGES, ybins=EDGES, ebins=EB, etacube=CUBE)
    assert ip.maps_kind == "cumulative"
    # Integer arrays are converted (exactly).
    ip2 = cluda.Interpolator(CUBE.astype(np.int64), EDGES, EDGES, np.array([0, 10**6]))
    assert ip2.get_ietax().shape == (4, 4, 1)
    with pytest.raises(TypeError, match="unexpected or repeated argument 'cube'"):
        cluda.Interpolator(cube=CUBE, xbins=EDGES, ybins=EDGES, ebins=EB)
    with pytest.raises(ValueError, match="etacube must have shape"):
        cluda.Interpolator(EDGES, EDGES, EB).rosenblatttransform(np.ones((3, 4, 1)))


def bad_cluster_arrays():
    c = some_clusters()
    yield np.zeros((4, 9), dtype=np.int32), TypeError, "structured numpy array"
    yield [1, 2, 3], TypeError, "structured numpy array"
    yield object(), TypeError, "structured numpy array"
    yield np.zeros(2, dtype=[("x", "<u2"), ("data", "<i4", (9,))]), ValueError, "no field 'y'"
    yield np.zeros(2, dtype=[("x", "<i8"), ("y", "<u2"), ("data", "<i4", (9,))]), ValueError, r"clusters\['x'\] must be uint16"
    yield np.zeros(2, dtype=[("x", ">u2"), ("y", "<u2"), ("data", "<i4", (9,))]), ValueError, r"clusters\['x'\] must be uint16"
    yield np.zeros(2, dtype=[("x", "<u2"), ("y", "<u2"), ("data", "<f8", (9,))]), ValueError, r"clusters\['data'\] must be int32"
    yield np.zeros(2, dtype=[("x", "<u2"), ("y", "<u2"), ("data", "<i4", (2, 2))]), ValueError, r"N\*N values"
    yield np.zeros(2, dtype=[("x", "<u2"), ("y", "<u2"), ("data", "<i4", (3, 5))]), ValueError, r"N\*N values"
    yield np.zeros(2, dtype=[("x", "<u2"), ("y", "<u2"), ("data", "<i4", (11, 11))]), ValueError, r"N\*N values"
    yield np.zeros(2, dtype=[("x", "<u2"), ("y", "<u2"), ("data", "<i4")]), ValueError, r"N\*N values"
    yield c.reshape(2, 2), ValueError, "must be 1-D"


@pytest.mark.parametrize("arg, exc, match", list(bad_cluster_arrays()))
def test_cluster_array_errors(arg, exc, match):
    ip = cluda.Interpolator(CUBE, EDGES, EDGES, EB)
    with pytest.raises(exc, match=match):
        ip.interpolate(arg)
    with pytest.raises(exc, match=match):
        cluda.eta2(arg)


def test_internal_layout_is_checked():
    """The native functions check the layout they are handed, whatever the caller."""
    rows = np.zeros(2 * 44, dtype=np.uint8)
    ip = cluda.Interpolator(CUBE, EDGES, EDGES, EB)
    with pytest.raises(ValueError, match="do not fit"):
        cluda._cluda._etas("eta2", rows, (44, 0, 2, 20, 3))
    with pytest.raises(ValueError, match="whole rows"):
        cluda._cluda._etas("eta2", rows[:-1], (44, 0, 2, 4, 3))
    with pytest.raises(ValueError, match="cluster size 4"):
        cluda._cluda._etas("eta2", rows, (44, 0, 2, 4, 4))
    with pytest.raises(ValueError, match="eta4.*not one of"):
        ip._interpolate("eta4", rows, (44, 0, 2, 4, 3))
    with pytest.raises(ValueError, match="uint8"):
        cluda._cluda._etas("eta2", rows.view(np.int8), (44, 0, 2, 4, 3))
    assert len(cluda._cluda._etas("eta2", rows, (44, 0, 2, 4, 3))) == 2 * cluda.ETA_DTYPE.itemsize
