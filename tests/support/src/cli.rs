//! Running the `cluda` binary from a test: its output, its errors, small generated inputs.
//!
//! The binary's path is known only where a test or bench of the `cluda` package is compiled
//! (`env!("CARGO_BIN_EXE_cluda")`), so a test names it once:
//! `const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The `cluda` binary at this path.
#[derive(Clone, Copy, Debug)]
pub struct Cli(pub &'static str);

impl Cli {
    /// Runs `cluda args...` to the end and returns its exit status and output.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(self.0)
            .args(args)
            .output()
            .expect("the cluda binary runs")
    }

    /// Starts `cluda args...` with stdout and stderr piped.
    pub fn spawn(&self, args: &[&str]) -> Child {
        Command::new(self.0)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the cluda binary starts")
    }

    /// Runs `cluda args...` expecting a user error: exit code 1, an `error: ` message on
    /// stderr holding every one of `want`, no panic and nothing on stdout. Returns stderr.
    pub fn fails(&self, args: &[&str], want: &[&str]) -> String {
        let out = self.run(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("error: "), "{args:?}: {err}");
        for w in want {
            assert!(err.contains(w), "{args:?}: wanted `{w}` in: {err}");
        }
        assert!(
            !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
        err
    }

    /// Small generated inputs in `dir` (`cluda gen`: 40 dark frames and 12 data frames of
    /// 24 x 36, seed 5); returns the paths of the pedestal and the data `.npy`.
    pub fn gen_small(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let out = self.run(&[
            "gen",
            "--out",
            s(dir),
            "--frames",
            "12",
            "--pedestal-frames",
            "40",
            "--rows",
            "24",
            "--cols",
            "36",
            "--seed",
            "5",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("pedestal.npy (40 x 24 x 36 uint16)"),
            "{stdout}"
        );
        assert!(
            stdout.contains("data.npy (12 x 24 x 36 uint16)"),
            "{stdout}"
        );
        (dir.join("pedestal.npy"), dir.join("data.npy"))
    }
}

/// Bytes (a process's stdout or stderr) as text, invalid UTF-8 replaced.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A path as an argument (test paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}
