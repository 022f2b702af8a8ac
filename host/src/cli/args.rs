//! Command-line arguments (clap derive).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use cluda::engine::run::InputPath;
use cluda::finder::select::DeviceChoice;
use cluda::matcher::MatchVersion;
use cluda::plot::SpectrumOptions;
use cluda::{ClusterSize, FindOptions, Precision, ThresholdMode};

/// What the summary line says.
const SUMMARY_HELP: &str = "Prints one summary line on stdout:\n  frames=N clusters=N clusters_per_frame=X seconds=X us_per_frame=X fps=X device=D precision=P input_us_per_frame=X\nseconds counts the time spent finding (and writing) clusters of the data frames, not reading\nor generating them nor waiting for them, nor filling the pedestal. input_us_per_frame is the\ntime the input's own threads spent reading (find) or generating (demo) each data frame,\noverlapped with finding (0 for a mapped input). Progress is shown on stderr when it is a terminal.";

/// What `cluda match` prints.
const MATCH_HELP: &str = "Prints one summary line on stdout:\n  lhs=N rhs=N seconds=X ms=X version=V device=\"NAME\" recomputed=N\nseconds (3 decimals) is the whole command: reading, matching, writing. ms (3 decimals) is the\nmatching itself: device time for v1-v4, wall time for cpu. recomputed counts the v3 rows (v4: rows\nwith too many candidates) re-scored exactly by v2 (0 for the other versions).";

/// Photon cluster finding for MOENCH-like detector frames.
#[derive(Parser, Debug)]
#[command(name = "cluda", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Generate MOENCH-like test data: DIR/pedestal.npy (dark frames) and DIR/data.npy, or
    /// with --raw the raw acquisitions DIR/pedestal_master_0.json and DIR/data_master_0.json.
    Gen(GenArgs),
    /// Find clusters in the frames of a .npy file or a raw acquisition, after a pedestal from
    /// dark frames.
    #[command(after_help = SUMMARY_HELP)]
    Find(FindArgs),
    /// Generate data in memory, find its clusters and print a spectrum of cluster sums.
    #[command(after_help = SUMMARY_HELP)]
    Demo(DemoArgs),
    /// Match descriptors: for every row of --lhs, its nearest row of --rhs (squared L2).
    #[command(after_help = MATCH_HELP)]
    Match(MatchArgs),
    /// Find clusters live in a detector's ZMQ stream (slsReceiver's): one cluster file per
    /// acquisition.
    #[command(after_help = STREAM_HELP)]
    Stream(StreamArgs),
    /// Publish frames from files on a ZMQ socket as slsReceiver does (to test a DAQ set-up
    /// without a detector).
    Replay(ReplayArgs),
    /// Build an eta cube from a flat field: the histogram of (eta_x, eta_y, energy) of every
    /// cluster `find` would write, as a .npz that aare's Interpolator takes.
    #[command(after_help = ETA_HELP)]
    Eta(EtaArgs),
    /// Place every photon at its sub-pixel position through an eta cube's maps and count it
    /// into an image with N x N sub-pixels per pixel (and/or write the photons).
    #[command(after_help = IMAGE_HELP)]
    Image(ImageArgs),
}

/// What `cluda eta` prints.
const ETA_HELP: &str = "Prints one summary line on stdout:\n  frames=N clusters=N inside=N eta_outside=N energy_outside=N masked=N outside_window=N\n  seconds=X us_per_frame=X device=D counted_on=device|host out=PATH\ninside counts the clusters in the cube; a cluster whose eta (either axis, NaN included) or energy\nlies outside the edges is left out and counted. Beside OUT, OUT with .json holds the eta kind,\nthe energy unit and the cluster size.";

/// What `cluda image` prints.
const IMAGE_HELP: &str = "Prints one summary line on stdout:\n  frames=N clusters=N inside=N eta_outside=N energy_outside=N masked=N outside_window=N\n  counted=N seconds=X us_per_frame=X device=D counted_on=device|host\n  [photons_placed_on=device|host] out=PATH\ninside counts the photons placed (flags 0); counted those inside the image. Photon flags (in\n--photons files): 0 placed; 1 eta outside the cube's edges; 2 energy outside; 4 masked centre;\n8 outside --energy-window. A flagged photon's x, y are its pixel's centre.";

/// How an eta cube's axes are chosen (shared by `eta` and, for reading, nothing else).
#[derive(Args, Debug)]
pub struct CubeArgs {
    /// The eta: eta2 (2x2 quadrant, aare's default), full-eta2, eta3 (central 3x3) or
    /// cross-eta3.
    #[arg(
        long,
        default_value = "eta2",
        value_name = "eta2|full-eta2|eta3|cross-eta3"
    )]
    pub eta_kind: cluda::interpolation::EtaKindArg,
    /// Bins along each eta axis.
    #[arg(long, default_value_t = 201, value_name = "N", value_parser = parse_eta_bins)]
    pub eta_bins: usize,
    /// Range of each eta axis, LO:HI (the edges are numpy.linspace(LO, HI, N + 1)).
    #[arg(long, default_value = "-0.1:1.1", value_parser = parse_pair, allow_hyphen_values = true, value_name = "LO:HI")]
    pub eta_range: (f64, f64),
    /// Energy edges in ADU, comma-separated and strictly increasing (`inf` allowed), e.g.
    /// 0,200,400,inf. Default: one bin 0,inf.
    #[arg(long, default_value = "0,inf", value_parser = parse_edges, value_name = "E0,E1,...")]
    pub energy_edges: EdgeList,
}

