//! `cluda eta` and `cluda image` end to end: the cube, the image and the photon list equal
//! what the library computes from the cluster file `cluda find --out` writes with the same
//! options (so the commands see exactly those clusters), several inputs add up, and bad
//! parameters are named errors.

use std::path::{Path, PathBuf};

use cluda::interpolation::files::{read_cube, write_cube};
use cluda::interpolation::{
    CubeAxes, EtaCube, EtaKind, Interpolator, MapKind, Placer, SubpixelImage, Tally,
};
use cluda::io::npy::read_array;
use cluda::io::{npz, read_cluster_file};
use cluda::{ClusterBatch, ClusterSize};
use support::cli::{Cli, find_args, run_args, s, text};

const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));

/// Small generated inputs in `dir` ([`Cli::gen_small`]) and `cluda eta`'s cube of them on the
/// CPU (`dir/eta.npz`): the pedestal, the data and the cube.
fn inputs_and_cube(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (ped, data) = CLUDA.gen_small(dir);
    let cube = dir.join("eta.npz");
    CLUDA.ok(&run_args(
        "eta",
        &ped,
        &data,
        &["--out", s(&cube), "--device", "cpu"],
    ));
    (ped, data, cube)
}

/// Runs `cluda image` on `ped` and `data` with the eta cube `cube`, then `more` options,
/// expecting success; returns its stdout.
fn image(ped: &Path, data: &Path, cube: &Path, more: &[&str]) -> String {
    let mut args = run_args("image", ped, data, &["--eta", s(cube)]);
    args.extend_from_slice(more);
    CLUDA.ok(&args)
}

/// The clusters `find --out` writes for these inputs (3x3 unless `cluster`).
fn found(dir: &Path, ped: &Path, data: &Path, cluster: &str) -> (Vec<i32>, ClusterBatch) {
    let out = dir.join(format!("c{cluster}.clust"));
    CLUDA.ok(&find_args(
        ped,
        data,
        &[
            "--cluster",
            cluster,
            "--out",
            s(&out),
            "--overwrite",
            "--device",
            "cpu",
        ],
    ));
    let size = ClusterSize::from_side(cluster.parse().unwrap()).unwrap();
    read_cluster_file(&out, size).unwrap()
}

#[test]
fn eta_cube_is_the_cube_of_find_out_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let (ped, data) = CLUDA.gen_small(dir.path());
    for (kind, cluster) in [
        ("eta2", "3"),
        ("full-eta2", "5"),
        ("eta3", "3"),
        ("cross-eta3", "9"),
    ] {
        let (_, batch) = found(dir.path(), &ped, &data, cluster);
        let out = dir.path().join(format!("{kind}.npz"));
        let line = CLUDA.ok(&run_args(
            "eta",
            &ped,
            &data,
            &[
                "--cluster",
                cluster,
                "--eta-kind",
                kind,
                "--out",
                s(&out),
                "--device",
                "cpu",
            ],
        ));
        let k = EtaKind::ALL.into_iter().find(|k| k.name() == kind).unwrap();
        let mut want = EtaCube::new(CubeAxes::default_for(k)).unwrap();
        for fc in batch.iter_frames() {
            want.add_frame(&fc).unwrap();
        }
        assert!(want.tally().inside > 0);
        assert!(
            line.contains(&format!(
                "clusters={} inside={} ",
                want.tally().clusters,
                want.tally().inside
            )),
            "{line}"
        );
        let (axes, cube, meta) = read_cube(&out, None).unwrap();
        assert_eq!(axes, *want.axes());
        assert_eq!(cube, want.to_f64());
        assert_eq!(meta.unwrap().cluster, Some(cluster.parse().unwrap()));
        // Exactly the four arrays aare's Interpolator takes, in order.
        let keys: Vec<String> = npz::read_f64(&out)
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, ["etacube", "xbins", "ybins", "ebins"]);
    }
}

