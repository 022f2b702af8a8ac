//! A hostile user of the `cluda` binary: outputs that are inputs, signals mid-run, two runs on
//! one output, lossy raw acquisitions, huge-but-valid inputs, FIFOs and absurd options. Every
//! case checks that the inputs' bytes are unchanged, the error names the file or option, the
//! exit code (1, or 128 + the signal), and that no partial output remains under the final name
//! and no temporary file is left behind.

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use cluda::io::npy::{read_u16_frames, write_u16_3d};
use cluda::io::raw::RawWriter;
use support::cli::{Cli, find_args, gen_args, match_args, s, text};
use support::files::{listing, no_temporaries, sparse_npy, sum, wait_for};
use support::raw::gen_small_config;

/// The binary under test.
const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));

/// Waits for `child` at most `limit`; kills it and fails the test if it is still running
/// (a hang).
fn wait_at_most(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("cluda still running after {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A raw acquisition of `frames` generic 24 x 36 frames numbered from 1, `per_file` per file.
fn raw_acquisition(dir: &Path, base: &str, frames: usize, per_file: u64) -> PathBuf {
    let mut config = gen_small_config();
    config.max_frames_per_file = per_file;
    let mut w = RawWriter::create(dir, base, 0, config).unwrap();
    let g = cluda::generate::Generator::new(cluda::generate::GenConfig::new(24, 36, 3)).unwrap();
    for i in 0..frames {
        w.write_frame(i as u64 + 1, &g.frames(i as u64, 1, false))
            .unwrap();
    }
    w.finish(None).unwrap()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(s(path)).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let (dir, ped, data) = CLUDA.small_set();
    let d = dir.path();
    let link = d.join("link.npy");
    std::os::unix::fs::symlink(&data, &link).unwrap();
    let name = d.file_name().unwrap().to_str().unwrap();
    let twisted = d.join("..").join(name).join(".").join("data.npy");
    let (ps, ds) = (sum(&ped), sum(&data));
    let before = listing(d);
    for out in [&data, &ped, &link, &twisted] {
        CLUDA.fails(
            &find_args(&ped, &data, &["--out", s(out)]),
            &["`out`", s(out), "refusing to overwrite an input"],
        );
        assert_eq!((sum(&ped), sum(&data)), (ps, ds), "{}", out.display());
        assert_eq!(listing(d), before);
    }

    // Raw input: the master and every data file it names are inputs.
    let master = raw_acquisition(d, "run", 12, 5);
    let raws: Vec<PathBuf> = (0..3)
        .map(|i| d.join(format!("run_d0_f{i}_0.raw")))
        .collect();
    let sums: Vec<u64> = raws.iter().chain([&master]).map(|p| sum(p)).collect();
    let before = listing(d);
    for out in raws.iter().chain([&master]) {
        CLUDA.fails(
            &find_args(&ped, &master, &["--out", s(out)]),
            &["refusing to overwrite an input", s(out)],
        );
    }
    let after: Vec<u64> = raws.iter().chain([&master]).map(|p| sum(p)).collect();
    assert_eq!(sums, after);
    assert_eq!(listing(d), before);

    // match --out equal to --lhs.
    let desc = d.join("desc.npy");
    let rows: Vec<[f32; 128]> = (0..4).map(|i| [i as f32; 128]).collect();
    cluda::matcher::write_descriptors(&desc, &rows).unwrap();
    let sd = sum(&desc);
    CLUDA.fails(
        &match_args(&desc, &desc, &["--version", "cpu", "--out", s(&desc)]),
        &["`out`", "refusing to overwrite an input"],
    );
    assert_eq!(sum(&desc), sd);
    no_temporaries(d);
}

#[test]
fn a_failed_run_leaves_the_old_output_and_no_temporary_file() {
    let (dir, ped, _) = CLUDA.small_set();
    let d = dir.path();
    // Frame number 3e9 does not fit the cluster file's i32: an error after two frames were
    // written.
    let config = gen_small_config();
    let mut w = RawWriter::create(d, "big", 0, config).unwrap();
    let frame = read_u16_frames(&ped).unwrap().data[..24 * 36].to_vec();
    for n in [1, 2, 3_000_000_000] {
        w.write_frame(n, &frame).unwrap();
    }
    let master = w.finish(None).unwrap();
    let out = d.join("c.clust");
    std::fs::write(&out, b"the previous run's clusters").unwrap();
    let before = listing(d);
    let err = CLUDA.fails(
        &find_args(
            &ped,
            &master,
            &["--out", s(&out), "--overwrite", "--device", "cpu"],
        ),
        &["frame number 3000000000", "i32"],
    );
    assert!(err.contains("c.clust was not written"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"the previous run's clusters");
    assert_eq!(listing(d), before);
}

/// Sends `signal` to a `find` on a large sparse input once it runs, expecting exit 128 + the
/// signal and nothing under the output's name.
#[test]
fn a_signal_stops_find_at_a_frame_boundary_and_removes_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ped, data) = (d.join("ped.npy"), d.join("big.npy"));
    sparse_npy(&ped, "<u2", &[4, 400, 400]);
    sparse_npy(&data, "<u2", &[100_000, 400, 400]);
    let sums = (sum(&ped), std::fs::metadata(&data).unwrap().len());
    for (signal, code, name) in [
        (libc::SIGINT, 130, "SIGINT"),
        (libc::SIGTERM, 143, "SIGTERM"),
    ] {
        let out = d.join("c.clust");
        let child = CLUDA.spawn(&find_args(
            &ped,
            &data,
            &["--out", s(&out), "--device", "cpu", "--threads", "1"],
        ));
        wait_for(d, ".c.clust."); // its temporary file: it is writing c.clust
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: signalling the child this test started.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let o = wait_at_most(child, Duration::from_secs(60));
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{err}");
        assert!(err.contains(&format!("interrupted by {name}")), "{err}");
        assert!(err.contains("c.clust was not written"), "{err}");
        assert!(!out.exists(), "partial output left under its final name");
        assert_eq!(listing(d), ["big.npy", "ped.npy"]);
    }
    assert_eq!((sum(&ped), std::fs::metadata(&data).unwrap().len()), sums);
}

#[test]
fn an_interrupted_gen_leaves_no_npy_promising_missing_frames() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let child = CLUDA.spawn(&gen_args(
        d,
        "--frames 1000000000000 --pedestal-frames 2 --rows 16 --cols 16",
    ));
    // The set is written in a staging directory; its data file appears there.
    let start = Instant::now();
    while !listing(d).iter().any(|n| n.starts_with(".cluda-stage.")) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no staging directory"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: signalling the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = wait_at_most(child, Duration::from_secs(60));
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    // Neither file appears: the set is moved into place whole or not at all.
    assert_eq!(listing(d), Vec::<String>::new());
}

