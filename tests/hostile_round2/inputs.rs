//! Inputs that turn hostile: a thread count the library must cap, a raw master that lies
//! about its frames, a `.npy` cut short while it is read or mapped.

use std::time::{Duration, Instant};

use support::cli::{find_args, s, text};
use support::files::{listing, sparse_npy, sum};
use support::stream::spawn_scratch;

use crate::{CLUDA, fails};
use support::raw::gen_small_config;

/// The library caps CPU threads as the command line does: a million threads is an error
/// naming `threads`, returned at once (Python's `ClusterFinder(..., threads=10**6)` started
/// threads until stopped).
#[test]
fn the_library_caps_thread_counts() {
    let config = cluda::FinderConfig::new(8, 8);
    let t = Instant::now();
    for bad in [0, 1_000_000, usize::MAX] {
        let e = cluda::finder::cpu::CpuFinder::with_threads(config.clone(), bad)
            .err()
            .expect("refused");
        assert!(e.to_string().contains("`threads`"), "{e}");
    }
    assert!(t.elapsed() < Duration::from_secs(1));
    let max = cluda::finder::cpu::max_threads();
    assert!(cluda::finder::cpu::CpuFinder::with_threads(config, max).is_ok());
}

/// A raw master saying `"Total Frames": 0` while its data files hold frames is the error the
/// docs call it (it was read without a word).
#[test]
fn a_raw_master_with_total_frames_0_is_an_error() {
    use cluda::io::raw::RawWriter;
    let (dir, ped, _) = CLUDA.small_set();
    let d = dir.path();
    let config = gen_small_config();
    let mut w = RawWriter::create(d, "z", 0, config).expect("writer");
    for n in 1..=4u64 {
        w.write_frame(n, &vec![4600; 24 * 36]).expect("frame");
    }
    let master = w.finish(None).expect("finish");
    // As an older receiver writes it: no "Frames in File", and here "Total Frames" 0.
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&master).expect("master")).expect("json");
    let keys = json.as_object_mut().expect("object");
    assert_eq!(keys["Total Frames"], 4);
    keys.insert("Total Frames".into(), 0.into());
    keys.remove("Frames in File");
    std::fs::write(&master, json.to_string()).expect("write");
    let before = sum(&master);
    fails(
        &find_args(&ped, &master, &["--device", "cpu"]),
        &[
            "z_master_0.json",
            "hold 4 frames, more than the 0",
            "Total Frames",
        ],
    );
    let e = cluda::io::raw::RawReader::open(&master).expect_err("refused");
    assert!(e.to_string().contains("Total Frames"), "{e}");
    assert_eq!(sum(&master), before);
}

/// A `.npy` cut short after it was opened: the error names the file and the frames (it said
/// only "failed to fill whole buffer").
#[test]
fn an_input_truncated_during_the_read_names_file_and_frames() {
    let dir = tempfile::tempdir().expect("dir");
    let p = dir.path().join("cut.npy");
    cluda::io::npy::write_u16_3d(&p, 10, 16, 16, &[7; 2560]).expect("write");
    let len = std::fs::metadata(&p).expect("meta").len();
    for threads in [0, 1, 4] {
        let mut f = cluda::io::NpyFrames::open(&p).expect("open");
        // Frames 6.. are gone.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .expect("open for writing")
            .set_len(len - 4 * 512)
            .expect("truncate");
        let e = if threads == 0 {
            let mut buf = Vec::new();
            f.read_into(10, &mut buf).expect_err("short")
        } else {
            let mut buf = vec![0u16; 10 * 256];
            f.fill(&mut buf, threads).expect_err("short")
        };
        let m = e.to_string();
        assert!(
            m.contains("cut.npy") && m.contains("frames ") && m.contains("shrink"),
            "{m}"
        );
        assert!(!m.contains("failed to fill whole buffer"), "{m}");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .expect("open")
            .set_len(len)
            .expect("restore");
    }
}

