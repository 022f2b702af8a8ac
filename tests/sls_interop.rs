//! The interop check against PSI's own receiver: `tools/sls-interop` runs real acquisitions
//! through slsDetectorPackage's virtual MOENCH detector server and `slsReceiver` (built from the
//! `slsdet` source distribution, pinned in that script) and checks that `cluda stream` on the
//! receiver's ZMQ stream and `cluda find` on its raw files write byte-identical cluster files,
//! find the photons where the server put them and report lost packets alike, on one and two
//! UDP interfaces, and with a receiver ROI (clusters in detector coordinates; several ROIs
//! refused). See docs/stream.md ("Against the real receiver").
//!
//! It needs the receiver built (a few minutes, a 20 MB download): ignored unless asked for.
//!
//! ```sh
//! tools/sls-interop --build-only
//! cargo test --release --test sls_interop -- --ignored
//! ```
//!
//! Asked for without the build, it fails saying so (it never passes without running).

use std::path::PathBuf;
use std::process::Command;

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The release pinned in tools/sls-interop (its one `SLS_VERSION=` line: the one place).
fn pinned_version() -> String {
    let script =
        std::fs::read_to_string(root().join("tools/sls-interop")).expect("tools/sls-interop");
    let versions: Vec<&str> = script
        .lines()
        .filter_map(|l| l.strip_prefix("SLS_VERSION="))
        .collect();
    assert_eq!(
        versions.len(),
        1,
        "tools/sls-interop must pin SLS_VERSION on exactly one line"
    );
    versions[0].trim().to_string()
}

/// Where tools/sls-interop caches the build: $CARGO_TARGET_DIR (or target)/sls/<version>.
fn receiver_bin(version: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    target.join("sls").join(version).join("build/bin")
}

/// The version is pinned once, and the script's help runs (no build, no network).
#[test]
fn script_pins_one_version() {
    let version = pinned_version();
    assert!(
        version.split('.').count() == 3 && version.split('.').all(|p| p.parse::<u32>().is_ok()),
        "SLS_VERSION={version} is not a release number"
    );
    let out = Command::new("bash")
        .arg(root().join("tools/sls-interop"))
        .arg("--help")
        .output()
        .expect("bash tools/sls-interop --help");
    assert!(out.status.success(), "--help failed: {out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("--version"));
}

#[test]
#[ignore = "needs slsDetectorPackage built by tools/sls-interop (tools/sls-interop --build-only)"]
fn stream_and_find_agree_on_the_real_receiver() {
    let version = pinned_version();
    let bin = receiver_bin(&version);
    for b in [
        "moenchDetectorServer_virtual",
        "slsReceiver",
        "sls_detector_put",
        "sls_detector_acquire",
    ] {
        assert!(
            bin.join(b).is_file(),
            "{} is missing: build slsDetectorPackage {version} first with tools/sls-interop --build-only",
            bin.join(b).display()
        );
    }
    let out = Command::new("bash")
        .arg(root().join("tools/sls-interop"))
        .args(["--cluda", env!("CARGO_BIN_EXE_cluda")])
        .output()
        .expect("bash tools/sls-interop");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "tools/sls-interop failed ({})",
        out.status
    );
    let passes = stdout.lines().filter(|l| l.starts_with("PASS ")).count();
    assert!(passes > 0 && !stdout.lines().any(|l| l.starts_with("FAIL ")));
}