#[test]
fn image_and_photons_are_the_library_placement_of_find_out() {
    let dir = tempfile::tempdir().unwrap();
    let (ped, data, cube_path) = inputs_and_cube(dir.path());
    let (numbers, batch) = found(dir.path(), &ped, &data, "3");
    for (maps, n) in [("cumulative", "4"), ("rosenblatt", "7")] {
        let img = dir.path().join(format!("{maps}.npy"));
        let tif = dir.path().join(format!("{maps}.tif"));
        let ph = dir.path().join(format!("{maps}.photons.npy"));
        let args = |out: &Path, photons: Option<&Path>| {
            let mut a = run_args(
                "image",
                &ped,
                &data,
                &[
                    "--eta",
                    s(&cube_path),
                    "--maps",
                    maps,
                    "--subpixels",
                    n,
                    "--out",
                    s(out),
                    "--device",
                    "cpu",
                ],
            );
            if let Some(p) = photons {
                a.extend(["--photons", s(p)]);
            }
            a.into_iter().map(String::from).collect::<Vec<_>>()
        };
        let a = args(&img, Some(&ph));
        CLUDA.ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        let a = args(&tif, None);
        CLUDA.ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        let (axes, cube, _) = read_cube(&cube_path, None).unwrap();
        let map: MapKind = maps.parse().unwrap();
        let interp = Interpolator::new(axes, &cube, map).unwrap();
        let placer = Placer {
            maps: &interp,
            window: None,
            mask: None,
            gain: None,
        };
        let n: u32 = n.parse().unwrap();
        let mut want = SubpixelImage::new(24, 36, n).unwrap();
        let (mut tally, mut photons) = (Tally::default(), Vec::new());
        for (k, fc) in batch.iter_frames().enumerate() {
            placer.place_frame(numbers[k] as i64, &fc, &mut tally, &mut photons);
        }
        for p in photons.iter().filter(|p| p.flags == 0) {
            let (x, y) = (p.x, p.y);
            want.add(x, y);
        }
        assert!(tally.inside > 0 && want.total() > 0);
        let got = read_array::<u32>(&img).unwrap();
        assert_eq!(got.shape, vec![24 * n as usize, 36 * n as usize]);
        assert_eq!(got.data, want.counts());
        // The TIFF holds the same counts after its header.
        let t = std::fs::read(&tif).unwrap();
        let body: Vec<u32> = t[t.len() - want.counts().len() * 4..]
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(&t[..4], b"II*\0");
        assert_eq!(body, want.counts());
        // The photon list: the library's rows, byte for byte, after a structured header.
        let bytes = std::fs::read(&ph).unwrap();
        let rows: &[u8] = bytemuck::cast_slice(&photons);
        assert!(bytes.ends_with(rows), "photon rows differ");
        let header = String::from_utf8_lossy(&bytes[..bytes.len() - rows.len()]).into_owned();
        assert!(
            header.contains("('frame', '<i8')")
                && header.contains(&format!("'shape': ({},)", photons.len())),
            "{header}"
        );
    }
}

#[test]
fn several_inputs_add_into_one_image_and_photons_go_to_out_dir() {
    let dir = tempfile::tempdir().unwrap();
    let (ped, data, cube) = inputs_and_cube(dir.path());
    let data2 = dir.path().join("data2.npy");
    std::fs::copy(&data, &data2).unwrap();
    let one = dir.path().join("one.npy");
    let two = dir.path().join("two.npy");
    let od = dir.path().join("ph");
    let pl = dir.path().join("pl");
    image(
        &ped,
        &data,
        &cube,
        &["--out", s(&one), "--plot", s(&pl), "--device", "cpu"],
    );
    assert!(
        std::fs::read(pl.join("image.png"))
            .unwrap()
            .starts_with(b"\x89PNG")
    );
    CLUDA.ok(&run_args(
        "image",
        &ped,
        &data,
        &[
            s(&data2),
            "--eta",
            s(&cube),
            "--out",
            s(&two),
            "--out-dir",
            s(&od),
            "--device",
            "cpu",
        ],
    ));
    let (a, b) = (
        read_array::<u32>(&one).unwrap(),
        read_array::<u32>(&two).unwrap(),
    );
    assert!(
        a.data.iter().zip(&b.data).all(|(x, y)| 2 * x == *y),
        "each input from the pedestal afresh: twice the image"
    );
    assert!(od.join("data.photons.npy").exists() && od.join("data2.photons.npy").exists());
    // And the cube of two inputs is twice the cube of one.
    let cube2 = dir.path().join("eta2.npz");
    CLUDA.ok(&run_args(
        "eta",
        &ped,
        &data,
        &[s(&data2), "--out", s(&cube2), "--device", "cpu"],
    ));
    let (_, c1, _) = read_cube(&cube, None).unwrap();
    let (_, c2, _) = read_cube(&cube2, None).unwrap();
    assert!(c1.iter().zip(&c2).all(|(x, y)| 2.0 * x == *y));
}

