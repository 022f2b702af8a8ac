//! Collecting a chunk: waiting for its results, checking every frame's room, and handing its
//! frames' clusters (and placed rows) to the visitor.

use super::super::settings::Collect;
use super::Pipeline;
use super::chunk::{Job, KernelTime, Stop};
use super::copies::dtoh;
use crate::cluster::FrameClusters;
use crate::error::{CudaContextExt, Error, Result};
use crate::interpolation::PlacedRow;

impl Pipeline {
    /// Waits for chunk `job`'s results (its uploads and kernels are then complete), checks
    /// every frame's count against the room, and brings compact records down: after this,
    /// [`Pipeline::deliver`] reads only the pinned result buffer.
    pub(super) fn check(&mut self, job: Job) -> Result<(), Stop> {
        let rw = self.size.record_words();
        let fw = self.frame_words();
        let cap = self.cap;
        let per_upload = self.per_upload();
        let slot = &mut self.slots[job.slot];
        let g = self.cfg.upload_frames.clamp(1, job.n);
        let rec_off = slot.frames + 1;
        if self.cfg.compact {
            slot.dl[0].synchronize().cuda("waiting for results")?;
            let prefix = &slot.pin_out.as_slice()[..=job.n];
            let room = slot.frames * cap;
            let total = prefix[job.n] as usize;
            if total > room {
                let k = (0..job.n)
                    .find(|&k| prefix[k + 1] as usize > room)
                    .unwrap_or(job.n - 1);
                return Err(Stop::Overflow {
                    frame: k,
                    found: (prefix[k + 1] - prefix[k]) as usize,
                    limit: room.saturating_sub(prefix[k] as usize),
                    need_cap: total.div_ceil(slot.frames),
                });
            }
            if total > 0 {
                // On a stream of its own: the copy streams already hold the next chunk's
                // downloads, queued behind its kernels, and this one must not wait for them.
                let s = &self.fetch;
                dtoh(&slot.pin_out, &slot.dev_out, rec_off, total * rw, s)?;
                if let (Some(_), Some((rows, pinned))) = (&self.placer, &slot.rows) {
                    s.wait(&slot.placed).cuda("waiting for the placement")?;
                    dtoh(pinned, rows, 0, total, s)?;
                }
                s.synchronize().cuda("waiting for results")?;
            }
        } else {
            for gi in 0..job.n.div_ceil(g) {
                slot.dl[gi].synchronize().cuda("waiting for results")?;
            }
            let out = slot.pin_out.as_slice();
            let counts = (0..job.n).map(|k| out[k * fw] as usize);
            if let Some((k, found)) = counts.clone().enumerate().find(|&(_, c)| c > cap) {
                return Err(Stop::Overflow {
                    frame: k,
                    found,
                    limit: cap,
                    need_cap: counts.max().unwrap_or(found),
                });
            }
        }
        if self.cfg.timing && per_upload {
            // One launch per upload group: its time, shared evenly by its frames.
            for gi in 0..job.n.div_ceil(g) {
                let m = g.min(job.n - gi * g);
                let t = slot.t0[gi].elapsed_ms(&slot.t1[gi]);
                let per_frame = t.cuda("reading kernel times")? * 1000.0 / m as f32;
                self.times_us.extend((0..m).map(|_| KernelTime {
                    prepare_us: 0.0,
                    classify_us: per_frame,
                }));
            }
        } else if self.cfg.timing {
            for k in 0..job.n {
                let p = slot.t0[k].elapsed_ms(&slot.tm[k]);
                let c = slot.tm[k].elapsed_ms(&slot.t1[k]);
                self.times_us.push(KernelTime {
                    prepare_us: p.cuda("reading kernel times")? * 1000.0,
                    classify_us: c.cuda("reading kernel times")? * 1000.0,
                });
            }
        }
        Ok(())
    }

    /// Hands chunk `job`'s frames to `visit`, from the results [`Pipeline::check`] brought
    /// down.
    pub(super) fn deliver(
        &mut self,
        job: Job,
        visit: &mut dyn FnMut(FrameClusters<'_>) -> Result<()>,
    ) -> Result<(), Stop> {
        let rw = self.size.record_words();
        let fw = self.frame_words();
        let size = self.size;
        let slot = &self.slots[job.slot];
        let rec_off = slot.frames + 1;
        let out = slot.pin_out.as_slice();
        let compact = self.cfg.compact;
        let number = |k: usize| {
            slot.numbers.get(k).copied().ok_or_else(|| {
                Stop::Error(Error::Internal(format!(
                    "frame {k} of a chunk has no number"
                )))
            })
        };
        let words = |k: usize| -> &[u32] {
            if compact {
                let (a, b) = (out[k] as usize, out[k + 1] as usize);
                &out[rec_off + a * rw..rec_off + b * rw]
            } else {
                let n = out[k * fw] as usize;
                &out[k * fw + 1..k * fw + 1 + n * rw]
            }
        };
        // Rows placed on the device: frame k's are its records' (compact results only).
        let rows = match (&self.placer, &slot.rows) {
            (Some(_), Some((_, pinned))) if compact => Some(pinned.as_slice()),
            _ => None,
        };
        let rows_of = |k: usize| rows.map(|r| &r[out[k] as usize..out[k + 1] as usize]);
        match self.cfg.collect {
            Collect::ZeroCopy => {
                for k in 0..job.n {
                    let fc = attach(FrameClusters::new(number(k)?, size, words(k)), rows_of(k))?;
                    visit(fc).map_err(|e| Stop::Visitor(k, e))?;
                }
            }
            Collect::Owned => {
                self.owned.clear();
                self.owned_ends.clear();
                for k in 0..job.n {
                    self.owned.extend_from_slice(words(k));
                    self.owned_ends.push(self.owned.len());
                }
                let mut from = 0;
                for (k, &end) in self.owned_ends.iter().enumerate() {
                    let fc = FrameClusters::new(number(k)?, size, &self.owned[from..end]);
                    let fc = attach(fc, rows_of(k))?;
                    visit(fc).map_err(|e| Stop::Visitor(k, e))?;
                    from = end;
                }
            }
        }
        Ok(())
    }
}

/// `fc` with its placed rows, when there are any.
fn attach<'a>(
    fc: FrameClusters<'a>,
    rows: Option<&'a [PlacedRow]>,
) -> Result<FrameClusters<'a>, Stop> {
    match rows {
        Some(r) => fc.with_placed(r).map_err(Stop::Error),
        None => Ok(fc),
    }
}
