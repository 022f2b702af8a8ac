//! Files and images: the eta cube, photon and image files read back byte by byte; the
//! sub-pixel image's counting rules.

use std::path::Path;

use cluda::ClusterSize;
use cluda::interpolation::files::{self, CUBE_KEYS, PhotonWriter};
use cluda::interpolation::photon::PHOTON_DESCR;
use cluda::interpolation::{CubeAxes, Edges, EtaCube, EtaKind, Photon, SubpixelImage};
use proptest::prelude::*;

use crate::*;

/// A cube with some counts, of `kind`, over uneven axes.
fn some_cube(kind: EtaKind) -> EtaCube {
    let a = CubeAxes {
        kind,
        x: Edges::new("xbins", vec![-0.1, 0.2, 0.25, 1.1]).unwrap(),
        y: Edges::new("ybins", vec![-0.1, 0.5, 1.1]).unwrap(),
        e: Edges::new("ebins", vec![0.0, 100.0, 250.5, 1e4, f64::INFINITY]).unwrap(),
    };
    let mut c = EtaCube::new(a).unwrap();
    let counts: Vec<u64> = (0..3 * 2 * 4).map(|i| (i * i * 7919) % 101).collect();
    let tally = cluda::interpolation::Tally {
        clusters: 1000,
        inside: 990,
        eta_outside: 7,
        energy_outside: 3,
        ..Default::default()
    };
    c.add_counts(ClusterSize::S5, &counts, &tally).unwrap();
    c
}

#[test]
fn cube_file_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("eta.npz");
    let cube = some_cube(EtaKind::CrossEta3);
    files::write_cube(&path, &cube, "ADU", cluda::io::atomic::Claim::Replace).unwrap();

    // Exactly the four arrays, in order, with the shapes NumPy and aare expect.
    let arrays = cluda::io::npz::read_f64(&path).unwrap();
    let keys: Vec<&str> = arrays.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["etacube", "xbins", "ybins", "ebins"]);
    assert_eq!(CUBE_KEYS, ["etacube", "xbins", "ybins", "ebins"]);
    assert_eq!(arrays[0].1.shape, [3, 2, 4]);
    let counts: Vec<f64> = cube.counts().iter().map(|&c| c as f64).collect();
    assert_eq!(bits(&arrays[0].1.values), bits(&counts));
    let a = cube.axes();
    for (arr, e) in arrays[1..].iter().zip([&a.x, &a.y, &a.e]) {
        assert_eq!(arr.1.shape, [e.as_slice().len()]);
        assert_eq!(bits(&arr.1.values), bits(e.as_slice()));
    }

    // The metadata beside it, and read_cube taking the kind from it.
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("eta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["eta"], "cross-eta3");
    assert_eq!(meta["cluster"], 5);
    assert_eq!(meta["energy_unit"], "ADU");
    assert_eq!(meta["clusters"], 1000);
    let (axes, values, m) = files::read_cube(&path, Some(EtaKind::Eta2)).unwrap();
    assert_eq!(&axes, cube.axes());
    assert_eq!(bits(&values), bits(&counts));
    let m = m.unwrap();
    assert_eq!(
        (m.kind, m.unit.as_str(), m.cluster),
        (EtaKind::CrossEta3, "ADU", Some(5))
    );

    // Without the metadata, the kind given (else eta2).
    std::fs::remove_file(dir.path().join("eta.json")).unwrap();
    let (axes, _, m) = files::read_cube(&path, Some(EtaKind::Eta3)).unwrap();
    assert_eq!((axes.kind, m), (EtaKind::Eta3, None));
    assert_eq!(files::read_cube(&path, None).unwrap().0.kind, EtaKind::Eta2);
}

fn write_npz(path: &Path, arrays: &[(&str, Vec<usize>, Vec<f64>)]) {
    let refs: Vec<(&str, &[usize], &[f64])> = arrays
        .iter()
        .map(|(k, s, v)| (*k, s.as_slice(), v.as_slice()))
        .collect();
    cluda::io::npz::write_f64(path, &refs, cluda::io::atomic::Claim::Replace).unwrap();
}