#[test]
fn two_finds_on_one_output_leave_one_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    CLUDA.ok(&gen_args(
        d,
        "--frames 1500 --pedestal-frames 20 --rows 64 --cols 64",
    ));
    let (ped, data) = (d.join("pedestal.npy"), d.join("data.npy"));
    let reference = d.join("ref.clust");
    let args = |out: &Path| {
        vec![
            "find".to_string(),
            "--pedestal".into(),
            s(&ped).into(),
            "--data".into(),
            s(&data).into(),
            "--out".into(),
            s(out).into(),
            "--device".into(),
            "cpu".into(),
            "--threads".into(),
            "1".into(),
        ]
    };
    let a = args(&reference);
    let o = CLUDA.run(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let shared = d.join("shared.clust");
    let mut b = args(&shared);
    // Whichever finishes first, the other replaces its file: allowed.
    b.push("--overwrite".into());
    let b: Vec<&str> = b.iter().map(String::as_str).collect();
    let (x, y) = (CLUDA.spawn(&b), CLUDA.spawn(&b));
    for c in [x, y] {
        let o = wait_at_most(c, Duration::from_secs(120));
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    assert_eq!(
        std::fs::read(&shared).unwrap(),
        std::fs::read(&reference).unwrap()
    );
    no_temporaries(d);
}

/// The CLI's `warning:` for a raw data input of 50 frames, after a successful run that found
/// `found` frames and warned of the `missing` at the end.
fn raw_warning(ped: &Path, master: &Path, found: u64, missing: u64) -> String {
    let o = CLUDA.run(&find_args(ped, master, &["--device", "cpu"]));
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{err}");
    assert!(err.contains("warning: data file"), "{err}");
    assert!(out.starts_with(&format!("frames={found} ")), "{out}");
    let lost = format!("frames missing at the end: {missing} of the 50");
    assert!(err.contains(&lost), "{err}");
    err
}

#[test]
fn lost_raw_frames_are_reported() {
    let (dir, ped, _) = CLUDA.small_set();
    let d = dir.path();

    // A missing `_f1_` data file: 10 of 50 frames readable.
    let master = raw_acquisition(d, "a", 50, 10);
    std::fs::remove_file(d.join("a_d0_f1_0.raw")).unwrap();
    let err = raw_warning(&ped, &master, 10, 40);
    assert!(err.contains("frame numbers 11..=50"), "{err}");
    assert!(err.contains("a_d0_f1_0.raw: data file missing"), "{err}");

    // The last file cut at a record boundary.
    let master = raw_acquisition(d, "b", 50, 10);
    let f4 = d.join("b_d0_f4_0.raw");
    let len = std::fs::metadata(&f4).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&f4)
        .unwrap()
        .set_len(len / 10 * 3)
        .unwrap();
    let err = raw_warning(&ped, &master, 43, 7);
    assert!(err.contains("frame numbers 44..=50"), "{err}");

    // A 0-byte data file.
    let master = raw_acquisition(d, "c", 50, 0);
    std::fs::write(d.join("c_d0_f0_0.raw"), b"").unwrap();
    raw_warning(&ped, &master, 0, 50);
    no_temporaries(d);
}

