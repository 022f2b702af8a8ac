//! With the `gpu` feature: compiles the `gpu` crate to PTX with rustc's NVPTX backend, twice
//! (a baseline module for sm_80 and a tuned one for sm_90), and hands their paths to the host
//! crate as `CLUDA_PTX_SM80_PATH` and `CLUDA_PTX_SM90_PATH` (see docs/toolchain.md).
//! Without it, no PTX is built and only the commit id is passed on. The feature `experimental`
//! is handed on to the kernel crate (`--features experimental`: V4's fused matcher kernels).
//!
//! The kernels need the nightly pinned in `rust-toolchain.toml` (nvptx features, `-Zbuild-std`),
//! but cargo builds this script with whatever toolchain the *dependent* crate uses (a stable
//! crate depending on cluda ignores cluda's `rust-toolchain.toml`). So the nested build runs
//! the pinned toolchain explicitly through `rustup run <channel> cargo`, with every variable
//! the outer cargo or user set to steer rustc/cargo removed from its environment. A missing
//! rustup, toolchain or component fails with the one `rustup toolchain install` command that
//! fixes it.
//!
//! The nested cargo uses its own target directory under `OUT_DIR` (a nested cargo on the outer
//! one waits forever on the build lock), shared by both modules so `core` is built once, and
//! the project's own bitcode-to-PTX linker, `tools/ptx-linker`, pointed at the pinned
//! toolchain's LLVM tools.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, exit};

/// The constants the kernels and the host share (block size, ...): the kernel crate's own
/// file, compiled into this script too, so the launch bounds below follow `layout::BLOCK`.
#[allow(dead_code, reason = "the script reads only the block size")]
#[path = "gpu/src/layout.rs"]
mod layout;

/// The PTX modules built: (name, `-C target-cpu`, `-C target-feature`).
///
/// * `sm80`, the baseline every supported GPU (compute capability 8.0 and newer: A100, RTX
///   30xx/40xx, L4, L40, H100/H200) loads. PTX ISA 7.0 is the lowest that the kernels accept:
///   `redux.sync` (the warp sums of the finder's compaction) needs PTX 7.0 and sm_80; the
///   rest (`nanosleep` 6.3, `fence.acq_rel`, `red.relaxed.gpu`, `shfl.sync`, `vote.sync`
///   6.0) is older.
/// * `sm90`, tuned for Hopper (H100/H200), the module the benchmarks measured.
const MODULES: [(&str, &str, &str); 2] = [("sm80", "sm_80", "+ptx70"), ("sm90", "sm_90", "+ptx80")];