#[test]
fn cube_file_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let x = vec![0.0, 0.5, 1.0];
    let y = vec![0.0, 1.0];
    let e = vec![0.0, f64::INFINITY];
    let good = |c: Vec<usize>| {
        let n = c.iter().product();
        vec![
            ("etacube", c, vec![1.0; n]),
            ("xbins", vec![3], x.clone()),
            ("ybins", vec![2], y.clone()),
            ("ebins", vec![2], e.clone()),
        ]
    };
    // The good one reads.
    let p = dir.path().join("good.npz");
    write_npz(&p, &good(vec![2, 1, 1]));
    files::read_cube(&p, None).unwrap();

    // An extra key.
    let p = dir.path().join("extra.npz");
    let mut a = good(vec![2, 1, 1]);
    a.push(("extra", vec![1], vec![0.0]));
    write_npz(&p, &a);
    let msg = files::read_cube(&p, None).unwrap_err().to_string();
    assert!(
        msg.contains("unexpected array `extra`") && msg.contains("extra.npz"),
        "{msg}"
    );

    // A missing key.
    let p = dir.path().join("missing.npz");
    let mut a = good(vec![2, 1, 1]);
    a.pop();
    write_npz(&p, &a);
    let msg = files::read_cube(&p, None).unwrap_err().to_string();
    assert!(msg.contains("no `ebins` array"), "{msg}");

    // A cube whose shape does not match the edges (the axes swapped), or of another rank.
    let p = dir.path().join("shape.npz");
    write_npz(&p, &good(vec![1, 2, 1]));
    let msg = files::read_cube(&p, None).unwrap_err().to_string();
    assert!(
        msg.contains("shape.npz") && msg.contains("[1, 2, 1]") && msg.contains("[2, 1, 1]"),
        "{msg}"
    );
    let p = dir.path().join("rank.npz");
    write_npz(&p, &good(vec![2, 1]));
    let msg = files::read_cube(&p, None).unwrap_err().to_string();
    assert!(msg.contains("`etacube` is 2-D"), "{msg}");

    // Edges that do not increase.
    let p = dir.path().join("edges.npz");
    let mut a = good(vec![2, 1, 1]);
    a[1].2 = vec![0.0, 1.0, 1.0];
    write_npz(&p, &a);
    let msg = files::read_cube(&p, None).unwrap_err().to_string();
    assert!(
        msg.contains("xbins") && msg.contains("strictly increase"),
        "{msg}"
    );
}

/// Parses an `.npy` header: (dict text, data offset).
fn npy_header(bytes: &[u8]) -> (String, usize) {
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let (len, pre) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
        v => panic!("npy version {v}"),
    };
    assert_eq!((pre + len) % 64, 0, "the data is 64-byte aligned");
    let dict = std::str::from_utf8(&bytes[pre..pre + len]).unwrap();
    assert!(dict.ends_with('\n'));
    (dict.trim_end().to_string(), pre + len)
}