#[test]
fn detector_types_cluda_does_not_read_are_refused() {
    let (dir, ped, _) = CLUDA.small_set();
    let d = dir.path();
    let master = raw_acquisition(d, "jf", 5, 0);
    let text_json = std::fs::read_to_string(&master)
        .unwrap()
        .replace("\"Generic16\"", "\"Jungfrau\"");
    std::fs::write(&master, text_json).unwrap();
    CLUDA.fails(
        &["find", "--pedestal", s(&ped), "--data", s(&master)],
        &["jf_master_0.json", "\"Jungfrau\" is not one cluda reads"],
    );
    let e = cluda::io::raw::RawReader::open(&master).unwrap_err();
    assert!(e.to_string().contains("Jungfrau"), "{e}");
}

fn mem_available() -> u64 {
    cluda::memory::available_bytes().unwrap_or(u64::MAX)
}

#[test]
fn huge_valid_inputs_are_named_errors_not_aborts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // One 65536 x 65536 frame (8 GiB, sparse): its pedestal state needs ~300 GB.
    if mem_available() < 250_000_000_000 {
        let huge = d.join("huge.npy");
        sparse_npy(&huge, "<u2", &[1, 65536, 65536]);
        CLUDA.fails(
            &find_args(&huge, &huge, &["--device", "cpu"]),
            &["65536 x 65536 pixels", "bytes of memory", "available"],
        );
        let e = cluda::Pedestal::new(65536, 65536, 1, cluda::Precision::F64).unwrap_err();
        assert!(matches!(e, cluda::Error::TooLarge { .. }), "{e}");
    }
    // More descriptor rows than memory holds (at least 50 000 000 x 128).
    let n = (mem_available() / 512 + 1).max(50_000_000);
    if n < 1 << 40 {
        let lhs = d.join("lhs.npy");
        sparse_npy(&lhs, "<f4", &[n, 128]);
        CLUDA.fails(
            &match_args(&lhs, &lhs, &["--version", "cpu"]),
            &["lhs.npy", "bytes of memory"],
        );
        let e = cluda::matcher::read_descriptors(&lhs).unwrap_err();
        assert!(matches!(e, cluda::Error::TooLarge { .. }), "{e}");
    }
}

