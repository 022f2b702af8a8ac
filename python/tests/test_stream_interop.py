"""Interoperability of `cluda stream` with a publisher written independently of `cluda replay`:
pyzmq, with the headers built from slsDetectorPackage's documented field list ("ZMQ: Json
Header Format": every field, json.dumps's own spacing and key order, shape as [x, y]), two parts
per frame and a one-part `"data": 0` header to end an acquisition, as slsReceiver sends them.

The first acquisition's cluster file must be byte for byte what `cluda find` writes for the same
frames saved as .npy; the second (fileIndex 1, frame numbers from 1 as a detector gives them,
one frame missing, one incomplete) must be counted as such and named from fname/fileIndex."""

import json
import pathlib
import socket
import subprocess
import time

import numpy as np
import pytest

from conftest import cli_path, random_frames

zmq = pytest.importorskip("zmq")

ROWS, COLS = 30, 50  # not square: the header's shape is [x, y] = [COLS, ROWS]


def header(frame_number, frame_index, file_index, fname, total, complete=1, data=1):
    """A header with every field of the documented format, in the documented types."""
    size = ROWS * COLS * 2
    return {
        "jsonversion": 4,
        "bitmode": 16,
        "fileIndex": file_index,
        "detshape": [1, 1],
        "shape": [COLS, ROWS],
        "size": size,
        "acqIndex": frame_number,
        "frameIndex": frame_index,
        "progress": 100.0 * (frame_index + 1) / total,
        "fname": fname,
        "data": data,
        "completeImage": complete,
        "frameNumber": frame_number,
        "expLength": 0,
        "packetNumber": 0,
        "detSpec1": 0,
        "timestamp": 10_000 * frame_number,
        "modId": 0,
        "row": 0,
        "column": 0,
        "detSpec2": 0,
        "detSpec3": 0,
        "detSpec4": 0,
        "detType": 5,
        "version": 2,
        "flipRows": 0,
        "quad": 0,
        "addJsonHeader": {"sample": "interop"},
    }