/// A mapped input (`--input map`, and the CPU finder's default `auto`, which maps too) that
/// another program truncates mid-run: an error naming the file (exit 1), never a SIGBUS, and
/// no temporary file left; with several inputs the one truncated fails and the other is
/// still found and written. The truncation lands while the finder reads a chunk (a read of
/// the map caught by the SIGBUS handler) or between chunks (the length check before each);
/// either is an error naming the file. A SIGBUS that is no fault in a map (sent with `kill`)
/// is not taken for one: it still ends the process.
#[test]
fn a_mapped_input_that_shrinks_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let (ped, data, small) = (d.join("ped.npy"), d.join("big.npy"), d.join("small.npy"));
    sparse_npy(&ped, "<u2", &[4, 400, 400]);
    for how in ["map", "auto", "several", "kill"] {
        sparse_npy(&data, "<u2", &[200_000, 400, 400]);
        let out = d.join("c.clust");
        let out_dir = d.join("out");
        let mut args = vec![
            "find",
            "--pedestal",
            s(&ped),
            "--device",
            "cpu",
            "--threads",
            "1",
        ];
        let temporary = if how == "several" {
            sparse_npy(&small, "<u2", &[3, 400, 400]);
            args.extend(["--data", s(&data), s(&small), "--out-dir", s(&out_dir)]);
            ".big.clust."
        } else {
            args.extend(["--data", s(&data), "--out", s(&out)]);
            ".c.clust."
        };
        if matches!(how, "map" | "kill") {
            args.extend(["--input", "map"]);
        }
        let child = spawn_scratch(&args);
        let where_tmp = if how == "several" { &out_dir } else { d };
        let t = Instant::now();
        while !(where_tmp.is_dir() && listing(where_tmp).iter().any(|n| n.starts_with(temporary))) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{how}: no temporary file"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(300));
        if how == "kill" {
            assert!(child.signal(libc::SIGBUS), "kill");
            let o = child.wait(Duration::from_secs(60));
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                o.status.signal(),
                Some(libc::SIGBUS),
                "{how}: {:?}",
                o.status
            );
            // Killed: nothing could remove its temporary file.
            for n in listing(d) {
                if n.starts_with(temporary) {
                    std::fs::remove_file(d.join(n)).expect("remove");
                }
            }
            continue;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(&data)
            .expect("open")
            .set_len(4096)
            .expect("truncate");
        let o = child.wait(Duration::from_secs(60));
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{how}: {:?}: {err}", o.status);
        assert!(
            err.contains("big.npy") && err.contains("shrank while it was mapped"),
            "{how}: {err}"
        );
        eprintln!(
            "{how}: caught {}",
            if err.contains("found pages gone") {
                "by the SIGBUS handler"
            } else {
                "by the length check"
            }
        );
        assert!(!out.exists(), "{how}");
        if how == "several" {
            let stdout = text(&o.stdout);
            assert!(stdout.contains("big.npy failed"), "{how}: {stdout}");
            assert!(stdout.contains("inputs=2 failed=1"), "{how}: {stdout}");
            assert_eq!(listing(&out_dir), ["small.clust"], "{how}: {err}");
            let (numbers, _) =
                cluda::io::read_cluster_file(&out_dir.join("small.clust"), cluda::ClusterSize::S3)
                    .expect("the other input's clusters");
            assert_eq!(numbers, [0, 1, 2], "{how}");
            std::fs::remove_dir_all(&out_dir).expect("clean");
            std::fs::remove_file(&small).expect("clean");
        }
        assert_eq!(listing(d), ["big.npy", "ped.npy"], "{how}");
    }
}

/// The library's engine on a mapped input truncated while its frames are found: the read of
/// the map that finds pages gone does not end the process (SIGBUS); the run fails with an
/// error naming the file, and no frame read after the truncation reaches the visitor.
#[test]
fn the_library_survives_a_mapped_input_truncated_while_read() {
    use cluda::engine::{EngineConfig, find_stream};
    use cluda::io::NpyFrames;
    use cluda::{ClusterFinder, ClusterSize, CpuFinder, FinderConfig, Frames};
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("big.npy");
    let (rows, cols) = (64, 64);
    sparse_npy(&path, "<u2", &[4096, rows as u64, cols as u64]);
    let config = FinderConfig::new(rows, cols)
        .size(ClusterSize::S3)
        .pedestal_frames(4);
    let mut finder = CpuFinder::new(config).expect("finder");
    finder
        .push_pedestal(Frames::new(&vec![0u16; 4 * rows * cols], 4, rows, cols).expect("dark"))
        .expect("pedestal");
    let mut source = NpyFrames::open(&path).expect("open");
    let engine = EngineConfig {
        chunk: 256,
        slots: 3,
        map: true,
    };
    let mut visits = 0u64;
    let e = find_stream(&mut finder, &mut source, engine, &mut |n, _| {
        visits += 1;
        if n == 0 {
            // The reader thread checks the next chunks' length (and queues them) meanwhile:
            // it is a read of the map that finds them gone.
            std::thread::sleep(Duration::from_millis(300));
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .expect("open")
                .set_len(128)
                .expect("truncate");
        }
        Ok(())
    })
    .expect_err("a truncated input fails");
    let msg = e.to_string();
    assert!(
        msg.contains("big.npy") && msg.contains("found pages gone"),
        "{msg}"
    );
    // Frame 0's visit truncated the file; every later frame of the chunk was read from the
    // map afterwards (zeros) and is not handed on.
    assert_eq!(visits, 1);
    // The map is gone with the run; the source was at its end (mapped whole).
    assert_eq!(source.remaining(), 0);
}
