//! NumPy `.npy` reading and writing: round trips, NumPy's header variants, and a clear error
//! (naming the file) for every kind of bad file.

use std::path::{Path, PathBuf};

use cluda::Error;
use cluda::io::npy::{
    self, NpyFrames, NpyWriter, header_bytes, read_array, read_f32_2d, read_header,
    read_u16_frames, write_array, write_f32_2d, write_u16_3d,
};

/// A `.npy` file with any version, header dict and data bytes (for files cluda would not
/// write itself).
fn raw_npy(version: u8, dict: &str, data: &[u8]) -> Vec<u8> {
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version, 0]);
    let text = format!("{dict}\n");
    if version == 1 {
        out.extend_from_slice(&(text.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(data);
    out
}

fn le_u16(v: &[u16]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn put(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The error's message; it must be a Format error naming `path`.
fn format_err(r: cluda::Result<impl std::fmt::Debug>, path: &Path) -> String {
    match r {
        Err(e @ Error::Format { .. }) => {
            let msg = e.to_string();
            assert!(msg.starts_with(&path.display().to_string()), "{msg}");
            msg
        }
        other => panic!("expected a format error, got {other:?}"),
    }
}

fn ramp(n: usize) -> Vec<u16> {
    (0..n)
        .map(|i| ((i * 2654435761usize) >> 7) as u16)
        .collect()
}

#[test]
fn u16_frames_round_trip_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    let data = ramp(3 * 5 * 7);
    let p = dir.path().join("a.npy");
    write_u16_3d(&p, 3, 5, 7, &data).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let head = header_bytes("<u2", &[3, 5, 7]);
    // What NumPy 2.4's np.save writes (checked there): 20 spare spaces for the first axis to
    // grow, padding to 128 bytes, a newline.
    let mut want =
        b"\x93NUMPY\x01\x00\x76\x00{'descr': '<u2', 'fortran_order': False, 'shape': (3, 5, 7), }"
            .to_vec();
    want.extend_from_slice(&[b' '; 55]);
    want.push(b'\n');
    assert_eq!(head, want);
    assert_eq!(&bytes[..128], &head[..]);
    assert_eq!(&bytes[128..], &le_u16(&data)[..]);

    let a = read_u16_frames(&p).unwrap();
    assert_eq!(a.shape, vec![3, 5, 7]);
    assert_eq!(a.data, data);
    let f = a.as_frames().unwrap();
    assert_eq!((f.len(), f.rows(), f.cols()), (3, 5, 7));
    let h = read_header(&p).unwrap();
    assert_eq!(
        (h.version, h.descr.as_str(), h.fortran_order, h.data_offset),
        ((1, 0), "<u2", false, 128)
    );
}

#[test]
fn two_d_is_one_frame() {
    let dir = tempfile::tempdir().unwrap();
    let data = ramp(4 * 6);
    let p = dir.path().join("f.npy");
    write_array(&p, &[4, 6], &data).unwrap();
    let r = NpyFrames::open(&p).unwrap();
    assert_eq!((r.len(), r.rows(), r.cols()), (1, 4, 6));
    let a = read_u16_frames(&p).unwrap();
    assert_eq!((a.shape, a.data), (vec![1, 4, 6], data));
}

#[test]
fn chunked_reading_equals_whole() {
    let dir = tempfile::tempdir().unwrap();
    let data = ramp(10 * 3 * 4);
    let p = dir.path().join("c.npy");
    write_u16_3d(&p, 10, 3, 4, &data).unwrap();
    let mut r = NpyFrames::open(&p).unwrap();
    let mut all = Vec::new();
    let mut buf = vec![1u16; 999];
    let mut sizes = Vec::new();
    loop {
        let k = r.read_into(3, &mut buf).unwrap();
        assert_eq!(buf.len(), k * 12);
        if k == 0 {
            break;
        }
        sizes.push(k);
        all.extend_from_slice(&buf);
    }
    assert_eq!(sizes, vec![3, 3, 3, 1]);
    assert_eq!(all, data);
    assert_eq!((r.position(), r.remaining()), (10, 0));
    assert!(r.read_chunk(5).unwrap().is_empty());
}

#[test]
fn streaming_writer_checks_count() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("w.npy");
    let mut w = NpyWriter::<u16>::create(&p, &[2, 2, 2]).unwrap();
    w.write(&[1, 2, 3]).unwrap();
    w.write(&[4, 5, 6, 7, 8]).unwrap();
    assert!(
        w.write(&[9])
            .unwrap_err()
            .to_string()
            .contains("more elements than the 8")
    );
    w.finish().unwrap();
    assert_eq!(
        read_u16_frames(&p).unwrap().data,
        (1..=8).collect::<Vec<u16>>()
    );

    let w = NpyWriter::<u16>::create(&p, &[2, 2, 2]).unwrap();
    let msg = w.finish().unwrap_err().to_string();
    assert!(msg.contains("only 0 of the 8 elements"), "{msg}");
    let msg = write_u16_3d(&p, 2, 2, 2, &[0; 7]).unwrap_err().to_string();
    assert!(msg.contains("8 elements"), "{msg}");
}

#[test]
fn f32_and_f64_matrices() {
    let dir = tempfile::tempdir().unwrap();
    let m: Vec<f32> = (0..6 * 128).map(|i| i as f32 * 0.25 - 7.0).collect();
    let p = dir.path().join("d.npy");
    write_f32_2d(&p, 6, 128, &m).unwrap();
    assert!(
        std::fs::read(&p).unwrap()[10..]
            .starts_with(b"{'descr': '<f4', 'fortran_order': False, 'shape': (6, 128), }")
    );
    let a = read_f32_2d(&p).unwrap();
    assert_eq!((a.shape, a.data), (vec![6, 128], m.clone()));

    let q = dir.path().join("e.npy");
    npy::write_f64_2d(&q, 2, 3, &[1.5, -2.0, 3.0, 0.0, 1e300, -0.5]).unwrap();
    let b = read_array::<f64>(&q).unwrap();
    assert_eq!(
        (b.shape, b.data),
        (vec![2, 3], vec![1.5, -2.0, 3.0, 0.0, 1e300, -0.5])
    );

    // A 3-D float32 file is not a matrix; a float32 file is not frames and vice versa.
    let r = dir.path().join("g.npy");
    write_array::<f32>(&r, &[2, 2, 2], &[0.0; 8]).unwrap();
    assert!(
        format_err(read_f32_2d(&r), &r)
            .contains("expected a 2-D array (rows x cols), got a 3-D array of shape (2, 2, 2)")
    );
    let msg = format_err(NpyFrames::open(&r), &r);
    assert!(
        msg.contains("dtype '<f4' is not supported here: expected uint16 ('<u2'"),
        "{msg}"
    );
    let msg = format_err(read_f32_2d(&q), &q);
    assert!(
        msg.contains("dtype '<f8' is not supported here: expected float32"),
        "{msg}"
    );
}

#[test]
fn header_versions_quotes_and_big_endian() {
    let dir = tempfile::tempdir().unwrap();
    let data = [1u16, 2, 0x0102, 0xfffe];
    // Version 2.0 (u32 header length), double quotes, Python 2 longs, no trailing comma.
    let p = put(
        dir.path(),
        "v2.npy",
        &raw_npy(
            2,
            "{\"descr\": \"<u2\", \"fortran_order\": False, \"shape\": (1L, 2L, 2L)}",
            &le_u16(&data),
        ),
    );
    assert_eq!(read_u16_frames(&p).unwrap().data, data);
    assert_eq!(read_header(&p).unwrap().version, (2, 0));
    // Version 3.0 (UTF-8), keys in another order.
    let p = put(
        dir.path(),
        "v3.npy",
        &raw_npy(
            3,
            "{'shape': (2, 2), 'fortran_order': False, 'descr': '<u2', }",
            &le_u16(&data),
        ),
    );
    assert_eq!(read_u16_frames(&p).unwrap().shape, vec![1, 2, 2]);
    // Big-endian uint16 is byte-swapped on reading.
    let be: Vec<u8> = data.iter().flat_map(|x| x.to_be_bytes()).collect();
    let p = put(
        dir.path(),
        "be.npy",
        &raw_npy(
            1,
            "{'descr': '>u2', 'fortran_order': False, 'shape': (1, 2, 2), }",
            &be,
        ),
    );
    assert_eq!(read_u16_frames(&p).unwrap().data, data);
    let bef: Vec<u8> = [1.5f32, -3.25]
        .iter()
        .flat_map(|x| x.to_be_bytes())
        .collect();
    let p = put(
        dir.path(),
        "bef.npy",
        &raw_npy(
            1,
            "{'descr': '>f4', 'fortran_order': False, 'shape': (1, 2), }",
            &bef,
        ),
    );
    assert_eq!(read_f32_2d(&p).unwrap().data, vec![1.5, -3.25]);
}

/// A version 1.0 `.npy` header dict of C-order `<u2` with the shape written `shape`.
fn u2_dict(shape: &str) -> String {
    format!("{{'descr': '<u2', 'fortran_order': False, 'shape': {shape}, }}")
}

/// Bad `.npy` files, each `(file name, bytes, fragment of the error naming it)`: one a line.
#[rustfmt::skip]
fn bad_files() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    // A version 1.0 file of C-order `<u2` with the shape written `shape`, then `body`.
    let u2 = |shape: &str, body: &[u8]| raw_npy(1, &u2_dict(shape), body);
    let eight = le_u16(&[7; 8]);
    vec![
        ("dtype.npy", raw_npy(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2, 2), }", &[0; 16]),
            "dtype '<i4' is not supported here: expected uint16 ('<u2', or '>u2' big-endian)"),
        ("u1.npy", raw_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2, 2), }", &[0; 4]),
            "dtype '|u1' is not supported"),
        ("fortran.npy", raw_npy(1, "{'descr': '<u2', 'fortran_order': True, 'shape': (2, 2, 2), }", &eight),
            "Fortran-order array: cluda reads C-order arrays only"),
        ("4d.npy", u2("(1, 2, 2, 2)", &eight),
            "expected a 3-D array (frames x rows x cols) or a 2-D array (one frame), got a 4-D array of shape (1, 2, 2, 2)"),
        ("1d.npy", u2("(8,)", &eight), "got a 1-D array of shape (8,)"),
        ("0d.npy", u2("()", &eight[..2]), "got a 0-D array of shape ()"),
        ("empty_rows.npy", u2("(3, 0, 4)", &[]), "have no pixels"),
        ("short.npy", u2("(2, 2, 2)", &eight[..15]), "truncated data: shape (2, 2, 2) of uint16 needs 16 bytes after the"),
        ("long.npy", u2("(1, 2, 2)", &eight), "8 bytes after the data that shape (1, 2, 2) of uint16 declares"),
        ("huge.npy", u2("(1000000000000, 400, 400)", &eight),
            "truncated data: shape (1000000000000, 400, 400) of uint16 needs 320000000000000000 bytes"),
        ("overflow.npy", u2("(100000000000, 100000000000, 100000)", &eight), "too large to address"),
        ("magic.npy", b"PK\x03\x04 not numpy at all".to_vec(), "not a NumPy .npy file"),
        ("tiny.npy", b"\x93NUM".to_vec(), "not a NumPy .npy file"),
        ("version.npy", raw_npy(4, &u2_dict("(1, 2, 2)"), &eight), "unsupported .npy format version 4.0"),
        ("cut_header.npy", u2("(1, 2, 2)", &[])[..40].to_vec(), "truncated .npy header"),
        ("cut_len.npy", b"\x93NUMPY\x01\x00\x10".to_vec(), "truncated .npy header"),
        ("garbage.npy", raw_npy(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2, 2) x", &eight),
            "bad .npy header"),
        ("nodict.npy", raw_npy(1, "hello", &eight), "bad .npy header: expected '{'"),
        ("missing.npy", raw_npy(1, "{'descr': '<u2', 'shape': (1, 2, 2), }", &eight),
            "bad .npy header: the header dict has no 'fortran_order' key"),
        ("extra.npy", raw_npy(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2, 2), 'x': True}", &eight),
            "bad .npy header: unexpected key 'x'"),
        ("negative.npy", u2("(1, -2, 2)", &eight), "bad .npy header: expected a non-negative integer"),
        ("structured.npy", raw_npy(1, "{'descr': [('a', '<u2')], 'fortran_order': False, 'shape': (1,), }", &eight),
            "(structured dtypes) are not supported"),
    ]
}