/// `cluda eta`.
#[derive(Args, Debug)]
pub struct EtaArgs {
    /// Dark frames (as `find --pedestal`).
    #[arg(long, value_name = "P.npy|P_master_0.json")]
    pub pedestal: PathBuf,
    /// Flat-field frames: .npy files or raw master files; several add into one cube.
    #[arg(long, value_name = "FLAT.npy|FLAT_master_0.json", num_args = 1.., required = true)]
    pub data: Vec<PathBuf>,
    /// Finder options (the clusters are exactly those `find --out` writes with them).
    #[command(flatten)]
    pub finder: FinderArgs,
    /// The cube to write (.npz with etacube, xbins, ybins, ebins; metadata in the .json
    /// beside it).
    #[arg(long, value_name = "eta.npz")]
    pub out: PathBuf,
    /// Replace an existing --out (and its .json).
    #[arg(long)]
    pub overwrite: bool,
    /// With several inputs: one stream of frames (the pedestal goes on) instead of each from
    /// the pedestal afresh.
    #[arg(long)]
    pub carry_pedestal: bool,
    /// The cube's axes.
    #[command(flatten)]
    pub cube: CubeArgs,
    /// Gain map (a rows x cols float64/float32 .npy, ADU per keV per pixel): every pixel
    /// value is divided by its gain before eta and energy are computed (energies in keV;
    /// counted on the host).
    #[arg(long, value_name = "gain.npy")]
    pub gain: Option<PathBuf>,
    /// Bad pixels (a rows x cols bool or uint8 .npy, True: bad): clusters centred on one are
    /// left out of the cube (and counted as masked).
    #[arg(long, value_name = "mask.npy")]
    pub mask: Option<PathBuf>,
    /// Count on the host even when the GPU could (the same counts; for checks).
    #[arg(long)]
    pub host_counts: bool,
}

/// `cluda image`.
#[derive(Args, Debug)]
pub struct ImageArgs {
    /// Dark frames (as `find --pedestal`).
    #[arg(long, value_name = "P.npy|P_master_0.json")]
    pub pedestal: PathBuf,
    /// Data frames: .npy files or raw master files; several add into one image.
    #[arg(long, value_name = "D.npy|D_master_0.json", num_args = 1.., required = true)]
    pub data: Vec<PathBuf>,
    /// Finder options (the clusters are exactly those `find --out` writes with them).
    #[command(flatten)]
    pub finder: FinderArgs,
    /// The eta cube (.npz with etacube, xbins, ybins, ebins, e.g. from `cluda eta`).
    #[arg(long, value_name = "eta.npz")]
    pub eta: PathBuf,
    /// How the cube becomes maps: cumulative (aare's Interpolator(etacube, ...)) or
    /// rosenblatt (aare's rosenblatttransform).
    #[arg(
        long,
        default_value = "cumulative",
        value_name = "cumulative|rosenblatt"
    )]
    pub maps: cluda::interpolation::MapKind,
    /// The eta kind when the cube has no .json beside it (else the .json's is used).
    #[arg(long, value_name = "eta2|full-eta2|eta3|cross-eta3")]
    pub eta_kind: Option<cluda::interpolation::EtaKindArg>,
    /// Sub-pixels per pixel along each axis, 1 ..= 32.
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = parse_subpixels)]
    pub subpixels: u32,
    /// The image: .npy (uint32, (rows*N, cols*N)) or .tif (uncompressed 32-bit).
    #[arg(long, value_name = "image.npy|image.tif")]
    pub out: Option<PathBuf>,
    /// Write every photon (one row per cluster, in the order `find --out` writes them) to a
    /// structured .npy: frame (int64), x, y, energy (float64), flags (uint8). One input only;
    /// with several, use --out-dir.
    #[arg(long, value_name = "P.npy", conflicts_with = "out_dir")]
    pub photons: Option<PathBuf>,
    /// Write each input's photons into DIR as <input>.photons.npy (never replacing a file: a
    /// suffix is added).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Count only photons whose energy (ADU) lies in LO:HI (inclusive); the others are
    /// flagged 8.
    #[arg(long, value_name = "LO:HI", allow_hyphen_values = true)]
    pub energy_window: Option<cluda::interpolation::EnergyWindow>,
    /// Draw the image into DIR/image.png (binned to at most 2048 bins a side; needs --out).
    #[arg(long, value_name = "DIR", requires = "out")]
    pub plot: Option<PathBuf>,
    /// Gain map (a rows x cols float64/float32 .npy, ADU per keV per pixel): every pixel
    /// value is divided by its gain before eta and energy are computed (energies in keV;
    /// counted on the host).
    #[arg(long, value_name = "gain.npy")]
    pub gain: Option<PathBuf>,
    /// Bad pixels (a rows x cols bool or uint8 .npy, True: bad): photons centred on one are
    /// flagged 4 and not counted.
    #[arg(long, value_name = "mask.npy")]
    pub mask: Option<PathBuf>,
    /// Replace an existing --out or --photons file.
    #[arg(long)]
    pub overwrite: bool,
    /// With several inputs: one stream of frames (the pedestal goes on).
    #[arg(long)]
    pub carry_pedestal: bool,
    /// Count the image and place the photons on the host even when the GPU could (the same
    /// counts and rows; for checks).
    #[arg(long)]
    pub host_counts: bool,
}

/// What `cluda stream` prints.
const STREAM_HELP: &str = "Prints one summary line per acquisition on stdout:\n  acquisition=I kind=data|dark|short file=PATH frames=N pedestal_frames=N clusters=N missing=N\n  incomplete=N mismatched=N malformed=N dropped=N restarts=N late=N duplicates=N\n  end=end|next-acquisition|restart|idle|interrupted seconds=X fps=X worst_lag_ms=X first_lag_ms=X peak_queue=N device=D\nEvery fault is reported on stderr with its frame number as it happens. SIGINT (Ctrl-C) finishes\nthe current acquisition (its file is written, its summary printed) and exits 0; a second\nSIGINT exits at once (130).";

