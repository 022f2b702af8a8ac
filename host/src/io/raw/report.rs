//! What the raw reader found: each frame's [`FrameInfo`], and the [`GapReport`] of
//! everything missing, partial, out of order or truncated (per port when a frame is split
//! over several ports). Kept apart from the reading so that the single-port reader
//! (`port`), the port assembly (`ports`) and the public reader share it.

use std::path::PathBuf;

use super::header::DetectorHeader;

/// A range of frame numbers that no data file holds, found between two frames that were read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissingFrames {
    /// The first missing frame number.
    pub first: u64,
    /// How many consecutive frame numbers are missing.
    pub count: u64,
}

/// A frame whose packet mask says that packets were lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncompleteFrame {
    /// Its frame number.
    pub frame_number: u64,
    /// Packets the receiver caught ("packet number" of the header).
    pub packets_caught: u32,
    /// Packets set in the mask.
    pub mask_count: u32,
    /// Packets per frame, when known.
    pub expected: Option<u32>,
    /// Whether the reader delivered it (see
    /// [`RawReader::deliver_incomplete`](super::RawReader::deliver_incomplete)).
    pub delivered: bool,
    /// With several ports: each port whose part was partial or absent (empty for
    /// single-port data). `packets_caught`, `mask_count` and `expected` are then the sums
    /// over the ports' parts that are present.
    pub parts: Vec<PartLoss>,
}

/// One port's part of an incomplete frame of a several-port acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartLoss {
    /// The port (`d<port>` of its data files).
    pub port: usize,
    /// Packets its header says were caught; `None` when the port's files hold no record of
    /// this frame number at all (the part is absent: in the delivered frame, when frames
    /// with losses are delivered, its pixels are 0xFFFF, as the receiver pads lost packets).
    pub packets_caught: Option<u32>,
    /// Packets per part, when known.
    pub expected: Option<u32>,
}

impl std::fmt::Display for PartLoss {
    /// `port 1: absent` or `port 0: 20 of 25 packets`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.packets_caught, self.expected) {
            (None, _) => write!(f, "port {}: absent", self.port),
            (Some(n), Some(e)) => write!(f, "port {}: {n} of {e} packets", self.port),
            (Some(n), None) => write!(f, "port {}: {n} packets, mask incomplete", self.port),
        }
    }
}

/// Parts whose headers place them elsewhere than their data files do (several ports): the
/// reader places each part by its data file (`d<port>`, as aare does) and reports the
/// disagreement once per port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MisplacedParts {
    /// The port.
    pub port: usize,
    /// The first such frame number.
    pub first_frame_number: u64,
    /// `row` and `column` its header said.
    pub header_place: (u16, u16),
    /// The grid row and column of the port's data files ("Geometry").
    pub file_place: (usize, usize),
    /// Parts of this port that disagreed.
    pub count: u64,
}

/// A frame number not larger than the one before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfOrder {
    /// The frame number read before.
    pub after: u64,
    /// The frame number read now.
    pub got: u64,
}

/// A data file that ends inside a frame record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TruncatedTail {
    /// The data file.
    pub path: PathBuf,
    /// Index (within the file) of the partial record.
    pub frame_in_file: u64,
    /// Bytes of it present.
    pub bytes_present: u64,
    /// Bytes a whole record has.
    pub record_bytes: u64,
    /// Its frame number, when the whole header is present (known once the reader got there).
    pub frame_number: Option<u64>,
}

/// Everything the reader found wrong with the acquisition so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GapReport {
    /// Frame numbers absent between frames read, in order.
    pub missing: Vec<MissingFrames>,
    /// Frames with lost packets.
    pub incomplete: Vec<IncompleteFrame>,
    /// Frame numbers that did not increase.
    pub out_of_order: Vec<OutOfOrder>,
    /// Data files that end inside a record.
    pub truncated: Vec<TruncatedTail>,
    /// Data files other than the last with fewer frames than "Max Frames Per File":
    /// (file, frames).
    pub short_files: Vec<(PathBuf, u64)>,
    /// Data files that the master's frame count calls for but that do not exist (the reader
    /// stops at the first absent one, as aare does).
    pub absent_files: Vec<PathBuf>,
    /// Frames delivered to the caller.
    pub frames_delivered: u64,
    /// Complete frame records on disk, over all data files.
    pub frames_on_disk: u64,
    /// "Total Frames" of the master file.
    pub total_frames: u64,
    /// The first frame number read.
    pub first_frame_number: Option<u64>,
    /// The largest frame number read.
    pub last_frame_number: Option<u64>,
    /// With several ports: ports whose headers' `row`/`column` disagree with their files'
    /// place (see [`MisplacedParts`]).
    pub misplaced: Vec<MisplacedParts>,
}

impl GapReport {
    /// Books frame number `n`, the next one read: a gap after the largest number so far is
    /// missing frames, a number not above it is out of order.
    pub(crate) fn book_number(&mut self, n: u64) {
        match self.last_frame_number {
            None => self.first_frame_number = Some(n),
            Some(last) if n > last.saturating_add(1) => self.missing.push(MissingFrames {
                first: last + 1,
                count: n - last - 1,
            }),
            Some(last) if n <= last => self.out_of_order.push(OutOfOrder {
                after: last,
                got: n,
            }),
            Some(_) => {}
        }
        self.last_frame_number = Some(self.last_frame_number.map_or(n, |l| l.max(n)));
    }

