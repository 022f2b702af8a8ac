//! The one-line run summary and the text spectrum of cluster sums.

use std::fmt;

use cluda::engine::run::RunReport;

/// What a run of the finder did, printed as one line (see [`fmt::Display`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Data frames processed.
    pub frames: u64,
    /// Clusters found in them.
    pub clusters: u64,
    /// Seconds spent finding (and writing) clusters, excluding reading or generating input
    /// and waiting for it.
    pub seconds: f64,
    /// Seconds the input's own threads spent reading (`find`) or generating (`demo`) the data
    /// frames, overlapped with finding: the input's speed, so that a run bound by its input
    /// shows it here instead of in `seconds`. 0 for a mapped input (nothing is read).
    pub input_seconds: f64,
    /// Device name (one word).
    pub device: String,
    /// Precision name.
    pub precision: &'static str,
}

impl Summary {
    /// The summary line of one run's report.
    pub fn of(report: &RunReport, precision: &'static str) -> Self {
        Self {
            frames: report.frames,
            clusters: report.clusters,
            seconds: report.seconds(),
            input_seconds: report.input_seconds(),
            device: report
                .device
                .split_whitespace()
                .next()
                .unwrap_or("?")
                .to_string(),
            precision,
        }
    }

    /// Adds one input's summary into a run's total (the device: the latest input's).
    pub fn add(&mut self, input: &Summary) {
        self.frames += input.frames;
        self.clusters += input.clusters;
        self.seconds += input.seconds;
        self.input_seconds += input.input_seconds;
        self.device.clone_from(&input.device);
    }
}

impl fmt::Display for Summary {
    /// `frames=2000 clusters=4661234 clusters_per_frame=2330.6 seconds=1.234 us_per_frame=617.0
    /// fps=1620.7 device=cpu precision=f64 input_us_per_frame=80.5`; rates are 0 when
    /// undefined (no frames, no time).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        let frames = self.frames as f64;
        write!(
            f,
            "frames={} clusters={} clusters_per_frame={:.1} seconds={:.3} us_per_frame={:.1} fps={:.1} device={} precision={} input_us_per_frame={:.1}",
            self.frames,
            self.clusters,
            ratio(self.clusters as f64, frames),
            self.seconds,
            ratio(self.seconds * 1e6, frames),
            ratio(frames, self.seconds),
            self.device,
            self.precision,
            ratio(self.input_seconds * 1e6, frames),
        )
    }
}

/// A histogram of cluster sums (ADU) over fixed bins, with counts below and above its range.
#[derive(Clone, Debug, PartialEq)]
pub struct Spectrum {
    lo: i64,
    width: i64,
    counts: Vec<u64>,
    below: u64,
    above: u64,
}

impl Spectrum {
    /// `bins` bins of `width` ADU starting at `lo`.
    pub fn new(lo: i64, width: i64, bins: usize) -> Self {
        Self {
            lo,
            width: width.max(1),
            counts: vec![0; bins.max(1)],
            below: 0,
            above: 0,
        }
    }

    /// Counts one cluster sum.
    pub fn add(&mut self, sum: i64) {
        if sum < self.lo {
            self.below += 1;
            return;
        }
        match self.counts.get_mut(((sum - self.lo) / self.width) as usize) {
            Some(c) => *c += 1,
            None => self.above += 1,
        }
    }

    /// The bin counts.
    #[cfg(test)]
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Text rendering: one line per bin with a bar scaled to the fullest bin, plus the
    /// counts outside the range.
    pub fn render(&self, title: &str) -> String {
        const WIDTH: u64 = 50;
        let max = self.counts.iter().copied().max().unwrap_or(0).max(1);
        let hi = self.lo + self.width * self.counts.len() as i64;
        let mut s = format!("{title}\n");
        s += &format!("{:>13} | {}\n", format!("< {}", self.lo), self.below);
        for (i, &c) in self.counts.iter().enumerate() {
            let a = self.lo + self.width * i as i64;
            let bar = "#".repeat((c * WIDTH).div_ceil(max) as usize);
            s += &format!("{:>5} - {:>5} | {:<50} {}\n", a, a + self.width, bar, c);
        }
        s += &format!("{:>13} | {}\n", format!(">= {hi}"), self.above);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_format() {
        let s = Summary {
            frames: 2000,
            clusters: 4661234,
            seconds: 1.234,
            input_seconds: 0.161,
            device: "cpu".into(),
            precision: "f64",
        };
        assert_eq!(
            s.to_string(),
            "frames=2000 clusters=4661234 clusters_per_frame=2330.6 seconds=1.234 us_per_frame=617.0 fps=1620.7 device=cpu precision=f64 input_us_per_frame=80.5"
        );
        let empty = Summary {
            frames: 0,
            clusters: 0,
            seconds: 0.0,
            input_seconds: 0.0,
            ..s
        };
        assert!(
            empty
                .to_string()
                .contains("clusters_per_frame=0.0 seconds=0.000 us_per_frame=0.0 fps=0.0")
        );
    }

    #[test]
    fn spectrum_bins() {
        let mut h = Spectrum::new(0, 50, 4);
        for v in [-1, 0, 49, 50, 199, 200, 1000] {
            h.add(v);
        }
        assert_eq!(h.counts(), &[2, 1, 0, 1]);
        assert_eq!((h.below, h.above), (1, 2));
        let text = h.render("t");
        assert!(
            text.contains("    0 -    50 | ################################################## 2"),
            "{text}"
        );
        assert!(text.contains(">= 200 | 2"), "{text}");
    }
}