/// `cluda stream`.
#[derive(Args, Debug)]
pub struct StreamArgs {
    /// The sender's endpoint to subscribe to (slsReceiver's streaming IP and port), e.g.
    /// tcp://127.0.0.1:30001. Given several times (one per UDP interface or module, e.g. a
    /// MOENCH with numinterfaces 2 streams on the port and the next one), every frame comes
    /// in parts, one per endpoint, placed into one frame by their headers (row, column,
    /// shape, detshape, flipRows).
    #[arg(long, value_name = "tcp://HOST:PORT", required = true)]
    pub zmq: Vec<String>,
    /// Directory for the cluster files, one per acquisition, named <fname>_<fileIndex>.clust
    /// from the stream's headers (never overwriting a file: a suffix is added).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Finder options.
    #[command(flatten)]
    pub finder: FinderOptions,
    /// Dark frames for the pedestal of every acquisition: a uint16 .npy or a raw master file
    /// (its frame count is the pedestal window N). Without it and --dark-acquisitions, each
    /// acquisition's first --pedestal-frames frames are its pedestal.
    #[arg(
        long,
        value_name = "P.npy|P_master_0.json",
        conflicts_with = "dark_acquisitions"
    )]
    pub pedestal: Option<PathBuf>,
    /// The first K acquisitions are dark: their frames fill the pedestal every later
    /// acquisition starts from (no files are written for them).
    #[arg(long, value_name = "K", value_parser = parse_dark_acquisitions, allow_negative_numbers = true)]
    pub dark_acquisitions: Option<u32>,
    /// The pedestal window N (without --pedestal).
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = parse_stream_pedestal_frames, allow_negative_numbers = true)]
    pub pedestal_frames: u32,
    /// Stop after K acquisitions (dark ones included); default: until SIGINT.
    #[arg(long, value_name = "K", value_parser = parse_stream_acquisitions, allow_negative_numbers = true)]
    pub acquisitions: Option<u64>,
    /// Frames cluda's queue holds at most (memory: this many frames); when it is full,
    /// frames are dropped (or the sender is pushed back, see --on-full) and reported.
    #[arg(long, default_value_t = 4096, value_name = "FRAMES", value_parser = parse_queue, allow_negative_numbers = true)]
    pub queue: u64,
    /// When the queue is full: `drop` the newest frame (reported with its number) or `block`
    /// (stop reading the socket: the sender's high-water mark then drops, or waits).
    #[arg(long, default_value = "drop", value_parser = ["drop", "block"], value_name = "drop|block")]
    pub on_full: String,
    /// With several --zmq: frames that may wait for their parts at once (memory: this many
    /// frames); the oldest is then given up and reported incomplete.
    #[arg(long, default_value_t = 4096, value_name = "FRAMES", value_parser = parse_part_window, allow_negative_numbers = true)]
    pub part_window: u64,
    /// With several --zmq: milliseconds a frame waits for a part while the endpoint it waits
    /// for sends nothing, before it is given up and reported incomplete (1 ..= 60000; once
    /// every endpoint has been quiet for --idle-end, or on SIGINT, waiting frames are given up
    /// at once).
    #[arg(long, default_value_t = 200, value_name = "MS", value_parser = parse_part_wait_ms, allow_negative_numbers = true)]
    pub part_wait_ms: u64,
    /// Frames per finder call (the engine's ring holds three such chunks, allocated per
    /// acquisition).
    #[arg(long, default_value_t = 64, value_name = "N", value_parser = parse_chunk, allow_negative_numbers = true)]
    pub chunk: u64,
    /// End an acquisition when nothing arrived for S seconds and its end-of-acquisition
    /// message did not come (a sender's PUB socket drops it at its high-water mark like any
    /// frame); 0: wait for it until SIGINT; at most 86400.
    #[arg(long, default_value_t = 10.0, value_name = "S", value_parser = parse_idle_end, allow_negative_numbers = true)]
    pub idle_end: f64,
    /// Write live PNG plots into DIR (spectrum.png, hitmap.png; with --eta also image.png, the
    /// acquisition's sub-pixel image drawn as `cluda image --plot` draws it, binned to at most
    /// 2048 bins a side), refreshed every --plot-every seconds while an acquisition runs and
    /// at its end.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Replace spectrum.png, hitmap.png and image.png already in the --plot DIR (without it, stream
    /// refuses to start, and a plot file another program puts there during the run is not
    /// replaced: a refresh replaces only the files this run wrote).
    #[arg(long, requires = "plot")]
    pub overwrite: bool,
    /// Seconds between plot refreshes, 0.1 ..= 86400.
    #[arg(long, default_value_t = 5.0, value_name = "S", value_parser = parse_plot_every, allow_negative_numbers = true)]
    pub plot_every: f64,
    /// How the sender's frame numbers advance: `auto` (default) infers a constant stride N
    /// from an acquisition's first gaps and says so on stderr; N (1 ..): the sender streams
    /// every Nth frame (slsReceiver `rx_zmqfreq N`), 1 meaning every frame. The frames
    /// between are counted as `sampled`, not `missing`; a gap wider than the stride is still
    /// reported as missing.
    #[arg(long, default_value = "auto", value_name = "auto|N", value_parser = parse_sampled)]
    pub sampled: cluda::stream::Sampling,
    /// Eta interpolation live: place every data acquisition's photons through this eta cube
    /// (.npz, e.g. from `cluda eta`) into a sub-pixel image written beside its cluster file
    /// (`<name>.image.npy`).
    #[arg(long, value_name = "eta.npz")]
    pub eta: Option<PathBuf>,
    /// Sub-pixels per pixel of --eta's images, 1 ..= 32.
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = parse_subpixels, requires = "eta")]
    pub subpixels: u32,
    /// How --eta's cube becomes maps: cumulative or rosenblatt.
    #[arg(
        long,
        default_value = "cumulative",
        value_name = "cumulative|rosenblatt",
        requires = "eta"
    )]
    pub maps: cluda::interpolation::MapKind,
    /// Build one eta cube from every data acquisition of the stream (a live flat field),
    /// written to this .npz (and its .json) when the stream ends; the default eta2 axes of
    /// `cluda eta`. An existing file is not replaced.
    #[arg(long, value_name = "eta.npz")]
    pub eta_out: Option<PathBuf>,
    /// Testing only: sleep this many microseconds per frame after writing it, to show what
    /// happens when cluda cannot keep up.
    #[arg(long, default_value_t = 0, hide = true, value_name = "US", value_parser = parse_slow_sink, allow_negative_numbers = true)]
    pub slow_sink_us: u64,
}

