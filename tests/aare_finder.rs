//! cluda's clusters against aare's own: `aare-find` (tools/aare-build: aare's `ClusterFinder`
//! and `ClusterFinderMT`, built from the source distribution of the release pinned there) and
//! `cluda find --threshold frozen` (aare's threshold: the noise when the pedestal filled) must
//! write byte-identical cluster files, for every window size, on frames of several shapes and
//! n_sigma values. aare's `ClusterFinderMT` is checked on one thread: with more, each thread
//! keeps its own pedestal and the clusters are not the single finder's.
//!
//! It needs aare built (a 2 MB download and about a minute): ignored unless asked for.
//!
//! ```sh
//! tools/aare-build
//! cargo test --release --test aare_finder -- --ignored
//! ```
//!
//! Asked for without the build, it fails saying so (it never passes without running).
//! `cargo bench --bench peers` checks the same on the bench's larger files, and times both.

use std::path::{Path, PathBuf};
use std::process::Command;

use support::cli::{Cli, s, text};
use support::peers::{aare_find, field, pinned_version};

const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));

/// aare-find, built from the pinned release.
fn aare() -> PathBuf {
    let exe = aare_find().expect("aare-find not found: run tools/aare-build first");
    let out = run(Command::new(&exe).arg("--help"));
    assert!(out.contains("--finder mt|single"), "{out}");
    exe
}

fn run(c: &mut Command) -> String {
    let out = c.output().expect("the command starts");
    assert!(out.status.success(), "{c:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// aare-find's cluster file and its summary line.
fn theirs(
    exe: &Path,
    ped: &Path,
    data: &Path,
    size: usize,
    nsigma: &str,
    how: &[&str],
    out: &Path,
) -> (Vec<u8>, String) {
    let line = run(Command::new(exe)
        .args(["--pedestal", s(ped), "--data", s(data), "--out", s(out)])
        .args(["--cluster", &size.to_string(), "--nsigma", nsigma])
        .args(how));
    (std::fs::read(out).expect("aare's cluster file"), line)
}

/// `cluda find --threshold frozen`'s cluster file on the CPU.
fn ours(ped: &Path, data: &Path, size: usize, nsigma: &str, out: &Path) -> Vec<u8> {
    CLUDA.ok(&[
        "find",
        "--device",
        "cpu",
        "--threshold",
        "frozen",
        "--pedestal",
        s(ped),
        "--data",
        s(data),
        "--cluster",
        &size.to_string(),
        "--nsigma",
        nsigma,
        "--out",
        s(out),
        "--overwrite",
    ]);
    std::fs::read(out).expect("cluda's cluster file")
}

#[test]
#[ignore = "needs aare-find built by tools/aare-build"]
fn aare_finders_write_cludas_cluster_files() {
    let exe = aare();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let pinned = pinned_version(&root).expect("the pinned aare release");
    let dir = tempfile::tempdir().expect("a temporary directory");
    // (rows, cols, frames, pedestal frames, seed): a square frame, a wide one with odd sides,
    // a tall one narrower than the 9x9 window is wide twice over.
    let shapes = [
        (64, 64, 60, 100, 1),
        (37, 101, 40, 64, 7),
        (130, 17, 30, 50, 3),
    ];
    let mut compared = 0;
    for (rows, cols, frames, peds, seed) in shapes {
        let set = dir.path().join(format!("{rows}x{cols}"));
        CLUDA.ok(&[
            "gen",
            "--out",
            s(&set),
            "--rows",
            &rows.to_string(),
            "--cols",
            &cols.to_string(),
            "--frames",
            &frames.to_string(),
            "--pedestal-frames",
            &peds.to_string(),
            "--seed",
            &seed.to_string(),
        ]);
        let (ped, data) = (set.join("pedestal.npy"), set.join("data.npy"));
        for size in [3, 5, 7, 9] {
            for nsigma in ["5", "3.5"] {
                let want = ours(&ped, &data, size, nsigma, &set.join("cluda.clust"));
                for how in [
                    &["--finder", "single"][..],
                    &["--finder", "mt", "--threads", "1"],
                ] {
                    let (got, line) = theirs(
                        &exe,
                        &ped,
                        &data,
                        size,
                        nsigma,
                        how,
                        &set.join("aare.clust"),
                    );
                    assert_eq!(field(&line, "aare"), Some(pinned.as_str()), "{line}");
                    assert_eq!(
                        field(&line, "frames"),
                        Some(frames.to_string().as_str()),
                        "{line}"
                    );
                    assert!(
                        got == want,
                        "{rows}x{cols}, {size}x{size}, n_sigma {nsigma}, aare-find {how:?}: aare's file \
                         ({} bytes) differs from cluda's ({} bytes); {line}",
                        got.len(),
                        want.len()
                    );
                    compared += 1;
                }
            }
        }
        // Clusters were found (the files hold more than the frame headers).
        assert!(
            std::fs::metadata(set.join("cluda.clust"))
                .map(|m| m.len())
                .unwrap_or(0)
                > 8 * frames as u64
        );
    }
    assert_eq!(compared, 3 * 4 * 2 * 2);
}
