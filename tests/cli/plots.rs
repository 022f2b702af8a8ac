//! `--plot`: the four PNGs of `find` and `demo`.

use support::cli::{find_args, s, text};

use crate::*;

/// PNG signature and IHDR size.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn plot_writes_four_pngs_for_find_and_demo() {
    let (dir, ped, data) = CLUDA.small_set();
    let d = dir.path();
    let names = [
        "spectrum.png",
        "hitmap.png",
        "pedestal_mean.png",
        "pedestal_noise.png",
    ];
    for (i, args) in [
        find_args(
            &ped,
            &data,
            &[
                "--device",
                "cpu",
                "--spectrum-range",
                "-100:1500",
                "--spectrum-bins",
                "80",
                "--spectrum-log",
            ],
        ),
        vec![
            "demo",
            "--frames",
            "5",
            "--pedestal-frames",
            "10",
            "--rows",
            "32",
            "--cols",
            "32",
        ],
    ]
    .into_iter()
    .enumerate()
    {
        let plots = d.join(format!("plots{i}"));
        let mut args = args;
        args.extend(["--plot", s(&plots)]);
        let o = CLUDA.run(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let err = text(&o.stderr);
        for n in names {
            let p = plots.join(n);
            assert!(err.contains(&format!("wrote {}", p.display())), "{err}");
            assert_eq!(png_size(&std::fs::read(&p).unwrap()), cluda::plot::PNG_SIZE);
        }
    }
    // Bad spectrum options are refused by name before any work.
    for (flag, value, name) in [
        ("--spectrum-bins", "0", "spectrum-bins"),
        ("--spectrum-bins", "100001", "spectrum-bins"),
        ("--spectrum-range", "5:5", "spectrum-range"),
        ("--spectrum-range", "-1:nan", "spectrum-range"),
    ] {
        let o = CLUDA.run(&["demo", "--frames", "1", flag, value]);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{flag} {value}: {err}");
        assert!(err.contains(name) && !err.contains("panicked"), "{err}");
    }
}