/// `cluda replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Endpoint to bind, e.g. tcp://*:30001 (subscribers connect to it).
    #[arg(long, value_name = "tcp://*:PORT")]
    pub zmq: String,
    /// Send every frame as N parts of rows/N rows, one per port from --zmq's on (as a
    /// detector read out through N UDP interfaces streams them), 1 ..= 16.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=16))]
    pub interfaces: u32,
    /// Frames to send: uint16 .npy or raw master files (`--data A B` or `--data A --data B`);
    /// each is one acquisition, sent one after another in the order given. .npy frames are
    /// numbered from --first-frame, raw frames keep their headers' numbers (plus
    /// --first-frame).
    #[arg(long, value_name = "D.npy|D_master_0.json", num_args = 1.., required = true)]
    pub data: Vec<PathBuf>,
    /// Frames per second, 0.001 ..= 1e7 (default: as fast as possible).
    #[arg(long, value_name = "HZ", value_parser = parse_rate, allow_hyphen_values = true)]
    pub rate: Option<f64>,
    /// Send the list of inputs K times (K x inputs acquisitions, fileIndex counting up).
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = parse_replay_acquisitions, allow_negative_numbers = true)]
    pub acquisitions: u64,
    /// Added to the frame numbers.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = parse_first_frame, allow_negative_numbers = true)]
    pub first_frame: u64,
    /// The headers' fname (the receiver's file name prefix).
    #[arg(long, default_value = "run", value_name = "NAME")]
    pub fname: String,
    /// fileIndex of the first acquisition.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = parse_file_index, allow_negative_numbers = true)]
    pub file_index: u64,
    /// Send high-water mark in messages (libzmq's default is 1000); beyond it a slow
    /// subscriber's messages are dropped, as slsReceiver's are.
    #[arg(long, default_value_t = 1000, value_name = "N", value_parser = parse_hwm, allow_negative_numbers = true)]
    pub hwm: i32,
    /// Wait for slow subscribers instead of dropping at the high-water mark.
    #[arg(long)]
    pub no_drop: bool,
    /// Send every Nth frame of each acquisition (frame indices 0, N, 2N, ...), as slsReceiver
    /// streams with `rx_zmqfreq N` (a live preview).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = parse_every, allow_negative_numbers = true)]
    pub every: u64,
    /// Send `rx_roi` XMIN,XMAX,YMIN,YMAX (inclusive) in every header, as a receiver with a
    /// region of interest set streams its whole frames (only its files are cut down to it).
    #[arg(long, value_name = "XMIN,XMAX,YMIN,YMAX", value_parser = parse_roi)]
    pub rx_roi: Option<cluda::io::raw::Roi>,
    /// Subscribers to wait for before the first frame (0: start at once, as slsReceiver does).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = parse_subscribers, allow_negative_numbers = true)]
    pub subscribers: usize,
    /// Longest wait for them, in seconds (at most 86400); then frames are sent anyway (with a
    /// warning).
    #[arg(long, default_value_t = 30.0, value_name = "S", value_parser = parse_wait, allow_negative_numbers = true)]
    pub wait: f64,
}

/// `cluda gen`.
#[derive(Args, Debug)]
pub struct GenArgs {
    /// Directory to write pedestal.npy and data.npy into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Data frames (with photons).
    #[arg(long, default_value_t = 2000, value_name = "N", value_parser = parse_frames, allow_negative_numbers = true)]
    pub frames: usize,
    /// Dark pedestal frames.
    #[arg(long, default_value_t = 1000, value_name = "P", value_parser = parse_pedestal_frames, allow_negative_numbers = true)]
    pub pedestal_frames: usize,
    /// Rows per frame, 1 ..= 65536.
    #[arg(long, default_value_t = 400, value_name = "R", value_parser = parse_rows, allow_negative_numbers = true)]
    pub rows: usize,
    /// Columns per frame, 1 ..= 65536.
    #[arg(long, default_value_t = 400, value_name = "C", value_parser = parse_cols, allow_negative_numbers = true)]
    pub cols: usize,
    /// Seed of the generator (same seed, same frames).
    #[arg(long, default_value_t = 1, value_name = "S", value_parser = parse_seed, allow_negative_numbers = true)]
    pub seed: u64,
    /// Write slsDetector raw acquisitions (master .json + .raw data files, frame numbers from
    /// 1) instead of .npy files.
    #[arg(long)]
    pub raw: bool,
    /// With --raw: write the acquisitions as a receiver with `rx_roi XMIN XMAX YMIN YMAX`
    /// writes them: the master names the ROI ("Receiver Roi", or "Receiver Rois" with
    /// --raw-version 8.0) and keeps the detector's R x C "Pixels", the data files hold only
    /// the ROI's pixels (columns XMIN..=XMAX of rows YMIN..=YMAX) of each generated frame.
    #[arg(long, value_name = "XMIN,XMAX,YMIN,YMAX", value_parser = parse_roi, requires = "raw")]
    pub roi: Option<cluda::io::raw::Roi>,
    /// With --raw: write the acquisitions as a receiver of a MOENCH read out through N UDP
    /// interfaces (`numinterfaces N`) writes them, 1 ..= 16 (default 1): each frame's rows
    /// split into N equal bands, band i in data files <name>_d<i>_f<k>_0.raw (headers of row
    /// i, column 0), the master's "Geometry" 1 x N with one port's "Pixels".
    #[arg(long, value_name = "N", requires = "raw", conflicts_with = "roi", value_parser = clap::value_parser!(u32).range(1..=16))]
    pub interfaces: Option<u32>,
    /// With --raw: the master file format version to write, 7.2 (default) or 8.0.
    #[arg(long, value_name = "7.2|8.0", value_parser = parse_raw_version, requires = "raw")]
    pub raw_version: Option<f64>,
    /// Replace an existing data set of the same names in DIR (without it, gen refuses to).
    #[arg(long)]
    pub overwrite: bool,
    /// Also write DIR/truth.npy: every photon of the data frames as generated, a structured
    /// .npy with fields frame (int64, the frame's number as find numbers it: from 0 in
    /// data.npy, from 1 in a raw acquisition), x, y (float64, the charge cloud's centre;
    /// pixel column c spans [c, c+1)) and energy (float64, ADU).
    #[arg(long, conflicts_with = "roi")]
    pub truth: bool,
    /// Where photons reach the sensor: flat (default), knife (a straight edge through the
    /// frame's centre, 4 degrees from the vertical; photons left of it only) or grid (0.3 px
    /// square holes every 2 px, centred on pixel corners).
    #[arg(long, default_value = "flat", value_parser = parse_illumination, value_name = "flat|knife|grid")]
    pub illumination: cluda::generate::Illumination,
    /// Mean charge of a photon in ADU (default 400; the noise is 35-55 ADU).
    #[arg(long, value_name = "ADU", value_parser = parse_photon_adu)]
    pub photon_adu: Option<f64>,
    /// Mean number of photons per frame, before any mask (default 2500 per 400 x 400 frame,
    /// scaled with the area).
    #[arg(long, value_name = "N", value_parser = parse_photons)]
    pub photons: Option<f64>,
}