#[test]
fn bad_parameters_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (ped, data, cube) = inputs_and_cube(dir.path());
    let c = s(&cube);
    let img = dir.path().join("i.npy");
    let i = s(&img);
    for n in ["0", "33"] {
        let out = CLUDA.run(&run_args(
            "image",
            &ped,
            &data,
            &["--eta", c, "--subpixels", n, "--out", i],
        ));
        assert!(!out.status.success(), "--subpixels {n} is refused");
        assert!(
            text(&out.stderr).contains("1 to 32"),
            "{}",
            text(&out.stderr)
        );
    }
    CLUDA.fails(
        &run_args("image", &ped, &data, &["--eta", c]),
        &["nothing to write"],
    );
    CLUDA.fails(&run_args("eta", &ped, &data, &["--out", c]), &["exists"]);
    CLUDA.fails(
        &run_args(
            "image",
            &ped,
            &data,
            &[s(&data), "--eta", c, "--photons", i],
        ),
        &["--out-dir"],
    );
    CLUDA.fails(
        &run_args(
            "image",
            &ped,
            &data,
            &["--eta", c, "--out", s(&dir.path().join("i.png"))],
        ),
        &[".npy or .tif"],
    );
    // A cube with an extra key, or edges that do not match its shape.
    let axes = CubeAxes::default_for(EtaKind::Eta2);
    let bad = dir.path().join("bad.npz");
    let xb = axes.x.as_slice().to_vec();
    // bad.npz: a cube of `rows` x 201 x 1 and the default edges, then `more` arrays; then
    // `image` with it fails naming the file and `want`.
    let bad_cube = |rows: usize, more: &[(&str, &[usize], &[f64])], want: &str| {
        let (cube, shape) = (vec![1.0; rows * 201], [rows, 201, 1]);
        let mut arrays: Vec<(&str, &[usize], &[f64])> = vec![
            ("etacube", &shape, &cube),
            ("xbins", &[202], &xb),
            ("ybins", &[202], &xb),
            ("ebins", &[2], &[0.0, f64::INFINITY]),
        ];
        arrays.extend_from_slice(more);
        npz::write_f64(&bad, &arrays, cluda::io::atomic::Claim::Replace).unwrap();
        let _ = std::fs::remove_file(dir.path().join("bad.json"));
        CLUDA.fails(
            &run_args("image", &ped, &data, &["--eta", s(&bad), "--out", i]),
            &["bad.npz", want],
        );
    };
    bad_cube(201, &[("extra", &[1], &[0.0])], "unexpected array `extra`");
    bad_cube(200, &[], "shape");
    assert!(!img.exists(), "no image written on an error");
    // write_cube then read back is the same cube.
    let mut e = EtaCube::new(axes).unwrap();
    let (_, batch) = found(dir.path(), &ped, &data, "3");
    e.add_frame(&batch.frame(0)).unwrap();
    let rt = dir.path().join("rt.npz");
    write_cube(&rt, &e, "ADU", cluda::io::atomic::Claim::Refuse).unwrap();
    assert_eq!(read_cube(&rt, None).unwrap().1, e.to_f64());
}

/// Writes a `rows x cols` bool mask `.npy`.
fn write_mask(path: &Path, rows: usize, cols: usize, bad: impl Fn(usize, usize) -> bool) {
    let mut b = cluda::io::npy::header_bytes("|b1", &[rows, cols]);
    for r in 0..rows {
        for c in 0..cols {
            b.push(u8::from(bad(r, c)));
        }
    }
    std::fs::write(path, b).unwrap();
}

#[test]
fn a_mask_keeps_bad_pixels_out_of_the_cube_and_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let (ped, data) = CLUDA.gen_small(dir.path());
    let all = dir.path().join("all.npy");
    write_mask(&all, 24, 36, |_, _| true);
    let half = dir.path().join("half.npy");
    write_mask(&half, 24, 36, |_, c| c < 18);
    let cube = dir.path().join("eta.npz");
    let line = CLUDA.ok(&run_args(
        "eta",
        &ped,
        &data,
        &["--out", s(&cube), "--mask", s(&all), "--device", "cpu"],
    ));
    assert!(line.contains(" inside=0 "), "{line}");
    let (_, batch) = found(dir.path(), &ped, &data, "3");
    assert!(
        line.contains(&format!("masked={} ", batch.total())),
        "{line}"
    );
    let full = dir.path().join("full.npz");
    CLUDA.ok(&run_args(
        "eta",
        &ped,
        &data,
        &["--out", s(&full), "--device", "cpu"],
    ));
    let img = dir.path().join("i.npy");
    let ph = dir.path().join("ph.npy");
    let line = image(
        &ped,
        &data,
        &full,
        &[
            "--out",
            s(&img),
            "--photons",
            s(&ph),
            "--mask",
            s(&half),
            "--device",
            "cpu",
        ],
    );
    assert!(!line.contains(" masked=0 "), "{line}");
    let got = read_array::<u32>(&img).unwrap();
    // Photons of masked pixels (columns < 18) are never counted: their sub-pixels stay 0,
    // except those a neighbour's photon (placed up to a pixel away) reaches.
    let (rows_n, cols_n) = (got.shape[0], got.shape[1]);
    let left: u64 = (0..rows_n)
        .flat_map(|r| (0..cols_n / 2 - 8).map(move |c| (r, c)))
        .map(|(r, c)| got.data[r * cols_n + c] as u64)
        .sum();
    assert_eq!(left, 0, "no photon counted well inside the masked half");
    let wrong = dir.path().join("wrong.npy");
    write_mask(&wrong, 24, 35, |_, _| false);
    CLUDA.fails(
        &run_args(
            "image",
            &ped,
            &data,
            &[
                "--eta",
                s(&full),
                "--out",
                s(&dir.path().join("j.npy")),
                "--mask",
                s(&wrong),
            ],
        ),
        &["mask", "24 x 35"],
    );
}

