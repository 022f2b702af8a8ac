//! `.npy` inputs: each malformed one gets its specific error and allocates nothing large.

use support::files::npy_bytes;

use crate::{Expect, alloc_track, check_read, temp_dir};

/// A version 1.0 `.npy` file of C-order `<u2` with the shape written `shape` (a Python
/// tuple, as NumPy writes it) and `body_len` zero bytes after the header.
fn u2(shape: &str, body_len: usize) -> Vec<u8> {
    let dict = format!("{{'descr': '<u2', 'fortran_order': False, 'shape': {shape}, }}");
    npy_bytes(&dict, &vec![0; body_len])
}

/// A version 1.0 `.npy` file of a 1 x 2 x 2 array of `descr` in `order` (`False`: C order),
/// with `body_len` zero bytes after the header.
fn one_2x2(descr: &str, order: &str, body_len: usize) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': (1, 2, 2), }}");
    npy_bytes(&dict, &vec![0; body_len])
}

/// `.npy` inputs for `read_u16_frames` (and `NpyFrames`), with what each must give.
fn npy_cases() -> Vec<(&'static str, Vec<u8>, Expect)> {
    let mut latin1 = u2("(1, 2, 2)", 8);
    latin1[20] = 0xff;
    let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
    let h = "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 1, 2), }\n";
    v2.extend_from_slice(&(h.len() as u32).to_le_bytes());
    v2.extend_from_slice(h.as_bytes());
    v2.extend_from_slice(&[1, 0, 2, 0]);
    // The dict followed by `x`, padded to the header length the file declares.
    let text_after: Vec<u8> = u2("(1, 2, 2)", 8)
        .into_iter()
        .take(10)
        .chain(
            "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2, 2), }x"
                .bytes()
                .chain(std::iter::repeat_n(b' ', 52))
                .chain(*b"\n"),
        )
        .chain([0; 8])
        .collect();
    let magic = "does not start with the \\x93NUMPY magic string";
    let huge = "needs 320000000000000000 bytes after the 128-byte header, the file holds 64";
    let truncated = "truncated .npy header: it declares 118 header bytes but the file has only 10";
    vec![
        ("empty file", vec![], Err(magic)),
        (
            "bad magic",
            b"\x93NUMPX\x01\x00\x10\x00".to_vec(),
            Err(magic),
        ),
        (
            "truncated header",
            u2("(1, 2, 2)", 0)[..20].to_vec(),
            Err(truncated),
        ),
        (
            "header length past the end",
            b"\x93NUMPY\x01\x00\xff\xff{".to_vec(),
            Err("declares 65535 header bytes but the file has only 1"),
        ),
        (
            "wrong dtype f8",
            one_2x2("<f8", "False", 32),
            Err("dtype '<f8' is not supported here: expected uint16"),
        ),
        (
            "fortran order",
            one_2x2("<u2", "True", 8),
            Err("Fortran-order array: cluda reads C-order arrays only"),
        ),
        (
            "zero rows",
            u2("(1, 0, 2)", 0),
            Err("frames of shape 0 x 2 have no pixels"),
        ),
        (
            "negative size",
            u2("(1, -2, 2)", 8),
            Err("expected a non-negative integer at byte 54, found '-'"),
        ),
        (
            "huge declared frames",
            u2("(1000000000000, 400, 400)", 64),
            Err(huge),
        ),
        (
            "shape product overflows",
            u2("(18446744073709551615, 400, 400)", 64),
            Err("is too large to address on this machine"),
        ),
        (
            "fewer bytes than the shape",
            u2("(3, 2, 2)", 10),
            Err("needs 24 bytes after the 128-byte header, the file holds 10"),
        ),
        (
            "text after the dict",
            text_after,
            Err("unexpected text after the dict"),
        ),
        (
            "latin-1 byte in the header",
            latin1,
            Err("expected a string, True, False or a tuple at byte 10"),
        ),
        (
            "4-D shape",
            u2("(1, 1, 2, 2)", 8),
            Err("expected a 3-D array"),
        ),
        ("1-D shape", u2("(4,)", 8), Err("expected a 3-D array")),
        (
            "no shape key",
            npy_bytes("{'descr': '<u2', 'fortran_order': False, }", &[0; 8]),
            Err("the header dict has no 'shape' key"),
        ),
        (
            "header not a dict",
            npy_bytes("[1, 2, 3]", &[0; 8]),
            Err("expected '{' at byte 0, found '['"),
        ),
        // Accepted forms, read exactly.
        (
            "big-endian u2",
            one_2x2(">u2", "False", 8),
            Ok(vec![1, 2, 2]),
        ),
        ("2-D shape is one frame", u2("(2, 2)", 8), Ok(vec![1, 2, 2])),
        ("version 2.0 header", v2, Ok(vec![1, 1, 2])),
        ("no frames", u2("(0, 4, 4)", 0), Ok(vec![0, 4, 4])),
    ]
}

#[test]
fn every_malformed_npy_gets_its_specific_error_and_allocates_nothing_large() {
    let d = temp_dir("npy");
    let cases = npy_cases();
    assert!(cases.len() >= 20, "only {} cases", cases.len());
    let mut failures = Vec::new();
    for (i, (name, bytes, want)) in cases.iter().enumerate() {
        let p = d.path().join(format!("case{i}.npy"));
        std::fs::write(&p, bytes).unwrap();
        alloc_track::largest_reset();
        let got = cluda::io::npy::read_u16_frames(&p).map(|a| {
            assert_eq!(a.data.len(), a.shape.iter().product::<usize>(), "{name}");
            a.shape
        });
        let streamed = cluda::io::NpyFrames::open(&p).map(|f| vec![f.len(), f.rows(), f.cols()]);
        check_read(&mut failures, (name, &p), want, &got);
        if got.is_ok() != streamed.is_ok() {
            failures.push(format!("{name}: NpyFrames::open disagrees: {streamed:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