/// The options that set what a finder finds and where it runs, shared by `find`, `demo`
/// and `stream`.
#[derive(Args, Debug)]
pub struct FinderOptions {
    /// Cluster size: 3, 5, 7 or 9 (a 3x3 ... 9x9 window).
    #[arg(long, default_value = FindOptions::DEFAULT.size.side_name(), value_parser = parse_cluster, value_name = "3|5|7|9")]
    pub cluster: ClusterSize,
    /// Threshold in standard deviations of the pedestal noise (finite, >= 0).
    #[arg(long, default_value_t = FindOptions::DEFAULT.n_sigma, value_parser = parse_nsigma, allow_hyphen_values = true, value_name = "NSIGMA")]
    pub nsigma: f64,
    /// Threshold noise: `live` (current pedestal std) or `frozen` (std when the pedestal filled).
    #[arg(long, default_value = FindOptions::DEFAULT.threshold.name(), value_parser = parse_threshold, value_name = "live|frozen")]
    pub threshold: ThresholdMode,
    /// Arithmetic: f64 (reference), f32 (centred B1) or f32-naive (shows cancellation).
    #[arg(long, default_value = FindOptions::DEFAULT.precision.name(), value_parser = parse_precision, value_name = "f64|f32|f32-naive")]
    pub precision: Precision,
    /// Device: auto (GPU if available, else CPU), cpu or gpu.
    #[arg(long, default_value = DeviceChoice::default().name(), value_parser = parse_device, value_name = "auto|cpu|gpu")]
    pub device: DeviceChoice,
    /// CPU worker threads (default: every core; 1 = single-threaded; at most 4 x the
    /// available parallelism, and never more than 1024).
    #[arg(long, value_parser = parse_threads, value_name = "N", allow_negative_numbers = true)]
    pub threads: Option<usize>,
}

/// Finder options of `find` and `demo`: what is found and where, and how the run reads and
/// reports.
#[derive(Args, Debug)]
pub struct FinderArgs {
    #[command(flatten)]
    pub options: FinderOptions,
    /// Print on stderr where the time went: reading, finding (upload, kernels and download on
    /// a GPU), writing, and the waits between them, with bandwidths, so the resource that
    /// bounds the run shows.
    #[arg(long)]
    pub timing: bool,
    /// How a .npy input reaches the finder: `read` copies each chunk from the file into the
    /// finder's memory (page-locked on a GPU) with several threads; `map` maps the file and
    /// hands the finder the mapped pages themselves (page-locked in place on a GPU, so the
    /// upload reads the page cache with no copy); `auto` picks what the device reads fastest:
    /// `map` for the CPU finder (no reader threads take its cores), `read` for the GPU. Raw
    /// inputs are always read. A mapped file that another program truncates during the run
    /// is an error naming it (that input's output is not written), as it is when read.
    #[arg(long, default_value = InputPath::default().name(), value_parser = parse_input, value_name = "auto|read|map")]
    pub input: InputPath,
    /// Threads that read each chunk of a .npy input (default: chosen by the device: every
    /// core up to 16 for the GPU, 2 for the CPU finder, whose band threads need the cores;
    /// at most 64 and 4 x the available cores).
    #[arg(long, value_parser = parse_read_threads, value_name = "N", allow_negative_numbers = true)]
    pub read_threads: Option<usize>,
}

/// `cluda find`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("replaceable").args(["out", "plot"]).multiple(true)))]
pub struct FindArgs {
    /// Dark frames: a uint16 .npy (frames x rows x cols) or a raw acquisition's master file
    /// (<base>_master_<N>.json). All are pushed into the pedestal, whose window N is their
    /// count.
    #[arg(long, value_name = "P.npy|P_master_0.json")]
    pub pedestal: PathBuf,
    /// Data frames: uint16 .npy files or raw master files, same rows x cols. Several inputs
    /// (`--data A B C`, shell globs work) are found one after another by one process with one
    /// device and one pedestal, each starting from the pedestal afresh (so each output equals
    /// a run of that input alone) and written to --out-dir. Missing or partial raw frames are
    /// skipped and reported on stderr.
    #[arg(long, value_name = "D.npy|D_master_0.json", num_args = 1.., required = true)]
    pub data: Vec<PathBuf>,
    /// Finder options.
    #[command(flatten)]
    pub finder: FinderArgs,
    /// Write the clusters to FILE in aare's cluster file layout (frame numbers: the raw
    /// headers' for raw input, else counting from 0). Written under a temporary name and
    /// renamed when complete; FILE may not be one of the inputs nor one of the --plot files,
    /// and an existing FILE is only replaced with --overwrite.
    #[arg(long, value_name = "FILE", conflicts_with = "out_dir")]
    pub out: Option<PathBuf>,
    /// Replace an existing --out FILE and existing --plot files (without it, find refuses
    /// to before reading anything, and a file that appears under one of those names during
    /// the run is not replaced either: the run fails naming it).
    #[arg(long, requires = "replaceable")]
    pub overwrite: bool,
    /// Write one cluster file per data input into DIR (created if missing), named after the
    /// input (`run_master_0.json` -> `run_master_0.clust`, `d.npy` -> `d.clust`); an existing
    /// file is never replaced: the name gets a suffix (`d_2.clust`, ...) instead.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// With several data inputs: treat them as one continuous stream of frames (the pedestal
    /// goes on from one input to the next) instead of starting each from the pedestal afresh.
    #[arg(long)]
    pub carry_pedestal: bool,
    /// Write PNG plots into DIR: spectrum.png, hitmap.png, pedestal_mean.png and
    /// pedestal_noise.png (with several data inputs, into DIR/<input name>/).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Options of the spectrum plot.
    #[command(flatten)]
    pub spectrum: SpectrumArgs,
}