/// Writes a `rows x cols` float64 gain `.npy`.
fn write_gain(path: &Path, rows: usize, cols: usize, g: impl Fn(usize, usize) -> f64) {
    let v: Vec<f64> = (0..rows * cols).map(|i| g(i / cols, i % cols)).collect();
    cluda::io::npy::write_array(path, &[rows, cols], &v).unwrap();
}

/// Reads a photon list's rows as (x, y, energy, flags).
fn photon_rows(path: &Path) -> Vec<(f64, f64, f64, u8)> {
    let b = std::fs::read(path).unwrap();
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize + 10;
    b[hl..]
        .chunks_exact(33)
        .map(|r| {
            let f = |o: usize| f64::from_le_bytes(r[o..o + 8].try_into().unwrap());
            (f(8), f(16), f(24), r[32])
        })
        .collect()
}

#[test]
fn a_gain_map_divides_values_before_eta_and_energy() {
    let dir = tempfile::tempdir().unwrap();
    let (ped, data, cube) = inputs_and_cube(dir.path());
    // Gain 1 everywhere: v / 1 = v, and f64 sums of these integers are exact: the same cube.
    let one = dir.path().join("one.npy");
    write_gain(&one, 24, 36, |_, _| 1.0);
    let cube1 = dir.path().join("eta1.npz");
    CLUDA.ok(&run_args(
        "eta",
        &ped,
        &data,
        &["--out", s(&cube1), "--gain", s(&one), "--device", "cpu"],
    ));
    assert_eq!(
        read_cube(&cube, None).unwrap().1,
        read_cube(&cube1, None).unwrap().1
    );
    let meta = std::fs::read_to_string(dir.path().join("eta1.json")).unwrap();
    assert!(meta.contains("\"keV\""), "{meta}");
    // Gain 2 everywhere: etas unchanged (halving is exact), energies halved.
    let two = dir.path().join("two.npy");
    write_gain(&two, 24, 36, |_, _| 2.0);
    let (ph0, ph2) = (dir.path().join("p0.npy"), dir.path().join("p2.npy"));
    image(
        &ped,
        &data,
        &cube,
        &["--photons", s(&ph0), "--device", "cpu"],
    );
    image(
        &ped,
        &data,
        &cube,
        &["--photons", s(&ph2), "--gain", s(&two), "--device", "cpu"],
    );
    let (a, b) = (photon_rows(&ph0), photon_rows(&ph2));
    assert_eq!(a.len(), b.len());
    assert!(!a.is_empty());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            (x.0.to_bits(), x.1.to_bits()),
            (y.0.to_bits(), y.1.to_bits())
        );
        assert_eq!(x.2 / 2.0, y.2);
    }
    // A zero gain, and a map of another shape, are named errors.
    let bad = dir.path().join("bad.npy");
    write_gain(
        &bad,
        24,
        36,
        |r, c| if (r, c) == (3, 5) { 0.0 } else { 1.0 },
    );
    CLUDA.fails(
        &run_args(
            "eta",
            &ped,
            &data,
            &["--out", s(&dir.path().join("e.npz")), "--gain", s(&bad)],
        ),
        &["row 3, column 5", "above 0"],
    );
    let small = dir.path().join("small.npy");
    write_gain(&small, 24, 30, |_, _| 1.0);
    CLUDA.fails(
        &run_args(
            "eta",
            &ped,
            &data,
            &["--out", s(&dir.path().join("e.npz")), "--gain", s(&small)],
        ),
        &["gain", "24 x 30"],
    );
}