#[test]
fn photon_file_rows_read_back() {
    assert_eq!(std::mem::size_of::<Photon>(), 33);
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Photon> = (0..1000)
        .map(|i| Photon {
            frame: i64::MAX - i * 0x1_0000_0001,
            x: (i as f64) * 0.1 - 3.0,
            y: if i == 5 {
                f64::NAN
            } else {
                1e300 / (i + 1) as f64
            },
            energy: -(i as f64) - 0.5,
            flags: (i % 256) as u8,
        })
        .collect();
    for split in [0, 1, 777, 1000] {
        let path = dir.path().join(format!("p{split}.npy"));
        let mut w = PhotonWriter::create(&path, cluda::io::atomic::Claim::Replace).unwrap();
        w.write(&rows[..split]).unwrap();
        w.write(&[]).unwrap();
        w.write(&rows[split..]).unwrap();
        assert_eq!(w.finish().unwrap(), path);
        let bytes = std::fs::read(&path).unwrap();
        let (dict, off) = npy_header(&bytes);
        assert_eq!(
            dict,
            format!("{{'descr': {PHOTON_DESCR}, 'fortran_order': False, 'shape': (1000,), }}")
        );
        assert_eq!(
            PHOTON_DESCR,
            "[('frame', '<i8'), ('x', '<f8'), ('y', '<f8'), ('energy', '<f8'), ('flags', 'u1')]"
        );
        let data = &bytes[off..];
        assert_eq!(data.len(), 33 * rows.len());
        for (r, p) in data.chunks_exact(33).zip(&rows) {
            let f = |a: usize| u64::from_le_bytes(r[a..a + 8].try_into().unwrap());
            let Photon {
                frame,
                x,
                y,
                energy,
                flags,
            } = *p;
            assert_eq!(f(0) as i64, frame);
            assert_eq!(f(8), x.to_bits());
            assert_eq!(f(16), y.to_bits());
            assert_eq!(f(24), energy.to_bits());
            assert_eq!(r[32], flags);
        }
    }
    // No rows: a valid empty array.
    let path = dir.path().join("empty.npy");
    PhotonWriter::create(&path, cluda::io::atomic::Claim::Replace)
        .unwrap()
        .finish()
        .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let (dict, off) = npy_header(&bytes);
    assert!(dict.contains("'shape': (0,)"), "{dict}");
    assert_eq!(bytes.len(), off);
}

#[test]
fn tiff_header_fields() {
    let dir = tempfile::tempdir().unwrap();
    let (h, w) = (5usize, 7usize);
    let data: Vec<u32> = (0..(h * w) as u32)
        .map(|i| i.wrapping_mul(0x9e37_79b9))
        .collect();
    let path = dir.path().join("i.tif");
    cluda::io::tiff::write_u32(&path, h, w, &data, cluda::io::atomic::Claim::Replace).unwrap();
    let b = std::fs::read(&path).unwrap();
    let u16_at = |a: usize| u16::from_le_bytes([b[a], b[a + 1]]);
    let u32_at = |a: usize| u32::from_le_bytes(b[a..a + 4].try_into().unwrap());
    assert_eq!(&b[..2], b"II");
    assert_eq!(u16_at(2), 42);
    let ifd = u32_at(4) as usize;
    let n = u16_at(ifd) as usize;
    let mut tags = std::collections::BTreeMap::new();
    let mut last_tag = 0;
    for e in 0..n {
        let a = ifd + 2 + 12 * e;
        let (tag, ty, count) = (u16_at(a), u16_at(a + 2), u32_at(a + 4));
        assert!(tag > last_tag, "tags in increasing order");
        last_tag = tag;
        assert_eq!(count, 1);
        let v = match ty {
            3 => u16_at(a + 8) as u32,
            4 => u32_at(a + 8),
            t => panic!("type {t}"),
        };
        tags.insert(tag, v);
    }
    assert_eq!(u32_at(ifd + 2 + 12 * n), 0, "one IFD");
    let want = [
        (256, w as u32),
        (257, h as u32),
        (258, 32),
        (259, 1),
        (262, 1),
        (273, (b.len() - 4 * h * w) as u32),
        (277, 1),
        (278, h as u32),
        (279, (4 * h * w) as u32),
        (339, 1),
    ];
    assert_eq!(tags.into_iter().collect::<Vec<_>>(), want);
    let off = b.len() - 4 * h * w;
    let back: Vec<u32> = b[off..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(back, data);
    // A shape that does not hold the data is refused.
    assert!(
        cluda::io::tiff::write_u32(
            &dir.path().join("bad.tif"),
            h,
            w + 1,
            &data,
            cluda::io::atomic::Claim::Replace
        )
        .is_err()
    );
}

#[test]
fn image_files_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let mut img = SubpixelImage::new(3, 2, 4).unwrap();
    assert_eq!(img.shape(), (12, 8));
    assert!(img.add(1.3, 2.9));
    let npy = dir.path().join("i.npy");
    files::write_image(&npy, &img, cluda::io::atomic::Claim::Replace).unwrap();
    let b = std::fs::read(&npy).unwrap();
    let (dict, off) = npy_header(&b);
    assert!(
        dict.contains("'descr': '<u4'") && dict.contains("'shape': (12, 8)"),
        "{dict}"
    );
    let back: Vec<u32> = b[off..]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(back, img.counts());
    // floor(2.9 * 4) = 11, floor(1.3 * 4) = 5.
    assert_eq!(back[11 * 8 + 5], 1);
    files::write_image(
        &dir.path().join("i.TIF"),
        &img,
        cluda::io::atomic::Claim::Replace,
    )
    .unwrap();
    assert!(
        files::write_image(
            &dir.path().join("i.png"),
            &img,
            cluda::io::atomic::Claim::Replace
        )
        .is_err()
    );
}

