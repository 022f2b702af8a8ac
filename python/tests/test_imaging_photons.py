"""`cluda.image` with photon lists in memory, a mask, a gain map and an energy window, and
`cluda.eta_cube` with a mask and a gain map: the same rows, images and cubes as `cluda image
--photons/--out` and `cluda eta` with `--mask/--gain/--energy-window` (the library's one
session into its sinks), a failed input giving None while the others come back, and bad
shapes and values refused with errors naming the parameter."""

import numpy as np
import pytest

import cluda
import gpu_check
from conftest import cli_path

ROWS, COLS = 48, 40


def test_image_photons_equal_the_command(cli, tmp_path):
    """Byte-identical rows to `--photons`, images equal to `--out`'s, with failing inputs,
    masks, gains and windows (`gpu_check.check_image_photons`, here on the CPU)."""
    gpu_check.check_image_photons(tmp_path, "cpu", str(cli_path()), log=lambda _: None)


@pytest.fixture(scope="module")
def data(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("imaging_photons")
    cli("gen", "--out", d, "--frames", 120, "--pedestal-frames", 100,
        "--rows", ROWS, "--cols", COLS)
    cube = d / "cube.npz"
    cli("eta", "--pedestal", d / "pedestal.npy", "--data", d / "data.npy", "--out", cube,
        "--device", "cpu")
    return d, d / "pedestal.npy", d / "data.npy", cube


def test_eta_cube_mask_and_gain_equal_the_command(cli, data):
    d, p, dd, _ = data
    rng = np.random.default_rng(9)
    mask = rng.random((ROWS, COLS)) < 0.1
    gain = rng.uniform(0.5, 2.0, (ROWS, COLS))
    np.save(d / "m.npy", mask)
    np.save(d / "g.npy", gain.astype(np.float32))
    out = d / "masked-gain.npz"
    cli("eta", "--pedestal", p, "--data", dd, "--out", out, "--mask", d / "m.npy",
        "--gain", d / "g.npy", "--device", "cpu", "--overwrite")
    want = np.load(out)
    for m, g in [(mask, gain.astype(np.float32)), (d / "m.npy", str(d / "g.npy"))]:
        cube, summary = cluda.eta_cube([dd], p, mask=m, gain=g, device="cpu")
        for k in cube:
            np.testing.assert_array_equal(cube[k], want[k])
        assert summary["masked"] > 0 and summary["counted_on"] == "host"
    plain, _ = cluda.eta_cube([dd], p, device="cpu")
    assert plain["etacube"].sum() > cube["etacube"].sum()


def test_image_returns_and_old_calls(data):
    d, p, dd, cube = data
    img, summary = cluda.image([dd], p, cube, device="cpu")
    img2, photons, summary2 = cluda.image([dd, dd], p, cube, photons=True, device="cpu")
    np.testing.assert_array_equal(img2, 2 * img)
    assert len(photons) == 2 and photons[0].dtype == cluda.PHOTON_LIST_DTYPE
    assert photons[0].dtype.itemsize == 33
    np.testing.assert_array_equal(photons[0], photons[1])
    assert len(photons[0]) == summary["clusters"]
    # Rows in frame order; placed photons are the ones the image counts.
    assert np.all(np.diff(photons[0]["frame"]) >= 0)
    placed = photons[0][photons[0]["flags"] == 0]
    assert len(placed) == summary["inside"] == img.sum()
    none, only, _ = cluda.image([dd], p, cube, subpixels=None, photons=True, device="cpu")
    assert none is None and only[0].tobytes() == photons[0].tobytes()


def test_bad_arguments_name_the_parameter(data, tmp_path):
    d, p, dd, cube = data
    ok = np.zeros((ROWS, COLS), bool)
    bad = {
        "mask": [np.zeros((ROWS, COLS + 1), bool), np.zeros((ROWS, COLS), np.float64),
                 np.zeros(ROWS * COLS, bool)],
        "gain": [np.ones((ROWS + 1, COLS)), np.zeros((ROWS, COLS)),
                 np.full((ROWS, COLS), np.nan), np.ones((ROWS, COLS), bool)],
        "energy_window": [(5.0, 1.0), (float("nan"), 1.0), "12", (1, 2, 3)],
    }
    for name, values in bad.items():
        for v in values:
            with pytest.raises(ValueError, match=name):
                cluda.image([dd], p, cube, device="cpu", **{name: v})
    np.save(tmp_path / "wide.npy", np.zeros((ROWS, COLS + 2), bool))
    np.save(tmp_path / "wideg.npy", np.ones((ROWS, COLS + 2)))
    with pytest.raises(ValueError, match="mask.*wide.npy"):
        cluda.image([dd], p, cube, mask=tmp_path / "wide.npy", device="cpu")
    with pytest.raises(ValueError, match="gain.*wideg.npy"):
        cluda.image([dd], p, cube, gain=tmp_path / "wideg.npy", photons=True, subpixels=None,
                    device="cpu")
    for name, v in [("mask", np.zeros((3, 3), bool)), ("gain", np.ones((3, 3)))]:
        with pytest.raises(ValueError, match=name):
            cluda.eta_cube([dd], p, device="cpu", **{name: v})
    with pytest.raises(ValueError, match="subpixels"):
        cluda.image([dd], p, cube, subpixels=None, device="cpu")
    cluda.image([dd], p, cube, mask=ok, device="cpu")