    /// Number of frame numbers missing between the frames read.
    pub fn missing_count(&self) -> u64 {
        self.missing
            .iter()
            .fold(0u64, |a, m| a.saturating_add(m.count))
    }

    /// Frames the master file's "Total Frames" asks for that neither a data file holds nor a
    /// gap between frame numbers accounts for: frames lost at the end (a missing or cut data
    /// file, an empty one). Exact once the reader reached the end; an upper bound before.
    pub fn unaccounted(&self) -> u64 {
        self.total_frames
            .saturating_sub(self.frames_on_disk)
            .saturating_sub(self.missing_count())
    }

    /// Whether nothing was missing, partial, out of order or truncated.
    pub fn is_clean(&self) -> bool {
        self.unaccounted() == 0
            && self.absent_files.is_empty()
            && self.missing.is_empty()
            && self.incomplete.is_empty()
            && self.out_of_order.is_empty()
            && self.truncated.is_empty()
            && self.short_files.is_empty()
            && self.misplaced.is_empty()
    }

    /// A few lines for a person: counts, and the first frame numbers of each kind.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} frames delivered of {} on disk ({} asked for by the master file)",
            self.frames_delivered, self.frames_on_disk, self.total_frames
        );
        if let (Some(a), Some(b)) = (self.first_frame_number, self.last_frame_number) {
            s += &format!(", frame numbers {a}..={b}");
        }
        if self.is_clean() {
            s += "; no missing, partial or truncated frames";
            return s;
        }
        if self.unaccounted() > 0 {
            let n = self.unaccounted();
            let range = match self.last_frame_number {
                Some(l) => format!(
                    "frame numbers {}..={}",
                    l.saturating_add(1),
                    l.saturating_add(n)
                ),
                None => "no frame was read".to_string(),
            };
            s += &format!(
                "\nframes missing at the end: {n} of the {} the master file asks for were not \
                 read ({range})",
                self.total_frames
            );
        }
        for p in &self.absent_files {
            s += &format!(
                "\n{}: data file missing (the master file's frame count needs it; reading \
                 stops at the first missing data file, as in aare)",
                p.display()
            );
        }
        if !self.missing.is_empty() {
            let first: Vec<String> = self
                .missing
                .iter()
                .take(5)
                .map(|m| match m.count {
                    1 => m.first.to_string(),
                    c => format!("{}..={}", m.first, m.first.saturating_add(c - 1)),
                })
                .collect();
            s += &format!(
                "\nmissing frame numbers: {} in {} gap(s), first: {}",
                self.missing_count(),
                self.missing.len(),
                first.join(", ")
            );
        }
        if !self.incomplete.is_empty() {
            let first: Vec<String> = self
                .incomplete
                .iter()
                .take(5)
                .map(|f| {
                    if f.parts.is_empty() {
                        format!("{} ({} packets)", f.frame_number, f.packets_caught)
                    } else {
                        let parts: Vec<String> = f.parts.iter().map(|p| p.to_string()).collect();
                        format!("{} ({})", f.frame_number, parts.join("; "))
                    }
                })
                .collect();
            let skipped = self.incomplete.iter().filter(|f| !f.delivered).count();
            let what = if self.incomplete.iter().any(|f| !f.parts.is_empty()) {
                "frames with lost packets or parts"
            } else {
                "frames with lost packets"
            };
            s += &format!(
                "\n{what}: {} ({} skipped), first: {}",
                self.incomplete.len(),
                skipped,
                first.join(", ")
            );
        }
        if !self.out_of_order.is_empty() {
            s += &format!(
                "\nframe numbers not increasing: {} times, first {} after {}",
                self.out_of_order.len(),
                self.out_of_order[0].got,
                self.out_of_order[0].after
            );
        }
        for t in &self.truncated {
            s += &format!(
                "\n{}: ends inside record {} ({} of {} bytes{})",
                t.path.display(),
                t.frame_in_file,
                t.bytes_present,
                t.record_bytes,
                t.frame_number
                    .map(|n| format!(", frame number {n}"))
                    .unwrap_or_default()
            );
        }
        for m in &self.misplaced {
            s += &format!(
                "\nport {}: {} parts whose headers say row {} column {}, first frame number {}; \
                 placed by their data files (_d{}_) at row {} column {} of the ports",
                m.port,
                m.count,
                m.header_place.0,
                m.header_place.1,
                m.first_frame_number,
                m.port,
                m.file_place.0,
                m.file_place.1
            );
        }
        for (p, n) in &self.short_files {
            s += &format!(
                "\n{}: only {n} frames although later files exist",
                p.display()
            );
        }
        s
    }
}

/// What one read frame was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInfo {
    /// The header's frame number.
    pub frame_number: u64,
    /// Index of the data file (`f<file>` in its name).
    pub file: u64,
    /// Index of the record within that file.
    pub frame_in_file: u64,
    /// Whether every packet of the frame arrived.
    pub complete: bool,
    /// The whole header.
    pub header: DetectorHeader,
}

/// A frame and what it was, as the iterator yields it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawFrame {
    /// What was read.
    pub info: FrameInfo,
    /// `rows * cols` samples in image order.
    pub image: Vec<u16>,
}