/// Options of the PNG spectrum drawn with `--plot`, shared by `find` and `demo`.
#[derive(Args, Debug)]
pub struct SpectrumArgs {
    /// Spectrum range in ADU, MIN:MAX (finite, MIN < MAX). Default: from the data's quantiles,
    /// so that it follows the cluster size.
    #[arg(long, value_parser = parse_range, allow_hyphen_values = true, value_name = "MIN:MAX")]
    pub spectrum_range: Option<(f64, f64)>,
    /// Spectrum bins, 1 ..= 100000.
    #[arg(long, default_value_t = 400, value_parser = parse_bins, value_name = "N", allow_negative_numbers = true)]
    pub spectrum_bins: usize,
    /// Draw the spectrum's counts on a logarithmic axis.
    #[arg(long)]
    pub spectrum_log: bool,
}

impl SpectrumArgs {
    /// The library's spectrum options.
    pub fn options(&self) -> SpectrumOptions {
        SpectrumOptions {
            range: self.spectrum_range,
            bins: self.spectrum_bins,
            log: self.spectrum_log,
        }
    }
}

/// `cluda demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Data frames (with photons).
    #[arg(long, default_value_t = 2000, value_name = "N", value_parser = parse_frames, allow_negative_numbers = true)]
    pub frames: usize,
    /// Dark pedestal frames (the pedestal window N).
    #[arg(long, default_value_t = 1000, value_name = "P", value_parser = parse_pedestal_frames, allow_negative_numbers = true)]
    pub pedestal_frames: usize,
    /// Rows per frame, 1 ..= 65536.
    #[arg(long, default_value_t = 400, value_name = "R", value_parser = parse_rows, allow_negative_numbers = true)]
    pub rows: usize,
    /// Columns per frame, 1 ..= 65536.
    #[arg(long, default_value_t = 400, value_name = "C", value_parser = parse_cols, allow_negative_numbers = true)]
    pub cols: usize,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1, value_name = "S", value_parser = parse_seed, allow_negative_numbers = true)]
    pub seed: u64,
    /// Finder options.
    #[command(flatten)]
    pub finder: FinderArgs,
    /// Write PNG plots into DIR (as `find --plot`).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Replace existing --plot files (without it, demo refuses to before any work, and a
    /// plot file that appears during the run is not replaced either).
    #[arg(long, requires = "plot")]
    pub overwrite: bool,
    /// Options of the spectrum plot.
    #[command(flatten)]
    pub spectrum: SpectrumArgs,
}

/// `cluda match`.
#[derive(Args, Debug)]
pub struct MatchArgs {
    /// Left descriptors (float32 .npy, n x 128): each gets its nearest right descriptor.
    #[arg(long, value_name = "A.npy")]
    pub lhs: PathBuf,
    /// Right descriptors (float32 .npy, m x 128, m >= 1).
    #[arg(long, value_name = "B.npy")]
    pub rhs: PathBuf,
    /// Implementation: v1 (GPU distance matrix), v2 (GPU fused kernel), v3 (GPU cuBLAS tiles)
    /// or cpu. Default: v3 when a CUDA GPU is available, else cpu.
    #[arg(long, value_parser = parse_version, value_name = "v1|v2|v3|v4|cpu")]
    pub version: Option<MatchVersion>,
    /// Write the matches to FILE: an (n, 2) float64 .npy, [right index, squared distance] per
    /// left row. An existing FILE is only replaced with --overwrite.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace an existing --out FILE (without it, match refuses to before reading anything).
    #[arg(long, requires = "out")]
    pub overwrite: bool,
}

/// A whole number for option `--name` within `min ..= max`: a message naming the option and
/// the range for anything else (negative numbers included, which clap would otherwise take
/// for an unknown option).
fn whole(s: &str, name: &str, min: u64, max: u64) -> Result<u64, String> {
    let range = || {
        if max == u64::MAX {
            format!("at least {min}")
        } else {
            format!("between {min} and {max}")
        }
    };
    match s.trim().parse::<i128>() {
        Ok(v) if v >= i128::from(min) && v <= i128::from(max) => Ok(v as u64),
        Ok(_) => Err(format!("--{name} must be {}, got {s}", range())),
        Err(_) => Err(format!(
            "--{name}: `{s}` is not a whole number (it must be {})",
            range()
        )),
    }
}

/// Seconds for option `--name`: a finite number within `min ..= max`.
fn seconds(s: &str, name: &str, min: f64, max: f64) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= min && v <= max => Ok(v),
        Ok(_) => Err(format!(
            "--{name} must be between {min} and {max} seconds, got {s}"
        )),
        Err(_) => Err(format!("--{name}: `{s}` is not a number of seconds")),
    }
}

/// The value parser `$f` of option `--$name`: a whole number of type `$t` in `$min ..= $max`
/// (bounds that fit `$t`, so the cast cannot truncate).
macro_rules! whole_parser {
    ($f:ident, $t:ty, $name:literal, $min:expr, $max:expr) => {
        fn $f(s: &str) -> Result<$t, String> {
            whole(s, $name, $min as u64, $max as u64).map(|v| v as $t)
        }
    };
}

