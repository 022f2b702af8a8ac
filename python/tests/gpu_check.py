"""Every find path of the Python package on one device against the CPU finder's `find` on the
same frames (and against the `cluda` command's cluster file when it is given), as a plain
script: it needs only numpy and the installed `cluda` wheel, no pytest.

    python3 python/tests/gpu_check.py [--cli PATH/TO/cluda] [--device gpu] [--frames 700]

Paths checked, each on a fresh finder: `find` on an array in memory (through the engine, and
directly with `via="direct"`), on a memory map of the `.npy` file (read from the file) and on
the map's memory (`np.asarray`), in two calls (the kept ring, numbering), `find_file`,
`find_iter` over the map and over the array (chunks that do not divide the frames), a raw
acquisition (`RawFile`, `find_file` of its master; needs --cli to write one), results large
enough to grow the result memory several times, an iteration stopped early, and (with
--cli) `find_files` and `image`'s images and in-memory photon lists against the command's
files. Exits 1 on
any mismatch, 0 when all passed; without a GPU it says SKIP and exits 0 (2 with
--require-gpu). `test_gpu.py` runs the same checks under pytest (marker `gpu`), and
`test_engine_paths.py` runs them on the CPU.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

import cluda

SIZES = (3, 5, 7, 9)


def gpu_available() -> bool:
    """Whether a GPU finder can be opened here."""
    try:
        cluda.ClusterFinder((8, 8), device="gpu", pedestal_frames=1)
    except cluda.NoGpuError:
        return False
    return True


class Data:
    """Generated MOENCH-like pedestal and data frames, saved as `.npy` files in `tmp`."""

    def __init__(self, tmp: pathlib.Path, frames: int, shape=(400, 400), pedestal=200, seed=3):
        self.tmp, self.shape, self.frames = tmp, shape, frames
        self.ped = cluda.generate(pedestal, 0, False, shape=shape, seed=seed)
        self.data = cluda.generate(frames, pedestal, True, shape=shape, seed=seed)
        tag = f"{shape[0]}x{shape[1]}-{seed}"
        self.ped_path = tmp / f"ped-{tag}.npy"
        self.data_path = tmp / f"data-{tag}.npy"
        np.save(self.ped_path, self.ped)
        np.save(self.data_path, self.data)


def _finder(d: Data, device: str, **kw) -> cluda.ClusterFinder:
    f = cluda.ClusterFinder(d.shape, pedestal_frames=len(d.ped), device=device, **kw)
    if device == "gpu" and not f.device.startswith("gpu"):
        raise AssertionError(f"asked for a GPU finder, got {f.device}")
    f.push_pedestal(d.ped)
    return f


def _same(name: str, got: np.ndarray, want: np.ndarray) -> None:
    if got.dtype != want.dtype:
        raise AssertionError(f"{name}: dtype {got.dtype}, expected {want.dtype}")
    if len(got) != len(want) or not np.array_equal(got, want):
        first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), None)
        raise AssertionError(
            f"{name}: {len(got)} clusters, expected {len(want)}; first different row {first}"
        )


def _chunks(name: str, chunks: list, frames: int, chunk: int, want: np.ndarray) -> None:
    """`find_iter`'s chunks: as many as the chunk size says, each holding only its frames,
    together the whole result."""
    if len(chunks) != -(-frames // chunk):
        raise AssertionError(f"{name}: {len(chunks)} chunks, expected {-(-frames // chunk)}")
    for k, c in enumerate(chunks):
        if len(c) and not (c["frame"].min() >= k * chunk and c["frame"].max() < (k + 1) * chunk):
            raise AssertionError(f"{name}: chunk {k} holds frames of other chunks")
    _same(name, np.concatenate(chunks), want)


def check_paths(d: Data, device: str, size: int, log=print, **kw) -> None:
    """Every find path of `device` against the CPU finder's `find` on the same frames."""
    want = _finder(d, "cpu", cluster_size=size, **kw).find(d.data)
    if len(want) == 0:
        raise AssertionError("the reference found no cluster: the check would prove nothing")
    n = d.frames
    mm = np.load(d.data_path, mmap_mode="r")

    def fresh():
        return _finder(d, device, cluster_size=size, **kw)

    def run(name, call):
        t = time.perf_counter()
        f = fresh()
        got = call(f)
        if isinstance(got, list):
            _chunks(name, got, n, chunk, want)
        else:
            _same(name, got, want)
        if f.frames_found != n:
            raise AssertionError(f"{name}: frames_found {f.frames_found}, expected {n}")
        log(f"  ok {device} {size}x{size} {kw or ''} {name} ({time.perf_counter() - t:.2f} s)")

    chunk = max(1, n // 3 + 7)  # does not divide n
    run("find(array)", lambda f: f.find(d.data))
    run("find(array, via=direct)", lambda f: cluda._cluda.ClusterFinder.find(f, d.data, None, None, "direct"))
    run("find(array, via=engine)", lambda f: cluda._cluda.ClusterFinder.find(f, d.data, None, None, "engine"))
    run("find(memmap)", lambda f: f.find(mm))
    run("find(np.asarray(memmap))", lambda f: f.find(np.asarray(mm)))
    run("find in two calls", lambda f: np.concatenate([f.find(d.data[: n // 2]), f.find(d.data[n // 2 :])]))
    run("find_file(npy)", lambda f: f.find_file(d.data_path))
    run("find_iter(memmap)", lambda f: list(f.find_iter(mm, chunk=chunk)))
    run("find_iter(array)", lambda f: list(f.find_iter(d.data, chunk=chunk)))
    run("find_iter(strided array)", lambda f: list(f.find_iter(d.data[:, :, ::-1][:, :, ::-1], chunk=chunk)))


def check_cli(d: Data, device: str, size: int, cli: str, log=print) -> None:
    """`find_file` and `find_iter` against `cluda find --device DEVICE --out` on the same file."""
    out = d.tmp / f"cli-{size}.clust"
    subprocess.run([cli, "find", "--pedestal", str(d.ped_path), "--data", str(d.data_path),
                    "--device", device, "--cluster", str(size), "--out", str(out), "--overwrite"],
                   check=True, capture_output=True)
    want, numbers = cluda.read_cluster_file(out, size, with_frame_numbers=True)
    if list(numbers) != list(range(d.frames)):
        raise AssertionError("the CLI's cluster file does not list every frame")
    _same(f"find_file against the CLI ({size}x{size})", _finder(d, device, cluster_size=size).find_file(d.data_path), want)
    mm = np.load(d.data_path, mmap_mode="r")
    got = np.concatenate(list(_finder(d, device, cluster_size=size).find_iter(mm, chunk=256)))
    _same(f"find_iter(memmap) against the CLI ({size}x{size})", got, want)
    log(f"  ok {device} {size}x{size} against `cluda find --device {device}`")


def check_raw(tmp: pathlib.Path, device: str, cli: str, log=print) -> None:
    """A raw acquisition (written by `cluda gen --raw`): `find(RawFile)`, `find_iter(RawFile)`
    and `find_file(master)` against the CLI's cluster file (header frame numbers)."""
    raw = tmp / "raw"
    raw.mkdir(exist_ok=True)
    # Called more than once on one directory: the set and the cluster file are replaced.
    subprocess.run([cli, "gen", "--out", str(raw), "--raw", "--frames", "300", "--pedestal-frames",
                    "100", "--rows", "400", "--cols", "400", "--seed", "4", "--overwrite"],
                   check=True, capture_output=True)
    out = raw / "c.clust"
    subprocess.run([cli, "find", "--pedestal", str(raw / "pedestal_master_0.json"), "--data",
                    str(raw / "data_master_0.json"), "--device", device, "--out", str(out),
                    "--overwrite"],
                   check=True, capture_output=True)
    want = cluda.read_cluster_file(out)
    if len(want) == 0 or want["frame"].min() < 1:
        raise AssertionError("the raw check needs clusters with header frame numbers from 1")
    _, ped = cluda.RawFile(raw / "pedestal_master_0.json").read()

    def fresh():
        f = cluda.ClusterFinder((400, 400), pedestal_frames=len(ped), device=device)
        f.push_pedestal(ped)
        return f

    master = raw / "data_master_0.json"
    _same("find(RawFile)", fresh().find(cluda.RawFile(master)), want)
    _same("find_iter(RawFile)", np.concatenate(list(fresh().find_iter(cluda.RawFile(master), chunk=70))), want)
    _same("find_file(raw master)", fresh().find_file(master), want)
    log(f"  ok {device} raw acquisition: find, find_iter, find_file against the CLI")


def check_growth(tmp: pathlib.Path, device: str, log=print) -> None:
    """Results large enough to grow the result memory several times (n_sigma 0: clusters
    everywhere), through the engine and through find_iter."""
    d = Data(tmp, 120, shape=(400, 400), pedestal=20, seed=9)
    kw = dict(n_sigma=0.0, cluster_size=9)
    want = _finder(d, "cpu", **kw).find(d.data)
    if want.nbytes < 64 << 20:
        raise AssertionError(f"only {want.nbytes} bytes of results: no growth tested")
    _same("find(array), large results", _finder(d, device, **kw).find(d.data), want)
    chunks = list(_finder(d, device, **kw).find_iter(d.data, chunk=50))
    _chunks("find_iter, large results", chunks, d.frames, 50, want)
    log(f"  ok {device} results of {want.nbytes >> 20} MiB")


def check_early_stop(d: Data, device: str, log=print) -> None:
    """An iteration stopped after one chunk: the finder is refused while it runs, usable
    after; it kept the frames searched ahead, and a new iteration goes on from there."""
    f = _finder(d, device)
    chunk = max(1, d.frames // 10)  # the thread waits, 2 chunks ahead, inside the run
    it = f.find_iter(np.load(d.data_path, mmap_mode="r"), chunk=chunk)
    first = next(it)
    try:
        f.find(d.data[:1])
    except RuntimeError as e:
        if "busy with a find_iter" not in str(e):
            raise
    else:
        raise AssertionError("a call during an iteration was not refused")
    del it
    seen = f.frames_found
    if not chunk <= seen <= d.frames:
        raise AssertionError(f"frames_found {seen} after one chunk of {chunk}")
    rest = np.concatenate(list(f.find_iter(d.data[seen:], chunk=128)))
    want = _finder(d, "cpu").find(d.data)
    _same("first chunk of a stopped iteration", first, want[want["frame"] < chunk])
    _same("the frames after a stopped iteration", rest, want[want["frame"] >= seen])
    log(f"  ok {device} an iteration stopped after 1 chunk ({seen} frames searched)")


def many_inputs(tmp: pathlib.Path, cli: str) -> tuple:
    """Inputs for `find_files` (written by `cluda gen`, 40 x 48 frames): `.npy` stacks and a
    raw acquisition, two inputs called `data.npy`, and failing ones in the middle (missing,
    another frame shape, a `.npy` cut short). Returns `(pedestal, inputs, good)`, `good` the
    inputs that are found."""
    def gen(out, frames, seed, *extra, rows=40):
        subprocess.run([cli, "gen", "--out", str(out), "--frames", str(frames), "--pedestal-frames",
                        "50", "--rows", str(rows), "--cols", "48", "--seed", str(seed), *extra],
                       check=True, capture_output=True)

    many = tmp / "many"
    if not (many / "c" / "data.npy").exists():
        gen(many / "a", 30, 1)
        gen(many / "b", 25, 2, "--raw")
        gen(many / "c", 20, 3)
        gen(many / "w", 5, 4, rows=30)
        whole = (many / "c" / "data.npy").read_bytes()
        (many / "trunc.npy").write_bytes(whole[:-1000])
    good = [many / "a" / "data.npy", many / "b" / "data_master_0.json", many / "c" / "data.npy"]
    inputs = [good[0], many / "missing.npy", good[1], many / "w" / "data.npy", many / "trunc.npy",
              good[2]]
    return many / "a" / "pedestal.npy", inputs, good


def check_many_outputs(tmp: pathlib.Path, cli: str, pedestal, inputs, good, out_dir, rows) -> None:
    """`find_files`-like summaries `rows` and the files in `out_dir` against the CLI: every good
    input's cluster file byte-identical to `cluda find --out` of it alone (on the CPU), named
    as `cluda find --out-dir` names it, no other file; every other input failed, named."""
    if [r["input"] for r in rows] != [os.fspath(p) for p in inputs]:
        raise AssertionError(f"summaries for {[r['input'] for r in rows]}, inputs {inputs}")
    want_dir = tmp / f"cli-{out_dir.name}"
    res = subprocess.run([cli, "find", "--pedestal", str(pedestal), "--data", *map(str, inputs),
                          "--out-dir", str(want_dir), "--device", "cpu"], capture_output=True, text=True)
    if res.returncode != 1 or "failed=3" not in res.stdout:
        raise AssertionError(f"the CLI's many-input run: {res.returncode} {res.stdout} {res.stderr}")
    names = sorted(p.name for p in out_dir.iterdir())
    if names != sorted(p.name for p in want_dir.iterdir()):
        raise AssertionError(f"{out_dir} holds {names}, the CLI wrote {sorted(p.name for p in want_dir.iterdir())}")
    for r in rows:
        if pathlib.Path(r["input"]) not in good:
            if r["error"] is None or r["output"] is not None:
                raise AssertionError(f"{r['input']} should have failed: {r}")
            if pathlib.Path(r["input"]).name not in r["error"]:
                raise AssertionError(f"the error does not name its input: {r}")
            continue
        if r["error"] is not None:
            raise AssertionError(f"{r['input']}: {r['error']}")
        out = pathlib.Path(r["output"])
        if out.parent != out_dir:
            raise AssertionError(f"{out} is not in {out_dir}")
        single = tmp / "single.clust"
        single.unlink(missing_ok=True)  # the CLI replaces no file
        subprocess.run([cli, "find", "--pedestal", str(pedestal), "--data", r["input"], "--out",
                        str(single), "--device", "cpu"], check=True, capture_output=True)
        if out.read_bytes() != single.read_bytes():
            raise AssertionError(f"{out} differs from `cluda find --out` of {r['input']} alone")
        if (want_dir / out.name).read_bytes() != out.read_bytes():
            raise AssertionError(f"{out} differs from the CLI's file of that name")
        clusters = cluda.read_cluster_file(out, with_frame_numbers=True)
        if (r["clusters"], r["frames"]) != (len(clusters[0]), len(clusters[1])) or r["frames"] == 0:
            raise AssertionError(f"summary {r} against the file's {len(clusters[0])} clusters")


def check_find_files(tmp: pathlib.Path, device: str, cli: str, log=print) -> None:
    """`cluda.find_files` on `device` against the CLI (`check_many_outputs`)."""
    pedestal, inputs, good = many_inputs(tmp, cli)
    out_dir = tmp / f"find-files-{device}"
    rows = cluda.find_files(inputs, pedestal, out_dir, device=device)
    check_many_outputs(tmp, cli, pedestal, inputs, good, out_dir, rows)
    log(f"  ok {device} find_files: {len(good)} inputs as `cluda find --out-dir`, 3 failures named")


def _cli(cli: str, *args, ok=(0,)) -> subprocess.CompletedProcess:
    res = subprocess.run([cli, *map(str, args)], capture_output=True, text=True)
    if res.returncode not in ok:
        raise AssertionError(f"cluda {' '.join(map(str, args))}: {res.returncode} {res.stderr}")
    return res


def check_image_photons(tmp: pathlib.Path, device: str, cli: str, log=print) -> None:
    """`cluda.image(..., photons=True)` on `device` over the inputs of `many_inputs` (three
    failing in the middle) against `cluda image` on the CPU: the image equal to `--out`'s,
    each good input's photon array byte-identical to the rows `--photons` writes for it
    alone, None for a failed one (named in the summary); plain, with a mask array and an
    energy window (counted on the device on a GPU), with a gain map and a mask given as
    files, and photon lists only (`subpixels=None`)."""
    pedestal, inputs, good = many_inputs(tmp, cli)
    work = tmp / f"image-{device}"
    work.mkdir(exist_ok=True)
    cube = work / "cube.npz"
    _cli(cli, "eta", "--pedestal", pedestal, "--data", *good, "--out", cube, "--device", "cpu",
         "--overwrite")
    rng = np.random.default_rng(5)
    mask = rng.random((40, 48)) < 0.05
    gain = rng.uniform(0.8, 1.25, (40, 48))
    np.save(work / "mask.npy", mask)
    np.save(work / "gain.npy", gain)
    _, plain, _ = cluda.image(inputs, pedestal, cube, subpixels=None, photons=True, device="cpu")
    energies = np.concatenate([p["energy"] for p in plain if p is not None])
    lo, hi = (float(np.round(q)) for q in np.percentile(energies, [20, 80]))
    variants = [
        ("plain", {}, []),
        ("mask-window", {"mask": mask, "energy_window": (lo, hi)},
         ["--mask", work / "mask.npy", "--energy-window", f"{lo}:{hi}"]),
        ("gain-mask-files", {"gain": work / "gain.npy", "mask": work / "mask.npy"},
         ["--gain", work / "gain.npy", "--mask", work / "mask.npy"]),
    ]
    for name, kw, flags in variants:
        img, lists, summary = cluda.image(inputs, pedestal, cube, subpixels=3, photons=True,
                                          device=device, **kw)
        out = work / f"{name}.npy"
        # The command refuses a missing input up front; it counts the others.
        res = _cli(cli, "image", "--pedestal", pedestal, "--data",
                   *[i for i in inputs if i.exists()], "--eta", cube,
                   "--subpixels", 3, "--out", out, "--device", "cpu", "--overwrite", *flags,
                   ok=(1,))
        _same(f"{name}: the image", img, np.load(out))
        if "gain" not in kw and device == "gpu" and summary["counted_on"] != "device":
            raise AssertionError(f"{name}: counted on {summary['counted_on']}, not the device")
        failed = {f for f, _ in summary["failed"]}
        if len(lists) != len(inputs) or len(failed) != len(inputs) - len(good):
            raise AssertionError(f"{name}: {len(lists)} lists, failed {failed}: {res.stdout}")
        rows = 0
        for k, path in enumerate(inputs):
            if path not in good:
                if lists[k] is not None or os.fspath(path) not in failed:
                    raise AssertionError(f"{name}: {path} should have failed: {summary}")
                continue
            one = work / f"{name}-{k}.photons.npy"
            _cli(cli, "image", "--pedestal", pedestal, "--data", path, "--eta", cube, "--photons",
                 one, "--device", "cpu", "--overwrite", *flags)
            want = np.load(one)
            got = lists[k]
            if got.dtype != want.dtype or got.dtype != cluda.PHOTON_LIST_DTYPE:
                raise AssertionError(f"{name}: dtype {got.dtype}, the file's {want.dtype}")
            if got.tobytes() != want.tobytes():
                raise AssertionError(f"{name}: photons of {path} differ from `--photons`'s "
                                     f"({len(got)} rows, the file {len(want)})")
            rows += len(got)
        if rows != summary["clusters"] or rows == 0:
            raise AssertionError(f"{name}: {rows} photon rows, summary {summary}")
        if name == "mask-window" and not (summary["masked"] and summary["outside_window"]):
            raise AssertionError(f"{name}: nothing masked or outside the window: {summary}")
    none, lists, _ = cluda.image(inputs, pedestal, cube, subpixels=None, photons=True,
                                 device=device)
    if none is not None:
        raise AssertionError("subpixels=None made an image")
    for k, (a, b) in enumerate(zip(lists, plain)):
        if (a is None) != (b is None) or (a is not None and a.tobytes() != b.tobytes()):
            raise AssertionError(f"photons only: input {k} differs from the CPU's")
    log(f"  ok {device} image photons: {len(good)} inputs as `cluda image --photons`, "
        f"plain, mask+window, gain+mask files, photons only; 3 failures named")


def run_all(tmp: pathlib.Path, device: str = "gpu", cli=None, frames: int = 700, log=print,
            sizes=SIZES, shape=(400, 400)) -> tuple:
    """Runs every check; returns how many ran and the failures as (name, message)."""
    failures, ran = [], []

    def attempt(name, fn, *a, **kw):
        ran.append(name)
        try:
            fn(*a, log=log, **kw)
        except Exception as e:  # noqa: BLE001 - every failure is reported, then the rest run
            failures.append((name, f"{type(e).__name__}: {e}"))
            log(f"  FAIL {name}: {type(e).__name__}: {e}")

    d = Data(tmp, frames, shape=shape)
    for size in sizes:
        attempt(f"paths {size}x{size}", check_paths, d, device, size)
        if cli:
            attempt(f"cli {size}x{size}", check_cli, d, device, size, cli)
    attempt("paths 3x3 f32 frozen", check_paths, d, device, 3, precision="f32", threshold="frozen")
    attempt("paths 5x5 small frames", check_paths, Data(tmp, 90, shape=(37, 53), pedestal=30), device, 5)
    attempt("growth", check_growth, tmp, device)
    attempt("early stop", check_early_stop, d, device)
    if cli:
        attempt("raw", check_raw, tmp, device, cli)
        attempt("find_files", check_find_files, tmp, device, cli)
        attempt("image photons", check_image_photons, tmp, device, cli)
    return len(ran), failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=os.environ.get("CLUDA_BIN"),
                    help="the cluda binary, for the CLI comparisons (default $CLUDA_BIN; none: skipped)")
    ap.add_argument("--device", default="gpu", help="gpu (default) or cpu")
    ap.add_argument("--frames", type=int, default=700, help="data frames of 400x400 (default 700)")
    ap.add_argument("--require-gpu", action="store_true", help="exit 2 instead of 0 without a GPU")
    args = ap.parse_args()
    if args.device == "gpu" and not gpu_available():
        print("SKIP: no CUDA GPU here (cluda.NoGpuError)")
        return 2 if args.require_gpu else 0
    if not args.cli:
        print("note: no --cli given: the comparisons with `cluda find` and the raw check are skipped")
    with tempfile.TemporaryDirectory(prefix="cluda-gpu-check-") as tmp:
        t = time.perf_counter()
        ran, failures = run_all(pathlib.Path(tmp), args.device, args.cli, args.frames)
    for name, msg in failures:
        print(f"FAILED {name}: {msg}")
    print(f"gpu_check on {args.device}, {time.perf_counter() - t:.1f} s, cluda from {cluda.__file__}")
    print(f"{ran - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