#[test]
fn image_saturates_and_skips_outside() {
    let mut img = SubpixelImage::new(2, 3, 2).unwrap();
    let (h, w) = img.shape();
    assert_eq!((h, w), (4, 6));
    let mut near = vec![0u32; h * w];
    near[0] = u32::MAX - 1;
    near[1] = u32::MAX;
    near[2] = 7;
    // Into an empty image: taken as they are.
    img.add_counts(near.clone()).unwrap();
    assert_eq!(&img.counts()[..3], &[u32::MAX - 1, u32::MAX, 7]);
    assert!(img.add(0.0, 0.0));
    assert!(img.add(0.49, 0.49));
    assert_eq!(img.counts()[0], u32::MAX, "saturates");
    assert!(img.add(0.5, 0.0));
    assert_eq!(img.counts()[1], u32::MAX);
    // Into a counted one: summed, saturating.
    img.add_counts(near.clone()).unwrap();
    assert_eq!(&img.counts()[..3], &[u32::MAX, u32::MAX, 14]);
    assert!(img.add_counts(near[1..].to_vec()).is_err());

    let before = img.counts().to_vec();
    for (x, y) in [
        (-1e-9, 0.5),
        (0.5, -1e-9),
        (3.0, 0.5),
        (0.5, 2.0),
        (f64::NAN, 0.5),
        (0.5, f64::NAN),
        (f64::INFINITY, 0.5),
        (f64::NEG_INFINITY, 0.5),
        (1e300, 1e300),
    ] {
        assert!(!img.add(x, y), "({x}, {y}) is outside");
    }
    assert_eq!(img.counts(), &before[..]);
    // Just inside the far corner.
    assert!(img.add(2.9999999999999996, 1.9999999999999998));
    assert_eq!(img.counts()[h * w - 1], 1);
    assert!(SubpixelImage::new(2, 2, 0).is_err());
    assert!(SubpixelImage::new(2, 2, 33).is_err());
    assert!(SubpixelImage::new(2, 2, 32).is_ok());
}

proptest! {
    /// `add` counts `(x, y)` into `[floor(y * n), floor(x * n)]` when that is inside, else
    /// nowhere.
    #[test]
    fn image_add_is_floor_of_product(rows in 1usize..6, cols in 1usize..6, n in 1u32..=32,
                                     pts in prop::collection::vec((-2.0f64..8.0, -2.0f64..8.0), 1..50)) {
        let mut img = SubpixelImage::new(rows, cols, n).unwrap();
        let (h, w) = img.shape();
        let mut want = vec![0u32; h * w];
        for (x, y) in pts {
            let (r, c) = ((y * n as f64).floor(), (x * n as f64).floor());
            let inside = r >= 0.0 && r < h as f64 && c >= 0.0 && c < w as f64;
            if inside {
                want[r as usize * w + c as usize] += 1;
            }
            prop_assert_eq!(img.add(x, y), inside);
        }
        prop_assert_eq!(img.counts(), &want[..]);
    }
}
