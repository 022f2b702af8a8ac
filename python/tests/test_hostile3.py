"""The third hostile round (issue 32) from Python: no interpreter abort or crash from a huge
view, an unaligned array or an array changed during ``find_iter``; ``write_cluster_file``
refuses an existing file unless ``overwrite=True``; ``threads`` must be a whole number.

Cases that crashed the interpreter before (abort, segmentation fault, bus error) run in a
child interpreter, so that a crash fails the test instead of ending the test run."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cluda


def run_child(code: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter; returns its result (a crash is a negative code)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def rows(n_frames=4, per_frame=2):
    r = np.zeros(n_frames * per_frame, dtype=cluda.cluster_dtype(3))
    r["frame"] = np.repeat(np.arange(n_frames, dtype=np.int32), per_frame)
    return r


def test_write_cluster_file_refuses_an_existing_file(tmp_path):
    p = tmp_path / "c.clust"
    cluda.write_cluster_file(p, rows())
    before = p.read_bytes()
    # Another cluster file of the same size is not replaced either (it was, silently).
    with pytest.raises(FileExistsError, match=r"c\.clust: exists.*overwrite=True"):
        cluda.write_cluster_file(p, rows(2))
    assert p.read_bytes() == before
    # A dangling symlink is a file there too.
    link = tmp_path / "l.clust"
    os.symlink(tmp_path / "nowhere", link)
    with pytest.raises(FileExistsError):
        cluda.write_cluster_file(link, rows())
    assert os.path.islink(link) and not (tmp_path / "nowhere").exists()
    # overwrite=True replaces; append=True adds.
    cluda.write_cluster_file(p, rows(2), overwrite=True)
    assert len(cluda.read_cluster_file(p, 3)) == 4
    cluda.write_cluster_file(p, rows(2)[2:], frames=[1], append=True)
    assert len(cluda.read_cluster_file(p, 3)) == 6
    assert sorted(os.listdir(tmp_path)) == ["c.clust", "l.clust"]


@pytest.mark.parametrize("bad", [True, False, np.True_, 2.0, "4"])
def test_threads_must_be_a_whole_number(bad, tmp_path):
    with pytest.raises(TypeError, match="threads"):
        cluda.ClusterFinder((16, 16), device="cpu", pedestal_frames=2, threads=bad)
    with pytest.raises(TypeError, match="threads"):
        cluda.find_files([tmp_path / "d.npy"], tmp_path / "p.npy", tmp_path / "o", threads=bad)


def test_threads_as_a_number_still_work():
    f = cluda.ClusterFinder((16, 16), device="cpu", pedestal_frames=2, threads=np.int64(2))
    assert f.device == "cpu"
    with pytest.raises(ValueError, match="threads"):
        cluda.ClusterFinder((16, 16), device="cpu", pedestal_frames=2, threads=-1)


def test_an_unaligned_array_is_found_as_its_aligned_copy(tmp_path):
    dark = cluda.generate(20, 0, False, shape=(24, 36))
    data = cluda.generate(6, 20, True, shape=(24, 36))

    def unaligned(a):
        buf = bytearray(a.nbytes + 1)
        u = np.frombuffer(buf, np.uint16, count=a.size, offset=1).reshape(a.shape)
        u[...] = a
        assert u.flags.c_contiguous and not u.flags.aligned
        return u

    def found(dark, data):
        f = cluda.ClusterFinder((24, 36), device="cpu", pedestal_frames=20)
        f.push_pedestal(dark)
        return f.find(data)

    want = found(dark, data)
    assert len(want) > 0
    np.testing.assert_array_equal(found(unaligned(dark), unaligned(data)), want)
    f = cluda.ClusterFinder((24, 36), device="cpu", pedestal_frames=20)
    f.push_pedestal(dark)
    got = np.concatenate(list(f.find_iter(unaligned(data), chunk=4)))
    np.testing.assert_array_equal(got, want)
    # Unaligned cluster rows are written as their aligned copy.
    r = rows()
    buf = bytearray(r.nbytes + 1)
    u = np.frombuffer(buf, r.dtype, count=len(r), offset=1)
    u[...] = r
    assert not u.view(np.uint32).flags.aligned
    cluda.write_cluster_file(tmp_path / "a.clust", r)
    cluda.write_cluster_file(tmp_path / "u.clust", u)
    assert (tmp_path / "a.clust").read_bytes() == (tmp_path / "u.clust").read_bytes()


def test_a_huge_broadcast_view_is_a_memory_error_and_find_iter_takes_chunks():
    r = run_child(
        """
        import numpy as np, cluda, time
        frame = cluda.generate(1, 0, False, shape=(400, 400))[0]
        f = cluda.ClusterFinder((400, 400), device="cpu", pedestal_frames=2)
        f.push_pedestal(cluda.generate(2, 0, False, shape=(400, 400)))
        view = np.broadcast_to(frame, (10**6, 400, 400))
        try:
            f.find(view)
            print("found?!")
        except MemoryError as e:
            print("MemoryError", e)
        t = time.time()
        it = f.find_iter(view, chunk=10)
        first = next(it)
        it.close()
        print("first chunk", len(first), round(time.time() - t, 1))
        """
    )
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "MemoryError" in r.stdout, r.stdout
    assert "first chunk" in r.stdout, r.stdout


def test_resizing_the_array_during_find_iter_ends_it_safely():
    r = run_child(
        """
        import numpy as np, cluda
        f = cluda.ClusterFinder((256, 256), device="cpu", pedestal_frames=2)
        f.push_pedestal(np.zeros((2, 256, 256), np.uint16))
        frames = np.zeros((4000, 256, 256), np.uint16)
        chunks = 0
        for c in f.find_iter(frames, chunk=100):
            chunks += 1
            if chunks == 1:
                frames.resize((1, 256, 256), refcheck=False)
                frames[...] = 7  # writing into it is harmless too
        print("chunks", chunks, "found", f.frames_found)
        g = cluda.ClusterFinder((256, 256), device="cpu", pedestal_frames=2)
        g.push_pedestal(np.zeros((2, 256, 256), np.uint16))
        frames = np.zeros((50, 256, 256), np.uint16)
        it = g.find_iter(frames, chunk=10)
        next(it)
        frames.resize((50, 128, 512), refcheck=False)
        try:
            list(it)
            print("no error?!")
        except ValueError as e:
            print("ValueError", e)
        """
    )
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "chunks" in r.stdout and "ValueError frames changed shape" in r.stdout, r.stdout


def test_a_mapped_file_that_shrinks_during_find_iter_is_an_error(tmp_path):
    path = tmp_path / "big.npy"
    m = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint16, shape=(2000, 400, 400))
    offset = m.offset
    del m
    r = run_child(
        """
        import os, sys, numpy as np, cluda
        path, offset = sys.argv[1], int(sys.argv[2])
        f = cluda.ClusterFinder((400, 400), device="cpu", pedestal_frames=2)
        f.push_pedestal(np.zeros((2, 400, 400), np.uint16))
        frames = np.load(path, mmap_mode="r")
        it = f.find_iter(frames, chunk=10)
        next(it)
        os.truncate(path, offset + 100 * 400 * 400 * 2)
        try:
            for _ in it:
                pass
            print("no error?!")
        except OSError as e:
            print("OSError", e)
        """,
        str(path),
        str(offset),
    )
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "OSError" in r.stdout and "big.npy" in r.stdout, r.stdout


def test_an_input_truncated_while_mapped_fails_by_name_and_the_others_run(tmp_path):
    """``find_files`` and ``eta_cube`` map ``.npy`` inputs on the CPU: one that another program
    truncates while it is found read a SIGBUS in the map, which ended the interpreter (exit
    -7). Now that input fails with an error naming the file, no temporary file is left, and
    the next input is still found."""
    r = run_child(
        """
        import json, os, sys, threading, time
        import numpy as np, cluda

        d = sys.argv[1]

        def sparse(name, frames):
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                np.lib.format.write_array_header_1_0(
                    f, {"descr": "<u2", "fortran_order": False, "shape": (frames, 400, 400)}
                )
                off = f.tell()
            os.truncate(p, off + frames * 400 * 400 * 2)
            return p

        ped, small = sparse("ped.npy", 4), sparse("small.npy", 3)
        out = os.path.join(d, "out")

        def truncate_when(ready):
            t = time.time()
            while not ready() and time.time() - t < 60:
                time.sleep(0.01)
            time.sleep(0.3)
            os.truncate(os.path.join(d, "big.npy"), 4096)

        def started():
            return os.path.isdir(out) and any(n.startswith(".big.clust.") for n in os.listdir(out))

        results = {}
        for what in ["find_files", "eta_cube"]:
            big = sparse("big.npy", 200_000)
            t0 = time.time()
            ready = started if what == "find_files" else (lambda: time.time() - t0 > 1.0)
            th = threading.Thread(target=truncate_when, args=(ready,))
            th.start()
            if what == "find_files":
                rows = cluda.find_files([big, small], ped, out, device="cpu", threads=1)
                results[what] = {"rows": rows, "out": sorted(os.listdir(out))}
            else:
                _, summary = cluda.eta_cube([big, small], ped, device="cpu", threads=1)
                results[what] = {"failed": summary["failed"], "frames": summary["frames"]}
            th.join()
        print(json.dumps(results))
        """,
        str(tmp_path),
    )
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    import json

    got = json.loads(r.stdout.strip().splitlines()[-1])
    big, small = got["find_files"]["rows"]
    assert big["output"] is None and "big.npy" in big["error"], big
    assert "shrank while it was mapped" in big["error"], big
    assert small["error"] is None and small["frames"] == 3, small
    assert got["find_files"]["out"] == ["small.clust"]
    failed = got["eta_cube"]["failed"]
    assert len(failed) == 1 and failed[0][0].endswith("big.npy"), failed
    assert "shrank while it was mapped" in failed[0][1], failed