whole_parser!(
    parse_dark_acquisitions,
    u32,
    "dark-acquisitions",
    1,
    u32::MAX
);
whole_parser!(
    parse_stream_pedestal_frames,
    u32,
    "pedestal-frames",
    1,
    u32::MAX
);
whole_parser!(parse_stream_acquisitions, u64, "acquisitions", 1, u64::MAX);
whole_parser!(parse_queue, u64, "queue", 1, 1_000_000);
whole_parser!(parse_part_window, u64, "part-window", 1, 1_000_000);
whole_parser!(parse_part_wait_ms, u64, "part-wait-ms", 1, MAX_PART_WAIT_MS);

/// The longest `--part-wait-ms`: a minute. A frame waits no longer for a part whose endpoint
/// is silent (and no longer than `--idle-end` once every endpoint is quiet), so the stream
/// never holds frames for an hour unreported.
pub const MAX_PART_WAIT_MS: u64 = 60_000;
whole_parser!(parse_chunk, u64, "chunk", 1, 4096);
whole_parser!(parse_slow_sink, u64, "slow-sink-us", 0, 1_000_000);
whole_parser!(parse_replay_acquisitions, u64, "acquisitions", 1, u32::MAX);
whole_parser!(parse_first_frame, u64, "first-frame", 0, u64::MAX);
whole_parser!(parse_every, u64, "every", 1, u32::MAX);

/// `--sampled auto|N`: infer the stride, or every Nth frame (N >= 1).
fn parse_sampled(s: &str) -> Result<cluda::stream::Sampling, String> {
    if s.trim() == "auto" {
        return Ok(cluda::stream::Sampling::Infer);
    }
    whole(s, "sampled", 1, u32::MAX as u64)
        .map(cluda::stream::Sampling::Every)
        .map_err(|e| format!("{e} (or `auto`)"))
}
whole_parser!(parse_file_index, u64, "file-index", 0, u64::MAX);
whole_parser!(parse_hwm, i32, "hwm", 0, i32::MAX);
whole_parser!(parse_subscribers, usize, "subscribers", 0, 1_000_000);
whole_parser!(parse_frames, usize, "frames", 0, usize::MAX);
whole_parser!(parse_pedestal_frames, usize, "pedestal-frames", 1, u32::MAX);
whole_parser!(parse_rows, usize, "rows", 1, 65536);
whole_parser!(parse_cols, usize, "cols", 1, 65536);
whole_parser!(parse_seed, u64, "seed", 0, u64::MAX);

/// `--roi XMIN,XMAX,YMIN,YMAX`: four pixel indices, `rx_roi`'s order, ends inclusive, min
/// <= max (the detector's size is checked when it is known).
fn parse_roi(s: &str) -> Result<cluda::io::raw::Roi, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let [xmin, xmax, ymin, ymax] = parts.as_slice() else {
        return Err(format!(
            "--roi takes XMIN,XMAX,YMIN,YMAX (four pixel indices, ends inclusive), got `{s}`"
        ));
    };
    let mut v = [0usize; 4];
    for (slot, (name, text)) in v.iter_mut().zip([
        ("XMIN", xmin),
        ("XMAX", xmax),
        ("YMIN", ymin),
        ("YMAX", ymax),
    ]) {
        *slot = text
            .parse::<u16>()
            .map(usize::from)
            .map_err(|_| format!("--roi: {name} `{text}` is not a pixel index 0..=65535"))?;
    }
    if v[0] > v[1] || v[2] > v[3] {
        return Err(format!(
            "--roi: XMIN <= XMAX and YMIN <= YMAX are needed (ends inclusive), got `{s}`"
        ));
    }
    Ok(cluda::io::raw::Roi {
        xmin: v[0],
        xmax: v[1],
        ymin: v[2],
        ymax: v[3],
    })
}

/// `--raw-version`: a master file format cluda writes (7.2 or 8.0).
fn parse_raw_version(s: &str) -> Result<f64, String> {
    match s.trim() {
        "7.2" => Ok(7.2),
        "8.0" | "8" => Ok(8.0),
        _ => Err(format!(
            "--raw-version must be 7.2 or 8.0 (the master formats cluda writes), got `{s}`"
        )),
    }
}

fn parse_idle_end(s: &str) -> Result<f64, String> {
    seconds(s, "idle-end", 0.0, 86_400.0)
}

fn parse_plot_every(s: &str) -> Result<f64, String> {
    seconds(s, "plot-every", 0.1, 86_400.0)
}

fn parse_wait(s: &str) -> Result<f64, String> {
    seconds(s, "wait", 0.0, 86_400.0)
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("--rate: `{s}` is not a number of frames per second"))?;
    cluda::stream::replay::period_of(v).map_err(|e| e.to_string())?;
    Ok(v)
}

fn parse_cluster(s: &str) -> Result<ClusterSize, String> {
    let side: usize = s
        .parse()
        .map_err(|_| format!("`{s}` is not a cluster size; use 3, 5, 7 or 9"))?;
    ClusterSize::from_side(side).map_err(|e| e.to_string())
}

fn parse_illumination(s: &str) -> Result<cluda::generate::Illumination, String> {
    use cluda::generate::Illumination;
    match s {
        "flat" => Ok(Illumination::Flat),
        "knife" => Ok(Illumination::KNIFE),
        "grid" => Ok(Illumination::GRID),
        _ => Err(format!(
            "`{s}` is not an illumination; use flat, knife or grid"
        )),
    }
}

/// A finite, non-negative number for `--name`, at most `max`.
fn non_negative(s: &str, name: &str, max: f64) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("--{name}: `{s}` is not a number"))?;
    if !v.is_finite() || !(0.0..=max).contains(&v) {
        return Err(format!("--{name} must be in 0 ..= {max}, got {s}"));
    }
    Ok(v)
}

fn parse_photon_adu(s: &str) -> Result<f64, String> {
    non_negative(s, "photon-adu", 65_535.0)
}

fn parse_photons(s: &str) -> Result<f64, String> {
    non_negative(s, "photons", 1e9)
}

fn parse_nsigma(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("--nsigma: `{s}` is not a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("--nsigma must be finite and not negative, got {s}"));
    }
    Ok(v)
}

