//! How slsReceiver names an acquisition's files, in one place: the master file
//! `<base>_master_<N>.json` and the data files `<base>_d<P>_f<F>_<N>.raw` (port `P`, file `F`
//! of the acquisition whose file index is `N`), and what to tell a user who gives a data file
//! where its master belongs.

use std::path::{Path, PathBuf};

/// `<base>_master_<index>.json` (`index` as written: a number, or the digits of another
/// file's name kept as they stand).
pub fn master_file_name(base: &str, index: impl std::fmt::Display) -> String {
    format!("{base}_master_{index}.json")
}

/// `<base>_d<port>_f<file>_<index>.raw`, as slsReceiver names the files of each of its UDP
/// ports (`Implementation::SetupWriter`: module position x interfaces + interface).
pub fn data_file_name(base: &str, port: usize, file: u64, index: u64) -> String {
    format!("{base}_d{port}_f{file}_{index}.raw")
}

/// Whether the file name `file` is the master file or one of the data files of the
/// acquisition `base` with file index `index` (any port, any file number).
pub fn is_file_of(file: &str, base: &str, index: u64) -> bool {
    if file == master_file_name(base, index) {
        return true;
    }
    let Some(rest) = file.strip_prefix(base).and_then(|r| r.strip_prefix("_d")) else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    rest.strip_suffix(".raw")
        .and_then(|r| r.rsplit_once('_'))
        .filter(|(_, n)| *n == index.to_string())
        .and_then(|(r, _)| r.split_once("_f"))
        .is_some_and(|(p, f)| digits(p) && digits(f))
}

/// The master file of a raw data file named `<base>_d<M>_f<F>_<N>.raw`:
/// `<base>_master_<N>.json` in the same directory (whether or not it exists); `None` for a name
/// not of that form.
pub fn master_of_data_file(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?.strip_suffix(".raw")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // From the right: `_<N>`, then `_f<F>`, then `_d<M>`; what is left is the base.
    let (rest, index) = name.rsplit_once('_')?;
    let (rest, file) = rest.rsplit_once("_f")?;
    let (base, module) = rest.rsplit_once("_d")?;
    if base.is_empty() || !(digits(index) && digits(file) && digits(module)) {
        return None;
    }
    Some(path.with_file_name(master_file_name(base, index)))
}

/// What to give instead of `path` when it names a raw data file (`.raw`): cluda reads a raw
/// acquisition through its master file, named here when the data file's name gives it (and
/// said to be missing when it is not beside it). `None` for any other path.
pub(crate) fn data_file_hint(path: &Path) -> Option<String> {
    if path.extension().and_then(|e| e.to_str()) != Some("raw") {
        return None;
    }
    Some(match master_of_data_file(path) {
        Some(master) if master.is_file() => format!(
            "this is a raw data file: give its master file instead, {}",
            master.display()
        ),
        Some(master) => format!(
            "this is a raw data file: a raw acquisition is read through its master file, {} (not found beside it)",
            master.display()
        ),
        None => "this looks like a raw data file: a raw acquisition is read through its master file (<base>_master_<N>.json)".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let data = data_file_name("run", 1, 12, 3);
        assert_eq!(data, "run_d1_f12_3.raw");
        assert!(is_file_of(&data, "run", 3));
        assert!(is_file_of(&master_file_name("run", 3), "run", 3));
        assert_eq!(
            master_of_data_file(Path::new(&data)),
            Some(PathBuf::from(master_file_name("run", 3)))
        );
        // The index's digits are kept as the data file's name has them.
        assert_eq!(
            master_of_data_file(Path::new("run_d0_f0_007.raw")),
            Some(PathBuf::from("run_master_007.json"))
        );
    }

    #[test]
    fn files_of_one_acquisition_only() {
        for yes in [
            "data_master_0.json",
            "data_d0_f0_0.raw",
            "data_d0_f12_0.raw",
            "data_d1_f3_0.raw",
        ] {
            assert!(is_file_of(yes, "data", 0), "{yes}");
        }
        for no in [
            "data_master_1.json",
            "data_d0_f1_1.raw",
            "data_d0_fx_0.raw",
            "data_d_f1_0.raw",
            "data.npy",
            "datax_d0_f0_0.raw",
            "my_data_d0_f0_0.raw",
            "data_d0_f0_0.raw.tmp",
            "data_d0_f0_.raw",
            "data_d0_f0_00.raw",
        ] {
            assert!(!is_file_of(no, "data", 0), "{no}");
        }
    }
}
