"""Files and generators: .npy frames, raw acquisitions, cluster files, the generator, the
matcher; each against the CLI or numpy."""

import numpy as np

import cluda


def test_npy_frames_like_numpy(tmp_path):
    a = np.random.default_rng(1).integers(0, 65535, size=(3, 5, 7), dtype=np.uint16)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", a[0])  # a 2-D file is one frame
    got = cluda.read_npy_frames(tmp_path / "a.npy")
    assert got.dtype == np.uint16 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, a)
    np.testing.assert_array_equal(cluda.read_npy_frames(str(tmp_path / "b.npy")), a[:1])


def test_generator_is_deterministic():
    a = cluda.generate(4, 10, True, shape=(30, 40), seed=3)
    assert a.shape == (4, 30, 40) and a.dtype == np.uint16
    np.testing.assert_array_equal(a[2:], cluda.generate(2, 12, True, shape=(30, 40), seed=3))
    assert not np.array_equal(a, cluda.generate(4, 10, True, shape=(30, 40), seed=4))
    dark = cluda.generate(4, 10, False, shape=(30, 40), seed=3)
    assert dark.max() < a.max() and 4000 < dark.mean() < 5200


def test_raw_file_same_as_cli(tmp_path, cli):
    cli("gen", "--out", tmp_path, "--raw", "--frames", 12, "--pedestal-frames", 20,
        "--rows", 400, "--cols", 400, "--seed", 5)
    ped_raw = cluda.RawFile(tmp_path / "pedestal_master_0.json")
    with cluda.RawFile(tmp_path / "data_master_0.json") as raw:
        assert (raw.rows, raw.cols, raw.total_frames, raw.frames_on_disk) == (400, 400, 12, 12)
        numbers, frames = raw.read_n(5)
        assert numbers.dtype == np.uint64 and frames.shape == (5, 400, 400)
        number, one = raw.read_frame()
        rest = list(raw)
        assert len(raw.read_n(3)[0]) == 0
        report = raw.report()
    np.testing.assert_array_equal(frames, cluda.generate(5, 20, True, seed=5))
    np.testing.assert_array_equal(one, cluda.generate(1, 25, True, seed=5)[0])
    assert list(numbers) == [1, 2, 3, 4, 5] and number == 6
    assert [list(n) for n, _ in rest] == [list(range(7, 13))]
    assert report["clean"] and report["frames_delivered"] == 12 and report["missing"] == []
    assert "12 frames delivered" in report["summary"]
    assert "cluda.RawFile(" in repr(ped_raw)

    pnum, ped = ped_raw.read()
    assert len(pnum) == 20
    out = tmp_path / "c.clust"
    cli("find", "--pedestal", tmp_path / "pedestal_master_0.json", "--data",
        tmp_path / "data_master_0.json", "--device", "cpu", "--out", out)
    expected, file_numbers = cluda.read_cluster_file(out, with_frame_numbers=True)
    f = cluda.ClusterFinder((400, 400), pedestal_frames=len(ped), device="cpu")
    f.push_pedestal(ped)
    data = cluda.RawFile(tmp_path / "data_master_0.json")
    data.chunk_size = 5
    got = []
    for nums, block in data:
        got.append(f.find(block, first_frame=int(nums[0])))
    got = np.concatenate(got)
    np.testing.assert_array_equal(got, expected)
    assert list(file_numbers) == list(range(1, 13))


def test_raw_file_reports_missing_frames(tmp_path, cli):
    cli("gen", "--out", tmp_path, "--raw", "--frames", 6, "--pedestal-frames", 1,
        "--rows", 400, "--cols", 400)
    # Drop frame 3's record from the data file: frame numbers 1, 2, 4, 5, 6 remain.
    data = sorted(tmp_path.glob("data_d0_f0_*.raw"))[0]
    raw = data.read_bytes()
    rec = len(raw) // 6
    data.write_bytes(raw[: 2 * rec] + raw[3 * rec :])
    f = cluda.RawFile(tmp_path / "data_master_0.json")
    numbers, frames = f.read()
    assert list(numbers) == [1, 2, 4, 5, 6] and frames.shape == (5, 400, 400)
    r = f.report()
    assert not r["clean"] and r["missing"] == [(3, 1)] and r["missing_count"] == 1