/// The most `--threads` accepted: the library's cap ([`cluda::finder::cpu::max_threads`]: 4 x
/// the available parallelism, at most 1024).
pub fn max_threads() -> usize {
    cluda::finder::cpu::max_threads()
}

fn parse_threads(s: &str) -> Result<usize, String> {
    let v: usize = s
        .parse()
        .map_err(|_| format!("--threads: `{s}` is not a thread count"))?;
    let max = max_threads();
    if v == 0 || v > max {
        return Err(format!(
            "--threads must be between 1 and {max} (4 x the {} available cores, at most 1024), got {s}",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ));
    }
    Ok(v)
}

/// The most `--read-threads` accepted: [`max_threads`], at most 64 (the parts a chunk is read
/// in are at least 4 MiB; more threads than that only wait).
pub fn max_read_threads() -> usize {
    max_threads().min(64)
}

fn parse_read_threads(s: &str) -> Result<usize, String> {
    let v: usize = s
        .parse()
        .map_err(|_| format!("--read-threads: `{s}` is not a thread count"))?;
    let max = max_read_threads();
    if v == 0 || v > max {
        return Err(format!(
            "--read-threads must be between 1 and {max} (4 x the {} available cores, at most 64), got {s}",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ));
    }
    Ok(v)
}

fn parse_threshold(s: &str) -> Result<ThresholdMode, String> {
    s.parse().map_err(|e: cluda::Error| e.to_string())
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    s.parse().map_err(|e: cluda::Error| e.to_string())
}

fn parse_device(s: &str) -> Result<DeviceChoice, String> {
    s.parse().map_err(|e: cluda::Error| e.to_string())
}

fn parse_input(s: &str) -> Result<InputPath, String> {
    s.parse().map_err(|e: cluda::Error| e.to_string())
}

fn parse_range(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` is not a range; use MIN:MAX, e.g. -200:2000"))?;
    let num = |v: &str| {
        v.trim()
            .parse::<f64>()
            .map_err(|_| format!("`{v}` in `{s}` is not a number"))
    };
    let range = (num(a)?, num(b)?);
    SpectrumOptions {
        range: Some(range),
        ..SpectrumOptions::default()
    }
    .validate()
    .map_err(|e| e.to_string())?;
    Ok(range)
}

fn parse_bins(s: &str) -> Result<usize, String> {
    let bins: usize = s
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number of bins"))?;
    SpectrumOptions {
        bins,
        ..SpectrumOptions::default()
    }
    .validate()
    .map_err(|e| e.to_string())?;
    Ok(bins)
}

fn parse_version(s: &str) -> Result<MatchVersion, String> {
    s.parse().map_err(|e: cluda::Error| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn value_parsers() {
        assert_eq!(parse_cluster("7"), Ok(ClusterSize::S7));
        assert!(parse_cluster("4").unwrap_err().contains("use 3, 5, 7 or 9"));
        assert!(parse_cluster("x").is_err());
        assert_eq!(parse_nsigma("0"), Ok(0.0));
        for bad in ["nan", "-1", "inf", "-inf", "-1e-9", "five"] {
            assert!(parse_nsigma(bad).unwrap_err().contains("--nsigma"), "{bad}");
        }
        assert_eq!(parse_threads("1"), Ok(1));
        for bad in ["0", "100000", "4294967296", "-1", "x"] {
            assert!(
                parse_threads(bad).unwrap_err().contains("--threads"),
                "{bad}"
            );
        }
        assert_eq!(parse_read_threads("1"), Ok(1));
        for bad in ["0", "65", "100000", "-1", "x"] {
            assert!(
                parse_read_threads(bad)
                    .unwrap_err()
                    .contains("--read-threads"),
                "{bad}"
            );
        }
        assert_eq!(parse_device("gpu"), Ok(DeviceChoice::Gpu));
        assert!(parse_precision("f16").is_err());
        assert_eq!(parse_threshold("frozen"), Ok(ThresholdMode::Frozen));
        assert_eq!(parse_version("v2"), Ok(MatchVersion::V2));
        assert_eq!(parse_version("v4"), Ok(MatchVersion::V4));
        assert!(
            parse_version("v5")
                .unwrap_err()
                .contains("v1, v2, v3, v4, cpu")
        );
        assert_eq!(parse_range("-200:2000"), Ok((-200.0, 2000.0)));
        for bad in ["5", "1:1", "2:1", "a:3", "0:inf", "nan:1"] {
            assert!(parse_range(bad).is_err(), "{bad}");
        }
        assert!(parse_range("2:1").unwrap_err().contains("spectrum-range"));
        assert_eq!(parse_bins("100000"), Ok(100_000));
        for bad in ["0", "100001", "-3", "x"] {
            assert!(parse_bins(bad).is_err(), "{bad}");
        }
    }
}

fn parse_eta_bins(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number of bins"))?;
    if !(1..=4096).contains(&n) {
        return Err(format!("{n} eta bins; give 1 to 4096"));
    }
    Ok(n)
}

fn parse_subpixels(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number of sub-pixels"))?;
    cluda::interpolation::image::check_subpixels(n).map_err(|e| e.to_string())?;
    Ok(n)
}

fn parse_pair(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` is not LO:HI"))?;
    let num = |v: &str| {
        v.trim()
            .parse::<f64>()
            .map_err(|_| format!("`{v}` in `{s}` is not a number"))
    };
    let (lo, hi) = (num(a)?, num(b)?);
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return Err(format!("`{s}`: give finite LO < HI"));
    }
    Ok((lo, hi))
}

/// A comma-separated list of strictly increasing edges.
#[derive(Clone, Debug)]
pub struct EdgeList(pub Vec<f64>);

fn parse_edges(s: &str) -> Result<EdgeList, String> {
    let v = s
        .split(',')
        .map(|t| {
            t.trim()
                .parse::<f64>()
                .map_err(|_| format!("`{t}` in `{s}` is not a number"))
        })
        .collect::<Result<Vec<f64>, String>>()?;
    cluda::interpolation::Edges::new("energy-edges", v.clone()).map_err(|e| e.to_string())?;
    Ok(EdgeList(v))
}
