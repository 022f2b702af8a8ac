//! Result rows written once into memory that a caller then hands over whole (the Python
//! package gives it to numpy as a result array's memory): no per-chunk concatenation, no
//! second copy.
//!
//! A row is a frame's number followed by one cluster record, as u32 words
//! (`[frame, x | y << 16, data...]`: the Python package's structured dtype). Rows go straight
//! from the finder's result buffer (page-locked, on a GPU) into one growing anonymous memory
//! map ([`RowBuf`]), which the caller takes at the end ([`RowBuf::into_map`]).
//!
//! Why a map and not a `Vec`: results are large (a 9x9 run keeps about 190 KB per 400x400
//! frame), and writing them into fresh memory is dominated by page faults, one per 4 KiB
//! page, on the finder's thread. The map is advised to use huge pages, grows without copying
//! (`mremap`), and, when the host's cores are idle (a GPU finder), is faulted in ahead of the
//! writer by several threads at once (`MADV_POPULATE_WRITE`), so the finder's thread only
//! copies. A `Vec` could do none of the three.

use std::ops::Range;

use memmap2::{Advice, MmapMut, MmapOptions, RemapOptions};

use crate::cluster::{ClusterSize, FrameClusters};
use crate::error::Error;

/// Growth and fault-in granularity: the huge page size.
const HUGE: usize = 2 << 20;

/// The least memory a prefault thread takes (a thread costs more than it saves below it).
const MIN_PART: usize = 8 << 20;

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to).saturating_mul(to)
}

fn too_large(bytes: usize, e: std::io::Error) -> Error {
    Error::TooLarge {
        what: format!("result rows ({e})"),
        bytes: bytes as u64,
        available: crate::memory::available_bytes().unwrap_or(0),
    }
}

/// Memory being faulted in on a thread of its own, ahead of the writer.
struct Ahead {
    /// Faulted in up to this byte once the thread is done.
    end: usize,
    job: std::thread::JoinHandle<()>,
}

/// Result rows of one cluster size, filled in place (see the module docs).
pub struct RowBuf {
    size: ClusterSize,
    map: Option<MmapMut>,
    /// The address of the map's first byte (0 without a map), taken when it is mapped or
    /// moved, while no fault-in ahead runs. Rows, reads and fault-ins address the map from
    /// it: `MmapMut` gives its address only through `Deref`, a reference to the whole map,
    /// which must not be made while a thread faults part of it in.
    base: usize,
    /// Words written.
    len: usize,
    /// Bytes from the start that are faulted in (all written words lie below it).
    faulted: usize,
    /// The first map's size in bytes (a guess of the final size, e.g. the last chunk's).
    hint: usize,
    /// Threads that fault memory in.
    threads: usize,
    /// The next step being faulted in, from `faulted` on: the map is neither moved nor
    /// unmapped, and no row is written there, until it is done ([`RowBuf::settle`]).
    ahead: Option<Ahead>,
}

impl RowBuf {
    /// An empty buffer for `size` clusters; `hint` bytes are mapped at the first row.
    /// `spare_cores`: the host's cores are idle (a GPU finder), so memory is faulted in by
    /// up to 16 threads, a step ahead on a thread of its own; otherwise (a CPU finder, whose
    /// threads use every core) on the writing thread, as it is needed.
    pub fn new(size: ClusterSize, hint: usize, spare_cores: bool) -> Self {
        let threads = if spare_cores {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .clamp(1, 16)
        } else {
            1
        };
        Self {
            size,
            map: None,
            base: 0,
            len: 0,
            faulted: 0,
            hint,
            threads,
            ahead: None,
        }
    }

    /// Bytes written.
    pub fn bytes(&self) -> usize {
        self.len * 4
    }

    /// Appends one frame's clusters as rows numbered `frame`.
    ///
    /// # Errors
    /// [`Error::TooLarge`] when the memory cannot be mapped.
    pub fn push_frame(&mut self, frame: i32, fc: &FrameClusters<'_>) -> Result<(), Error> {
        let w = self.size.record_words();
        if fc.is_empty() {
            return Ok(());
        }
        if fc.size() != self.size {
            return Err(Error::Internal(format!(
                "{} clusters pushed into rows of {}",
                fc.size(),
                self.size
            )));
        }
        let add = fc.len() * (w + 1);
        self.reserve(add)?;
        let from = self.len;
        if self.map.is_none() {
            return Err(Error::Internal("result rows without memory".into()));
        }
        let first = std::ptr::with_exposed_provenance_mut::<u32>(self.base);
        // SAFETY: `reserve` made words `from .. from + add` part of the map (at `base`) and
        // faulted them in (below `faulted`), which no other thread touches (a fault-in ahead
        // works past `faulted`); the map's memory is page-aligned, so aligned for u32. Only
        // this range is borrowed: no reference to the whole map is made (see `base`).
        let dst = unsafe { std::slice::from_raw_parts_mut(first.add(from), add) };
        for (row, rec) in dst.chunks_exact_mut(w + 1).zip(fc.words().chunks_exact(w)) {
            row[0] = frame as u32;
            row[1..].copy_from_slice(rec);
        }
        self.len += add;
        Ok(())
    }

