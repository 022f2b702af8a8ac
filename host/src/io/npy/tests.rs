//! Tests of the `.npy` header written and read.

use super::dict::parse_dict;
use super::write::header_bytes;

#[test]
fn header_is_padded_like_numpy() {
    let h = header_bytes("<u2", &[2, 3, 4]);
    assert_eq!(h.len() % 64, 0);
    assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
    assert_eq!(u16::from_le_bytes([h[8], h[9]]) as usize, h.len() - 10);
    let text = std::str::from_utf8(&h[10..]).unwrap();
    assert!(text.starts_with("{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3, 4), }"));
    assert!(text.ends_with(" \n"));
}

#[test]
fn dict_grammar() {
    let d = parse_dict("{\"descr\":\"<u2\",\"fortran_order\":False,\"shape\":(5L,)}").unwrap();
    assert_eq!(
        (d.descr.as_str(), d.fortran_order, d.shape),
        ("<u2", false, vec![5])
    );
    let d = parse_dict("{'shape': (), 'fortran_order': True, 'descr': '>f4'}  \n").unwrap();
    assert_eq!(
        (d.descr.as_str(), d.fortran_order, d.shape),
        (">f4", true, vec![])
    );
    for bad in [
        "",
        "{",
        "{'descr': '<u2'}",
        "{'descr': '<u2', 'fortran_order': False, 'shape': (1, -2)}",
        "{'descr': '<u2', 'fortran_order': false, 'shape': (1,)}",
        "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), 'x': 1}",
        "{'descr': '<u2', 'descr': '<u2', 'fortran_order': False, 'shape': (1,)}",
        "{'descr': [('a', '<u2')], 'fortran_order': False, 'shape': (1,)}",
        "{'descr': '<u2', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
        "{'descr': '<u2', 'fortran_order': False, 'shape': (1,)} x",
    ] {
        assert!(parse_dict(bad).is_err(), "{bad}");
    }
}
