//! Compiles the `gpu` crate to PTX with rustc's NVPTX backend (see docs/toolchain.md) and
//! hands the PTX's path to the host crate as `CLUDA_PTX_PATH`.
//!
//! The nested cargo uses its own target directory (a nested cargo on the outer one waits forever
//! on the build lock) and the project's own bitcode-to-PTX linker, `tools/ptx-linker`.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let linker = root.join("tools/ptx-linker");
    for p in [
        "gpu/src",
        "gpu/Cargo.toml",
        "tools/ptx-linker",
        "rust-toolchain.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    let target_dir = out.join("gpu-target");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        .args(["rustc", "--release", "--lib", "--crate-type", "cdylib"])
        .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
        .arg("--manifest-path")
        .arg(root.join("gpu/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .args([
            "--",
            "-C",
            "target-cpu=sm_90",
            "-C",
            "target-feature=+ptx80",
        ])
        .env("CARGO_TARGET_NVPTX64_NVIDIA_CUDA_LINKER", &linker)
        .env("CARGO_PROFILE_RELEASE_LTO", "fat")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
        .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
        .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("build.rs: could not start cargo to build the PTX");
    assert!(
        status.success(),
        "build.rs: compiling gpu/ to PTX failed (see the errors above)"
    );
    let built = target_dir.join("nvptx64-nvidia-cuda/release/cluda_gpu.ptx");
    let text = std::fs::read_to_string(&built)
        .unwrap_or_else(|e| panic!("build.rs: reading the PTX at {}: {e}", built.display()));
    let ptx = out.join("cluda.ptx");
    std::fs::write(&ptx, with_launch_bounds(&text))
        .unwrap_or_else(|e| panic!("build.rs: writing {}: {e}", ptx.display()));
    println!("cargo:rustc-env=CLUDA_PTX_PATH={}", ptx.display());
    commit_id(&root);
}

/// Entry-name prefixes and their PTX performance directives (CUDA C's `__launch_bounds__`,
/// which Rust cannot attach): the one-tile run kernels must fit five 256-thread blocks per
/// SM, so that a 400x400 frame's 625 tiles are resident at once on a 132-SM H200 (the
/// cooperative grid covers every tile with one tile per block).
const LAUNCH_BOUNDS: [(&str, &str); 1] = [("cluda_run1_", ".maxntid 256, 1, 1\n.minnctapersm 5\n")];

/// `ptx` with the [`LAUNCH_BOUNDS`] directives inserted after the parameter list of the
/// matching entries.
fn with_launch_bounds(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 4096);
    let mut pending: Option<&str> = None;
    for line in ptx.lines() {
        if let Some(name) = line.trim_start().strip_prefix(".visible .entry ") {
            pending = LAUNCH_BOUNDS
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
                .map(|(_, directives)| *directives);
        }
        if pending.is_some() && line.trim() == "{" {
            out.push_str(pending.take().unwrap_or_default());
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Hands the commit being built to the crate as `CLUDA_COMMIT` (benchmarks record it), when
/// this is a git checkout; "unknown" otherwise.
fn commit_id(root: &std::path::Path) {
    for f in [".git/HEAD", ".git/logs/HEAD"] {
        if root.join(f).exists() {
            println!("cargo:rerun-if-changed={}", root.join(f).display());
        }
    }
    let id = Command::new("git")
        .current_dir(root)
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CLUDA_COMMIT={id}");
}