    /// Waits for the fault-in ahead, if one runs.
    fn settle(&mut self) {
        if let Some(a) = self.ahead.take() {
            // A fault-in cannot panic; were it to, its memory would only be faulted later.
            if a.job.join().is_ok() {
                self.faulted = self.faulted.max(a.end);
            }
        }
    }

    /// Room for `add` more words, mapped and faulted in; and the next step faulted in ahead,
    /// on other threads.
    fn reserve(&mut self, add: usize) -> Result<(), Error> {
        let need = self
            .len
            .checked_add(add)
            .and_then(|n| n.checked_mul(4))
            .ok_or_else(|| too_large(usize::MAX, std::io::Error::other("overflow")))?;
        let cap = self.map.as_ref().map_or(0, |m| m.len());
        if need > cap {
            self.settle();
            let new_cap = round_up(need.max(cap.saturating_mul(2)).max(self.hint), HUGE);
            match self.map.as_mut() {
                None => {
                    let mut map = MmapOptions::new()
                        .len(new_cap)
                        .map_anon()
                        .map_err(|e| too_large(new_cap, e))?;
                    // Fewer, larger faults; refused where huge pages are off (no harm).
                    let _ = map.advise(Advice::HugePage);
                    // No fault-in runs (there was no map).
                    self.base = map.as_mut_ptr().expose_provenance();
                    self.map = Some(map);
                }
                Some(map) => {
                    // SAFETY: `&mut self` holds the only access to the map and no fault-in
                    // runs (settled above); no reference into it outlives this call, so
                    // moving it is sound.
                    unsafe { map.remap(new_cap, RemapOptions::new().may_move(true)) }
                        .map_err(|e| too_large(new_cap, e))?;
                    // Still no fault-in runs (settled above).
                    self.base = map.as_mut_ptr().expose_provenance();
                }
            }
        }
        if need > self.faulted {
            self.settle();
        }
        let cap = self.map.as_ref().map_or(0, |m| m.len());
        // A step: a quarter of what is written (at least a huge page), so at most a quarter
        // more is faulted in than is used; the first one up to the hint (the size expected).
        let step = HUGE.max(self.bytes() / 4);
        if need > self.faulted {
            // Behind (the first rows, or the writer outran the thread): fault in now.
            let mut end = need.max(self.faulted + step);
            if self.faulted == 0 {
                end = end.max(self.hint);
            }
            let end = round_up(end, HUGE).min(cap);
            if self.map.is_some() {
                // SAFETY: `faulted .. end` lies in the map at `base`; nothing else touches it
                // (no fault-in runs, rows are below `faulted`).
                unsafe { prefault(self.base, self.faulted..end, self.threads) };
            }
            self.faulted = end;
        }
        if self.threads > 1 && self.ahead.is_none() && self.faulted < cap.min(need + step) {
            // Less than a step is ready: fault the next one in on other threads.
            let end = round_up(self.faulted + step, HUGE).min(cap);
            if self.map.is_some() {
                let (base, from, threads) = (self.base, self.faulted, self.threads);
                let job = std::thread::Builder::new()
                    .name("cluda-rows-ahead".into())
                    // SAFETY: `from .. end` lies in the map, which is neither moved nor
                    // unmapped until this thread is joined (`settle` comes first in
                    // `reserve`'s growth, `trim`, `into_map` and `drop`); rows are written
                    // only below `faulted` (= `from`) until then.
                    .spawn(move || unsafe { prefault(base, from..end, threads) });
                // No thread: the memory is faulted in when it is needed.
                if let Ok(job) = job {
                    self.ahead = Some(Ahead { end, job });
                }
            }
        }
        Ok(())
    }

    /// Gives back the memory past the rows (call it without the GIL: unmapping what was
    /// faulted in ahead takes a moment).
    pub fn trim(&mut self) {
        self.settle();
        let keep = round_up(self.len * 4, 4096);
        match self.map.as_mut() {
            Some(_) if keep == 0 => {
                self.map = None;
                self.base = 0;
            }
            Some(map) if keep < map.len() => {
                // SAFETY: shrinking in place (no move) keeps every byte below `keep`, which
                // holds every row; nothing borrows the map (`&mut self`).
                if unsafe { map.remap(keep, RemapOptions::new().may_move(false)) }.is_ok() {
                    self.faulted = self.faulted.min(keep);
                }
            }
            _ => {}
        }
    }

    /// The cluster size of the rows.
    pub fn size(&self) -> ClusterSize {
        self.size
    }

    /// The rows written, as words (`2 + cells` per row).
    pub fn words(&self) -> &[u32] {
        if self.map.is_none() {
            return &[];
        }
        let first = std::ptr::with_exposed_provenance::<u32>(self.base);
        // SAFETY: the map's first `len` words (at `base`) are written rows (page-aligned
        // memory, so aligned for u32); only they are borrowed, not the whole map (see
        // `base`), of which a fault-in ahead may be working on a part past `faulted`
        // (>= `len * 4`).
        unsafe { std::slice::from_raw_parts(first, self.len) }
    }