fn main() {
    let root =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    commit_id(&root);
    if env::var_os("CARGO_FEATURE_GPU").is_none() {
        return; // no kernels without the `gpu` feature
    }
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for p in [
        "gpu/src",
        "gpu/Cargo.toml",
        "tools/ptx-linker",
        "rust-toolchain.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    let channel = pinned_channel(&root);
    let llvm_bin = check_toolchain(&channel);
    let linker = root.join("tools/ptx-linker");
    let target_dir = out.join("gpu-target");
    // The feature `experimental` (V4's fused matcher kernels) is the kernel crate's too.
    let features: &[&str] = if env::var_os("CARGO_FEATURE_EXPERIMENTAL").is_some() {
        &["--features", "experimental"]
    } else {
        &[]
    };
    for (name, cpu, feature) in MODULES {
        let mut cmd = Command::new("rustup");
        clean_env(&mut cmd);
        cmd.current_dir(&root)
            .args(["run", &channel, "cargo"])
            .args(["rustc", "--release", "--lib", "--crate-type", "cdylib"])
            .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
            .args(features)
            .arg("--manifest-path")
            .arg(root.join("gpu/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir)
            .args(["--", "-C"])
            .arg(format!("target-cpu={cpu}"))
            .arg("-C")
            .arg(format!("target-feature={feature}"))
            .env("CARGO_TARGET_NVPTX64_NVIDIA_CUDA_LINKER", &linker)
            .env("CLUDA_LLVM_BIN", &llvm_bin)
            .env("CARGO_PROFILE_RELEASE_LTO", "fat")
            .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")
            .env("CARGO_PROFILE_RELEASE_PANIC", "abort")
            .env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "3")
            .env("CARGO_PROFILE_RELEASE_DEBUG", "false");
        let status = cmd.status().unwrap_or_else(|e| {
            fail(&format!(
                "could not start `rustup run {channel} cargo` to build the PTX: {e}"
            ))
        });
        if !status.success() {
            fail(&format!(
                "compiling gpu/ to PTX for {cpu} with the {channel} toolchain failed (see the errors above)"
            ));
        }
        let built = target_dir.join("nvptx64-nvidia-cuda/release/cluda_gpu.ptx");
        let text = std::fs::read_to_string(&built)
            .unwrap_or_else(|e| fail(&format!("reading the PTX at {}: {e}", built.display())));
        let ptx = out.join(format!("cluda_{name}.ptx"));
        std::fs::write(&ptx, with_launch_bounds(&text))
            .unwrap_or_else(|e| fail(&format!("writing {}: {e}", ptx.display())));
        if name == "sm90" {
            // The tuned module also under its earlier name, for scripts that read the PTX.
            let old = out.join("cluda.ptx");
            std::fs::copy(&ptx, &old)
                .unwrap_or_else(|e| fail(&format!("writing {}: {e}", old.display())));
        }
        println!(
            "cargo:rustc-env=CLUDA_PTX_{}_PATH={}",
            name.to_ascii_uppercase(),
            ptx.display()
        );
    }
}

/// Prints `msg` as this build script's error and stops the build.
fn fail(msg: &str) -> ! {
    eprintln!("error: cluda build.rs: {msg}");
    exit(1)
}

/// The `channel` of the `rust-toolchain.toml` next to this script (the nightly the kernels
/// were verified with).
fn pinned_channel(root: &Path) -> String {
    let path = root.join("rust-toolchain.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| fail(&format!("reading {}: {e}", path.display())));
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("channel"))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_string())
        .find(|v| !v.is_empty())
        .unwrap_or_else(|| fail(&format!("{} names no `channel`", path.display())))
}

/// Checks that rustup, the pinned toolchain and its `rust-src` and `llvm-tools` components
/// are installed; returns the directory of the toolchain's LLVM tools (`llvm-link`, `opt`,
/// `llc`) for `tools/ptx-linker`.
fn check_toolchain(channel: &str) -> PathBuf {
    let install = format!(
        "rustup toolchain install {channel} --profile minimal --component rust-src --component llvm-tools"
    );
    let hint = format!(
        "the `gpu` feature (on by default) compiles cluda's kernels with the pinned toolchain \
         {channel}; install it with\n    {install}\nor build cluda with `default-features = false` \
         (CPU only)"
    );
    let mut cmd = Command::new("rustup");
    clean_env(&mut cmd);
    // A missing toolchain is reported with the command to install it, not downloaded here.
    cmd.env("RUSTUP_AUTO_INSTALL", "0")
        .env_remove("RUST_BACKTRACE");
    let sysroot = match cmd
        .args(["run", channel, "rustc", "--print", "sysroot"])
        .output()
    {
        Err(e) => fail(&format!("rustup could not be started ({e}): {hint}")),
        Ok(o) if !o.status.success() => fail(&format!(
            "`rustup run {channel} rustc` failed ({}): {hint}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
        )),
        Ok(o) => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
    };
    let host = env::var("HOST").expect("cargo sets HOST");
    let llvm_bin = sysroot.join("lib/rustlib").join(&host).join("bin");
    if !sysroot.join("lib/rustlib/src/rust/library/core").is_dir() {
        fail(&format!("the component rust-src is missing: {hint}"));
    }
    if !llvm_bin.join("llvm-link").exists() {
        fail(&format!("the component llvm-tools is missing: {hint}"));
    }
    llvm_bin
}

/// Removes from `cmd`'s environment everything the outer cargo, rustup or the user set that
/// would steer the nested build away from the pinned toolchain and this script's settings.
fn clean_env(cmd: &mut Command) {
    const EXACT: [&str; 14] = [
        "RUSTUP_TOOLCHAIN",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTDOC",
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC_BOOTSTRAP",
        "CARGO",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_ENCODED_RUSTDOCFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_INCREMENTAL",
        "CARGO_MANIFEST_DIR",
    ];
    const PREFIXES: [&str; 6] = [
        "CARGO_BUILD_",
        "CARGO_PROFILE_",
        "CARGO_TARGET_",
        "CARGO_CFG_",
        "CARGO_FEATURE_",
        "CARGO_PKG_",
    ];
    for (key, _) in env::vars_os() {
        let Some(k) = key.to_str() else { continue };
        if EXACT.contains(&k) || PREFIXES.iter().any(|p| k.starts_with(p)) {
            cmd.env_remove(&key);
        }
    }
}

/// Entry-name prefixes and their PTX performance directives (CUDA C's `__launch_bounds__`,
/// which Rust cannot attach): the one-tile run kernels (blocks of [`layout::BLOCK`] threads)
/// must fit five blocks per SM, so that a 400x400 frame's 625 tiles are resident at once on a
/// 132-SM H200 (the cooperative grid covers every tile with one tile per block).
fn launch_bounds() -> [(&'static str, String); 1] {
    [(
        "cluda_run1_",
        format!(".maxntid {}, 1, 1\n.minnctapersm 5\n", layout::BLOCK),
    )]
}

/// `ptx` with the [`launch_bounds`] directives inserted after the parameter list of the
/// matching entries.
fn with_launch_bounds(ptx: &str) -> String {
    let bounds = launch_bounds();
    let mut out = String::with_capacity(ptx.len() + 4096);
    let mut pending: Option<&str> = None;
    for line in ptx.lines() {
        if let Some(name) = line.trim_start().strip_prefix(".visible .entry ") {
            pending = bounds
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
                .map(|(_, directives)| directives.as_str());
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
