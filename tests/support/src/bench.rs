//! What the benches share: a `main` that reports a run's error and exits with 1, and lists
//! written as their options take them.

/// Runs a bench's `run`; on an error, prints `<name>: <error>` on stderr and exits with 1.
pub fn main(name: &str, run: impl FnOnce() -> Result<(), String>) {
    if let Err(e) = run() {
        eprintln!("{name}: {e}");
        std::process::exit(1);
    }
}

/// A comma-separated list (`3,9`) of the values of an option, as [`comma_list`] writes it; a
/// value that does not parse is an error naming it.
pub fn parse_list<T: std::str::FromStr>(list: &str) -> Result<Vec<T>, String>
where
    T::Err: std::fmt::Display,
{
    list.split(',')
        .map(|s| s.parse().map_err(|e| format!("{s}: {e}")))
        .collect()
}

/// `values` as a comma-separated list (`3,9`), as the benches' options take them and their
/// reports name them.
pub fn comma_list<T: ToString>(values: &[T]) -> String {
    values
        .iter()
        .map(T::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