    /// The memory and the number of words written in it (`None` when nothing was written):
    /// the words are the map's first ones (its memory is page-aligned). Trim it first
    /// ([`RowBuf::trim`]) to hand over no more memory than the rows.
    pub fn into_map(mut self) -> Option<(MmapMut, usize)> {
        self.settle();
        let words = self.len;
        self.map.take().filter(|_| words > 0).map(|m| (m, words))
    }
}

/// Faults bytes `range` of the map at `base` in on up to `threads` threads:
/// `MADV_POPULATE_WRITE` (Linux 5.14 on), else a write to every page. Only memory no row was
/// written to yet is passed here, so the zero written by the fallback is what is there
/// already.
///
/// # Safety
/// `base + range` must lie in one live anonymous map that nothing else reads or writes
/// until this returns, and that stays mapped in place until then.
unsafe fn prefault(base: usize, range: Range<usize>, threads: usize) {
    if range.is_empty() {
        return;
    }
    // SAFETY: the caller's contract.
    let region = unsafe {
        std::slice::from_raw_parts_mut(
            std::ptr::with_exposed_provenance_mut::<u8>(base + range.start),
            range.len(),
        )
    };
    let parts = threads.min(region.len() / MIN_PART).max(1);
    let per = round_up(region.len().div_ceil(parts), 4096);
    if parts == 1 {
        populate(region);
        return;
    }
    std::thread::scope(|s| {
        for part in region.chunks_mut(per) {
            s.spawn(move || populate(part));
        }
    });
}

/// Faults `part` in (see [`prefault`]).
fn populate(part: &mut [u8]) {
    // SAFETY: `part` is memory of this mapping, exclusively borrowed; populating it changes
    // no byte (it only allocates the zero pages that a write would).
    let populated = unsafe {
        libc::madvise(
            part.as_mut_ptr().cast(),
            part.len(),
            libc::MADV_POPULATE_WRITE,
        )
    } == 0;
    if !populated {
        for b in part.iter_mut().step_by(4096) {
            *b = 0;
        }
    }
}

impl Drop for RowBuf {
    fn drop(&mut self) {
        // The map must outlive the thread faulting part of it in.
        self.settle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of frames with 0 to 1500 clusters, across many growths (moves) of the map, are
    /// the rows pushed, with and without fault-in ahead on other threads; trimming keeps
    /// them, and the map handed over holds them.
    #[test]
    fn rows_survive_growth_trim_and_hand_over() {
        for size in [ClusterSize::S3, ClusterSize::S9] {
            let w = size.record_words();
            for spare_cores in [false, true] {
                for hint in [0, 3 << 20] {
                    let mut buf = RowBuf::new(size, hint, spare_cores);
                    let (mut want, mut rec) = (Vec::new(), Vec::new());
                    for f in 0..400u32 {
                        let n = (f as usize * 37) % 1500;
                        rec.clear();
                        rec.extend((0..n * w).map(|i| (i as u32) ^ (f << 20)));
                        buf.push_frame(
                            f as i32,
                            &FrameClusters::new(crate::FrameNumber(0), size, &rec),
                        )
                        .expect("push");
                        for r in rec.chunks_exact(w) {
                            want.push(f);
                            want.extend_from_slice(r);
                        }
                    }
                    assert_eq!(buf.bytes(), want.len() * 4);
                    assert!(buf.words() == &want[..], "{size:?} {spare_cores} {hint}");
                    buf.trim();
                    assert!(buf.words() == &want[..]);
                    let (map, words) = buf.into_map().expect("rows");
                    assert_eq!(words, want.len());
                    assert!(map.len() >= words * 4 && map.len() < words * 4 + 4096);
                    assert!(bytemuck::cast_slice::<u8, u32>(&map[..words * 4]) == &want[..]);
                }
            }
        }
    }

    /// No rows: nothing to hand over; a buffer dropped while it faults memory in ahead waits
    /// for that first; clusters of another size are refused.
    #[test]
    fn empty_dropped_and_mismatched_buffers() {
        let size = ClusterSize::S5;
        let mut buf = RowBuf::new(size, 64 << 20, true);
        buf.push_frame(0, &FrameClusters::new(crate::FrameNumber(0), size, &[]))
            .expect("empty frame");
        assert!(buf.words().is_empty());
        assert!(buf.into_map().is_none());
        let rec = vec![7u32; 100 * size.record_words()];
        let mut buf = RowBuf::new(size, 64 << 20, true);
        buf.push_frame(3, &FrameClusters::new(crate::FrameNumber(0), size, &rec))
            .expect("push");
        drop(buf); // a fault-in ahead of 64 MiB may still run: drop waits for it
        let mut buf = RowBuf::new(ClusterSize::S3, 0, false);
        let e = buf
            .push_frame(0, &FrameClusters::new(crate::FrameNumber(0), size, &rec))
            .expect_err("5x5 into 3x3 rows");
        assert!(e.to_string().contains("internal"), "{e}");
    }
}
