//! `cluda stream` and `cluda replay` end to end over real ZMQ sockets on loopback: the stream's
//! cluster files are byte-identical to `cluda find` on the same frames (one and two
//! acquisitions, a pedestal file or dark acquisitions); every fault of a stream is counted and
//! reported with its frame number while the stream goes on; a slow consumer reports its drops;
//! SIGINT mid-acquisition leaves a valid file and exits 0; a lost end message ends the
//! acquisition when idle; live plots are drawn; a raw acquisition keeps its frame numbers; the
//! finder is kept from one acquisition to the next while the frame shape stays, and reopened
//! when it changes; summaries come between the acquisitions' frames, their files in place.
//!
//! One module a topic: [`equals_find`] (the files are find's), [`faults`] (what a stream
//! counts and reports), [`live`] (plots and sub-pixel images while it runs), [`library`]
//! (the library's calls).

use std::time::Duration;

use support::stream::cluda_bin;

mod equals_find;
mod faults;
mod library;
mod live;

const LIMIT: Duration = Duration::from_secs(120);

/// Non-square frames, so that `shape`'s `[x, y]` order is exercised.
const SHAPE: (usize, usize) = (48, 64);

/// The binary [`cluda_bin`] finds at run time (every process these tests start) is the one
/// cargo built for them, unless `$CLUDA_BIN` names another.
#[test]
fn the_tests_start_the_binary_cargo_built() {
    if std::env::var_os("CLUDA_BIN").is_none() {
        assert_eq!(
            cluda_bin(),
            std::path::PathBuf::from(env!("CARGO_BIN_EXE_cluda"))
        );
    }
}
