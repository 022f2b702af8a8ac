//! Running the `cluda` binary from a test: its output, its errors, small generated inputs.
//!
//! The binary's path is known at compile time only where a test or bench of the `cluda`
//! package is compiled (`env!("CARGO_BIN_EXE_cluda")`), so a test names it once:
//! `const CLUDA: Cli = Cli(env!("CARGO_BIN_EXE_cluda"));`. [`Cli::found`] is the same binary
//! found at run time ([`cluda_bin`]: `$CLUDA_BIN` first, for tests staged on another machine).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;

/// The `cluda` binary at this path.
#[derive(Clone, Copy, Debug)]
pub struct Cli(pub &'static str);

impl Cli {
    /// The binary [`cluda_bin`] finds.
    pub fn found() -> Cli {
        static PATH: OnceLock<String> = OnceLock::new();
        Cli(PATH.get_or_init(|| s(&cluda_bin()).to_string()))
    }

    /// Runs `cluda args...` to the end and returns its exit status and output.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new(self.0)
            .args(args)
            .output()
            .expect("the cluda binary runs")
    }

    /// Runs `cluda args...` expecting success (failing the test with its stderr otherwise);
    /// returns its stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
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

    /// Runs `cluda args...` expecting a user error (see [`user_error`]). Returns stderr.
    #[track_caller]
    pub fn fails(&self, args: &[&str], want: &[&str]) -> String {
        let out = self.run(args);
        user_error(
            args,
            out.status,
            &text(&out.stdout),
            &text(&out.stderr),
            want,
        )
    }

    /// A fresh temporary directory holding [`Cli::gen_small`]'s inputs; returns it with the
    /// paths of the pedestal and the data `.npy`.
    pub fn small_set(&self) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().expect("dir");
        let (ped, data) = self.gen_small(dir.path());
        (dir, ped, data)
    }

    /// Small generated inputs in `dir` (`cluda gen`: 40 dark frames and 12 data frames of
    /// 24 x 36, seed 5); returns the paths of the pedestal and the data `.npy`.
    pub fn gen_small(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let options = "--frames 12 --pedestal-frames 40 --rows 24 --cols 36 --seed 5";
        let out = self.run(&gen_args(dir, options));
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

/// The `cluda` binary: `$CLUDA_BIN`, else the one cargo built for this test or bench
/// (`target/<profile>/cluda`, the path `env!("CARGO_BIN_EXE_cluda")` names, one folder above
/// the test's executable in `deps/`), else (a test staged on another machine by
/// tools/gpu-pack) the `cluda` beside this test's executable.
pub fn cluda_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CLUDA_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("this test's executable");
    let beside = exe.with_file_name("cluda");
    let built = exe
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join("cluda"))
        .filter(|p| p.exists());
    built.unwrap_or(beside)
}

/// Fails the test unless a run of `cluda args...` that ended with `status` and printed
/// `stdout` and `stderr` was a user error: exit code 1, an `error: ` message on stderr holding
/// every one of `want`, no panic and nothing on stdout. Returns stderr.
#[track_caller]
pub fn user_error(
    args: &[&str],
    status: ExitStatus,
    stdout: &str,
    stderr: &str,
    want: &[&str],
) -> String {
    let err = stderr;
    assert_eq!(status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains("error: "), "{args:?}: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: wanted `{w}` in: {err}");
    }
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{args:?}: {err}"
    );
    assert!(stdout.is_empty(), "{args:?}: {stdout}");
    err.to_string()
}

/// The words of options written out as one line (`"--device cpu --acquisitions 1"`), as
/// arguments: fixed options read as a user types them.
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// `find --pedestal PEDESTAL --data DATA`, then `more`: the arguments of most `cluda find`
/// runs.
pub fn find_args<'a>(pedestal: &'a Path, data: &'a Path, more: &[&'a str]) -> Vec<&'a str> {
    run_args("find", pedestal, data, more)
}

/// `COMMAND --pedestal PEDESTAL --data DATA`, then `more`: the arguments of a `cluda find`,
/// `eta` or `image` run.
pub fn run_args<'a>(
    command: &'a str,
    pedestal: &'a Path,
    data: &'a Path,
    more: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![command, "--pedestal", s(pedestal), "--data", s(data)];
    args.extend_from_slice(more);
    args
}

/// `match --lhs LHS --rhs RHS`, then `more`: the arguments of a `cluda match` run.
pub fn match_args<'a>(lhs: &'a Path, rhs: &'a Path, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["match", "--lhs", s(lhs), "--rhs", s(rhs)];
    args.extend_from_slice(more);
    args
}

/// `gen --out DIR`, then the options written out in `options` (`"--frames 9 --raw"`, see
/// [`words`]): the arguments of a `cluda gen` run.
pub fn gen_args<'a>(dir: &'a Path, options: &'a str) -> Vec<&'a str> {
    let mut args = vec!["gen", "--out", s(dir)];
    args.extend(words(options));
    args
}

/// Bytes (a process's stdout or stderr) as text, invalid UTF-8 replaced.
pub fn text(b: impl AsRef<[u8]>) -> String {
    String::from_utf8_lossy(b.as_ref()).into_owned()
}

/// A path as an argument (test paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}