#[test]
fn fifos_and_absurd_options_are_refused_promptly() {
    let (dir, ped, data) = CLUDA.small_set();
    let d = dir.path();
    let fifo = d.join("fifo.npy");
    mkfifo(&fifo);
    let fifo_master = d.join("f_master_0.json");
    mkfifo(&fifo_master);
    let master = raw_acquisition(d, "r", 4, 0);
    let raw = d.join("r_d0_f0_0.raw");
    std::fs::remove_file(&raw).unwrap();
    mkfifo(&raw);
    for (pedestal, input, name) in [
        (&ped, &fifo, "fifo.npy"),
        (&fifo, &data, "fifo.npy"),
        (&ped, &fifo_master, "f_master_0.json"),
        (&ped, &master, "r_d0_f0_0.raw"),
    ] {
        let c = CLUDA.spawn(&["find", "--pedestal", s(pedestal), "--data", s(input)]);
        let o = wait_at_most(c, Duration::from_secs(20));
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(name) && err.contains("FIFO"), "{err}");
    }
    let c = CLUDA.spawn(&["match", "--lhs", s(&fifo), "--rhs", s(&fifo)]);
    let o = wait_at_most(c, Duration::from_secs(20));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));

    let find = |extra: &[&str], want: &[&str]| {
        let mut a = vec!["find", "--pedestal", s(&ped), "--data", s(&data)];
        a.extend_from_slice(extra);
        CLUDA.fails(&a, want);
    };
    for t in ["100000", "4294967296", "0"] {
        find(&["--threads", t], &["--threads must be between 1 and"]);
    }
    CLUDA.fails(
        &["demo", "--frames", "2", "--threads", "100000"],
        &["--threads"],
    );
    for v in ["-1e-9", "-inf", "-1", "nan", "inf"] {
        find(
            &["--nsigma", v],
            &["--nsigma must be finite and not negative", v],
        );
    }
    let ds = sum(&data);
    let before = listing(d);
    // --plot DIR that is a file, or whose PNG is a directory: refused before any work (so the
    // cluster file is never started).
    let file = d.join("plots_file");
    std::fs::write(&file, b"not a directory").unwrap();
    let out = d.join("never.clust");
    find(
        &["--plot", s(&file), "--out", s(&out)],
        &["`plot`", "plots_file exists and is not a directory"],
    );
    let pd = d.join("plots");
    std::fs::create_dir_all(pd.join("hitmap.png")).unwrap();
    find(
        &["--plot", s(&pd), "--out", s(&out)],
        &["`plot`", "hitmap.png is a directory"],
    );
    assert!(!out.exists());
    assert_eq!(sum(&data), ds);
    let mut after = listing(d);
    after.retain(|n| n != "plots_file" && n != "plots");
    assert_eq!(after, before);
    // gen into a directory whose data.npy is a directory: nothing is written.
    let g = d.join("g");
    std::fs::create_dir_all(g.join("data.npy")).unwrap();
    CLUDA.fails(
        &gen_args(&g, "--frames 2 --rows 8 --cols 8"),
        &["`out`", "data.npy is a directory"],
    );
    assert_eq!(listing(&g), ["data.npy"]);
}

#[test]
fn a_list_shape_is_blamed_on_shape() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("list.npy");
    write_u16_3d(&p, 2, 3, 4, &[0; 24]).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let mut fixed = bytes.clone();
    let start = bytes.windows(9).position(|w| w == b"(2, 3, 4)").unwrap();
    fixed[start..start + 9].copy_from_slice(b"[2, 3, 4]");
    std::fs::write(&p, &fixed).unwrap();
    let e = cluda::io::npy::read_header(&p).unwrap_err().to_string();
    assert!(
        e.contains("'shape' must be a tuple of integers, not a list"),
        "{e}"
    );
    assert!(!e.contains("descr"), "{e}");
}

#[test]
fn library_writers_and_reader_reports() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // An NpyWriter dropped before finish leaves nothing; a ClusterFileWriter likewise.
    let p = d.join("x.npy");
    let mut w = cluda::io::NpyWriter::<u16>::create(&p, &[4, 2, 2]).unwrap();
    w.write(&[1; 8]).unwrap();
    drop(w);
    let c = d.join("x.clust");
    drop(cluda::io::ClusterFileWriter::create(&c).unwrap());
    assert!(listing(d).is_empty(), "{:?}", listing(d));
    // The reader's report counts the frames of a missing data file.
    let master = raw_acquisition(d, "a", 50, 10);
    std::fs::remove_file(d.join("a_d0_f1_0.raw")).unwrap();
    let mut r = cluda::io::raw::RawReader::open(&master).unwrap();
    let mut frames = Vec::new();
    while !r.next_frames(64, &mut frames).unwrap().is_empty() {}
    let g = r.report();
    assert_eq!((g.frames_delivered, g.unaccounted()), (10, 40));
    assert_eq!(g.absent_files, [d.join("a_d0_f1_0.raw")]);
    assert!(!g.is_clean());
}