def test_cluster_file_round_trip_and_append(tmp_path):
    ped = cluda.generate(10, 0, False, shape=(50, 60))
    data = cluda.generate(6, 10, True, shape=(50, 60))
    for size in (3, 5, 7, 9):
        f = cluda.ClusterFinder((50, 60), cluster_size=size, pedestal_frames=10, device="cpu")
        f.push_pedestal(ped)
        c = f.find(data)
        path = tmp_path / f"{size}.clust"
        cluda.write_cluster_file(path, c, frames=8)  # frames 6 and 7: no clusters
        back, numbers = cluda.read_cluster_file(path, size, with_frame_numbers=True)
        np.testing.assert_array_equal(back, c)
        assert list(numbers) == list(range(8))
        # Streaming: chunk by chunk with append gives the same file.
        f2 = cluda.ClusterFinder((50, 60), cluster_size=size, pedestal_frames=10, device="cpu")
        f2.push_pedestal(ped)
        streamed = tmp_path / f"{size}-stream.clust"
        for i, chunk in enumerate(f2.find_iter(data, chunk=4)):
            start = 4 * i
            cluda.write_cluster_file(streamed, chunk, frames=range(start, start + min(4, 6 - start)),
                                     append=i > 0)
        cluda.write_cluster_file(streamed, c[:0], frames=[6, 7], append=True)
        assert streamed.read_bytes() == path.read_bytes()
        # Default frames: only those with clusters (replacing the file: overwrite=True).
        cluda.write_cluster_file(path, c, overwrite=True)
        assert list(cluda.read_cluster_file(path, size, True)[1]) == sorted(set(c["frame"]))
    # Each record after `frame` is aare's {u16 x, u16 y, i32 data[N]}.
    raw = (tmp_path / "3.clust").read_bytes()
    n0 = np.frombuffer(raw[4:8], "<u4")[0]
    first = np.frombuffer(raw[8 : 8 + 40], dtype=[("x", "<u2"), ("y", "<u2"), ("data", "<i4", (9,))])
    assert n0 == np.count_nonzero(c3 := cluda.read_cluster_file(tmp_path / "3.clust")["frame"] == 0)
    assert c3.any()
    back3 = cluda.read_cluster_file(tmp_path / "3.clust")
    assert first["x"][0] == back3["x"][0] and np.array_equal(first["data"][0], back3["data"][0])


def test_match_nearest_brute_force_and_cli(tmp_path, cli):
    rng = np.random.default_rng(9)
    lhs = rng.standard_normal((50, 128)).astype(np.float32)
    rhs = rng.standard_normal((70, 128)).astype(np.float32)
    idx, dist = cluda.match_nearest(lhs, rhs)
    d = ((lhs[:, None, :].astype(np.float64) - rhs[None, :, :]) ** 2).sum(axis=2)
    np.testing.assert_array_equal(idx, d.argmin(axis=1))
    np.testing.assert_allclose(dist, d.min(axis=1), rtol=1e-5)
    assert idx.dtype == np.uint32 and dist.dtype == np.float32
    np.save(tmp_path / "a.npy", lhs)
    np.save(tmp_path / "b.npy", rhs)
    cli("match", "--lhs", tmp_path / "a.npy", "--rhs", tmp_path / "b.npy", "--version", "cpu",
        "--out", tmp_path / "m.npy")
    m = np.load(tmp_path / "m.npy")
    np.testing.assert_array_equal(m[:, 0], idx)
    np.testing.assert_array_equal(m[:, 1], dist.astype(np.float64))
    # Strided input is copied and gives the same answer.
    wide = np.zeros((50, 256), np.float32)
    wide[:, ::2] = lhs
    np.testing.assert_array_equal(cluda.match_nearest(wide[:, ::2], rhs)[0], idx)