#[test]
fn every_bad_file_is_a_named_error() {
    let dir = tempfile::tempdir().unwrap();
    let eight = le_u16(&[7; 8]);
    let cases = bad_files();
    assert_eq!(cases.len(), 22);
    for (name, bytes, want) in cases {
        let p = put(dir.path(), name, &bytes);
        let msg = format_err(NpyFrames::open(&p), &p);
        assert!(msg.contains(want), "{name}: {msg}");
    }
    // A header length beyond the file, and one beyond the limit.
    let mut b = raw_npy(2, &u2_dict("(1, 2, 2)"), &eight);
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let p = put(dir.path(), "hlen.npy", &b);
    assert!(format_err(NpyFrames::open(&p), &p).contains("more than the 1048576 bytes"));
    b[8..12].copy_from_slice(&5000u32.to_le_bytes());
    let p = put(dir.path(), "hlen2.npy", &b);
    assert!(
        format_err(NpyFrames::open(&p), &p)
            .contains("truncated .npy header: it declares 5000 header bytes")
    );
    // A missing file is an I/O error naming it.
    let p = dir.path().join("nope.npy");
    match NpyFrames::open(&p) {
        Err(e @ Error::Io { .. }) => assert!(e.to_string().starts_with(&p.display().to_string())),
        other => panic!("{other:?}"),
    }
}