def end_header():
    """slsReceiver's end-of-acquisition ("dummy") header: data 0, the rest at defaults."""
    h = header(0, 0, 0, "", 1, complete=0, data=0)
    h["shape"] = [0, 0]
    h["size"] = 0
    return h


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_independent_publisher_is_read_like_slsreceiver(tmp_path, cli):
    exe = cli_path()
    rng = np.random.default_rng(11)
    dark = random_frames(rng, 40, ROWS, COLS, photons=0.0)
    data = random_frames(rng, 60, ROWS, COLS)
    np.save(tmp_path / "dark.npy", dark)
    np.save(tmp_path / "data.npy", data)
    port = free_port()
    out = tmp_path / "out"
    stream = subprocess.Popen(
        [str(exe), "stream", "--zmq", f"tcp://127.0.0.1:{port}", "--out-dir", str(out),
         "--pedestal", str(tmp_path / "dark.npy"), "--device", "cpu", "--acquisitions", "2",
         "--on-full", "block"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ctx = zmq.Context()
        pub = ctx.socket(zmq.XPUB)  # a PUB on the wire that also sees the subscription
        pub.bind(f"tcp://127.0.0.1:{port}")
        assert pub.poll(30_000), "cluda stream did not subscribe"
        assert pub.recv()[:1] == b"\x01"

        def send(h, frame):
            pub.send(json.dumps(h).encode(), zmq.SNDMORE)
            pub.send(np.ascontiguousarray(frame, dtype="<u2").tobytes())

        # Acquisition 1: frames numbered 0.. (as find numbers a .npy).
        for i, f in enumerate(data):
            send(header(i, i, 0, "/data/beamtime/run", len(data)), f)
        pub.send(json.dumps(end_header()).encode())
        # Acquisition 2: frame numbers from 1, frame 6 never sent, frame 9 incomplete.
        for i, f in enumerate(data[:20]):
            n = i + 1
            if n == 6:
                continue
            send(header(n, i, 1, "/data/beamtime/interop", 20, complete=0 if n == 9 else 1), f)
        pub.send(json.dumps(end_header()).encode())
        stdout, stderr = stream.communicate(timeout=120)
    finally:
        if stream.poll() is None:
            stream.kill()
        ctx.destroy(linger=0)
    assert stream.returncode == 0, stderr
    lines = [dict(kv.split("=", 1) for kv in l.split()) for l in stdout.splitlines()
             if l.startswith("acquisition=")]
    assert len(lines) == 2, stdout
    a, b = lines
    assert a["frames"] == "60" and a["end"] == "end", stdout
    for k in ("missing", "incomplete", "mismatched", "malformed", "dropped", "restarts"):
        assert a[k] == "0", (k, stderr)
    assert pathlib.Path(a["file"]) == out / "run_0.clust"
    cli("find", "--pedestal", tmp_path / "dark.npy", "--data", tmp_path / "data.npy",
        "--device", "cpu", "--out", tmp_path / "find.clust")
    assert (out / "run_0.clust").read_bytes() == (tmp_path / "find.clust").read_bytes()

    assert pathlib.Path(b["file"]) == out / "interop_1.clust"
    assert (b["frames"], b["missing"], b["incomplete"], b["malformed"]) == ("18", "1", "1", "0"), stdout
    assert "frame 6 missing" in stderr, stderr
    assert "frame 9 is incomplete: completeImage 0" in stderr, stderr
    assert frame_numbers(out / "interop_1.clust", 3) == [n for n in range(1, 21) if n not in (6, 9)]


def frame_numbers(path, side):
    """The frame numbers of an aare cluster file (i32 frame, u32 count, count records of
    u16 x, u16 y, side*side i32), read here independently of cluda."""
    raw = pathlib.Path(path).read_bytes()
    numbers, at, record = [], 0, 4 + 4 * side * side
    while at < len(raw):
        frame, count = np.frombuffer(raw, dtype="<i4", count=2, offset=at)
        numbers.append(int(frame))
        at += 8 + int(np.uint32(count)) * record
    assert at == len(raw)
    return numbers


def test_independent_publisher_of_four_parts(tmp_path, cli):
    """Each frame as four parts on four endpoints (a 2 x 2 grid of modules, `detshape` [2, 2],
    the bottom row's parts with `flipRows` 1, sent with their rows last first), from pyzmq:
    the cluster file is byte for byte `cluda find`'s on the whole frames; a frame whose third
    part never comes is reported incomplete, naming that part."""
    exe = cli_path()
    rng = np.random.default_rng(12)
    dark = random_frames(rng, 40, ROWS, COLS, photons=0.0)
    data = random_frames(rng, 30, ROWS, COLS)
    np.save(tmp_path / "dark.npy", dark)
    np.save(tmp_path / "data.npy", data)
    ports = [free_port() for _ in range(4)]
    out = tmp_path / "out"
    args = [str(exe), "stream", "--out-dir", str(out), "--pedestal", str(tmp_path / "dark.npy"),
            "--device", "cpu", "--acquisitions", "2", "--on-full", "block"]
    for p in ports:
        args += ["--zmq", f"tcp://127.0.0.1:{p}"]
    stream = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r, c = ROWS // 2, COLS // 2
    try:
        ctx = zmq.Context()
        pubs = []
        for p in ports:
            pub = ctx.socket(zmq.XPUB)
            pub.bind(f"tcp://127.0.0.1:{p}")
            assert pub.poll(30_000), "cluda stream did not subscribe"
            assert pub.recv()[:1] == b"\x01"
            pubs.append(pub)

        def send(k, n, i, file_index, fname, total, frame):
            row, col = divmod(k, 2)
            h = header(n, i, file_index, fname, total)
            part = frame[row * r:(row + 1) * r, col * c:(col + 1) * c]
            flip = row == 1
            if flip:
                part = part[::-1]
            h.update({"detshape": [2, 2], "shape": [c, r], "size": r * c * 2, "row": row,
                      "column": col, "flipRows": int(flip)})
            pubs[k].send(json.dumps(h).encode(), zmq.SNDMORE)
            pubs[k].send(np.ascontiguousarray(part, dtype="<u2").tobytes())

        for i, f in enumerate(data):
            for k in range(4):
                send(k, i, i, 0, "run", len(data), f)
        for k in range(4):
            pubs[k].send(json.dumps(end_header()).encode())
        # Acquisition 2: frame 4's third part never sent.
        for i, f in enumerate(data[:10]):
            for k in range(4):
                if not (i == 4 and k == 2):
                    send(k, i, i, 1, "parts", 10, f)
        for k in range(4):
            pubs[k].send(json.dumps(end_header()).encode())
        stdout, stderr = stream.communicate(timeout=120)
    finally:
        if stream.poll() is None:
            stream.kill()
        ctx.destroy(linger=0)
    assert stream.returncode == 0, stderr
    lines = [dict(kv.split("=", 1) for kv in l.split()) for l in stdout.splitlines()
             if l.startswith("acquisition=")]
    assert len(lines) == 2, stdout
    a, b = lines
    assert a["frames"] == "30" and a["end"] == "end", stdout
    for k in ("missing", "incomplete", "mismatched", "malformed", "dropped", "restarts", "late"):
        assert a[k] == "0", (k, stderr)
    cli("find", "--pedestal", tmp_path / "dark.npy", "--data", tmp_path / "data.npy",
        "--device", "cpu", "--out", tmp_path / "find.clust")
    assert (out / "run_0.clust").read_bytes() == (tmp_path / "find.clust").read_bytes()
    assert (b["frames"], b["incomplete"], b["missing"]) == ("9", "1", "0"), stdout
    assert f"frame 4: part 3 of 4 (tcp://127.0.0.1:{ports[2]}) never arrived" in stderr, stderr
    assert frame_numbers(out / "parts_1.clust", 3) == [n for n in range(10) if n != 4]
