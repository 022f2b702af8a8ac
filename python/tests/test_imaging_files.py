"""`cluda.eta_cube` and `cluda.image` from files: the same cube and image as the `cluda eta`
and `cluda image` commands on the same inputs (the library's one session into its sinks),
several inputs adding up, and named errors."""

import numpy as np
import pytest

import cluda

ROWS, COLS = 48, 40


@pytest.fixture(scope="module")
def data(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("imaging_files")
    cli("gen", "--out", d, "--frames", 150, "--pedestal-frames", 120,
        "--rows", ROWS, "--cols", COLS)
    return d, d / "pedestal.npy", d / "data.npy"


@pytest.mark.parametrize("kind", ["eta2", "full-eta2", "eta3", "cross-eta3"])
def test_eta_cube_equals_the_command(cli, data, kind):
    d, p, dd = data
    rng = "-0.1:1.1" if "eta2" in kind else "-1.1:1.1"
    lo, hi = map(float, rng.split(":"))
    out = d / f"{kind}.npz"
    cli("eta", "--pedestal", p, "--data", dd, "--out", out, "--eta-kind", kind,
        "--eta-range", rng, "--device", "cpu", "--overwrite")
    cube, summary = cluda.eta_cube([dd], p, eta=kind, eta_range=(lo, hi), device="cpu")
    want = np.load(out)
    assert list(cube) == ["etacube", "xbins", "ybins", "ebins"]
    for k in cube:
        np.testing.assert_array_equal(cube[k], want[k])
    assert summary["inside"] == cube["etacube"].sum() > 0
    assert summary["frames"] == 150 and summary["counted_on"] == "host"
    assert summary["failed"] == []


def test_image_equals_the_command_and_inputs_add(cli, data, tmp_path):
    d, p, dd = data
    cube = d / "cube.npz"
    cli("eta", "--pedestal", p, "--data", dd, "--out", cube, "--device", "cpu", "--overwrite")
    for maps, n in [("cumulative", 4), ("rosenblatt", 7)]:
        out = tmp_path / f"{maps}.npy"
        cli("image", "--pedestal", p, "--data", dd, "--eta", cube, "--maps", maps,
            "--subpixels", n, "--out", out, "--device", "cpu")
        img, summary = cluda.image([dd], p, cube, subpixels=n, maps=maps, device="cpu")
        assert img.dtype == np.uint32 and img.shape == (ROWS * n, COLS * n)
        np.testing.assert_array_equal(img, np.load(out))
        assert summary["inside"] == img.sum() > 0
    twice, _ = cluda.image([dd, dd], p, cube, device="cpu")
    once, _ = cluda.image([dd], p, cube, device="cpu")
    np.testing.assert_array_equal(twice, 2 * once)
    # aare's Interpolator takes the cube as eta_cube returns it.
    c, _ = cluda.eta_cube([dd], p, device="cpu")
    cluda.Interpolator(**c)


def test_bad_arguments_are_named_errors(data, tmp_path):
    d, p, dd = data
    with pytest.raises(ValueError, match="eta"):
        cluda.eta_cube([dd], p, eta="eta4", device="cpu")
    with pytest.raises(ValueError, match="subpixels"):
        cluda.image([dd], p, d / "cube.npz", subpixels=33, device="cpu")
    with pytest.raises(TypeError, match="list of paths"):
        cluda.eta_cube(dd, p, device="cpu")
    with pytest.raises((OSError, ValueError)):
        cluda.image([dd], p, tmp_path / "missing.npz", device="cpu")
