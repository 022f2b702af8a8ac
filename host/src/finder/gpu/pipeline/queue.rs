//! Queuing a chunk: checkpoints, uploads, kernel launches and downloads, with no host wait.

use cluda_gpu::args::DevicePtr;
use cudarc::driver::CudaEvent;

use super::super::buffers::{DeviceState, PinnedBuf};
use super::super::input::Source;
use super::super::launch_args::{Destination, FrameAt, FrameBuffers, RunBuffers};
use super::super::settings::Overflow;
use super::Pipeline;
use super::chunk::{Job, Slot};
use super::copies::{copy_dtod, copy_parallel, dtoh};
use crate::error::{CudaContextExt, Error, Result};

impl Pipeline {
    /// Queues chunk `job`: checkpoints, uploads (unless its frames are on the device
    /// already: `upload` false), kernels, downloads. No host wait.
    pub(super) fn submit(&mut self, job: Job, state: &DeviceState, upload: bool) -> Result<()> {
        if job.opens && self.cfg.overflow == Overflow::Fail {
            let depth = self.part_ckpts.len().max(1);
            if let Some(ck) = self.part_ckpts.get(job.part % depth) {
                copy_dtod(ck, &state.ab, &self.compute)?;
            }
        }
        copy_dtod(&self.slots[job.slot].ckpt, &state.ab, &self.compute)?;
        if upload {
            self.upload(job)?;
        }
        let slot = &self.slots[job.slot];
        if self.cfg.compact {
            slot.dev_out
                .zero_async(0..1, &self.compute)
                .cuda("clearing the chunk's cluster count")?;
        }
        let bufs = self.frame_buffers(state);
        if self.per_upload() {
            self.launch_per_upload(job, slot, &bufs[0])?;
        } else {
            self.launch_per_frame(job, slot, &bufs)?;
        }
        self.place(job, slot)?;
        self.download(job, slot)
    }

    /// Frames per upload group of chunk `job`, and how many groups it has.
    pub(super) fn groups(&self, job: Job) -> (usize, usize) {
        let g = self.cfg.upload_frames.clamp(1, job.n);
        (g, job.n.div_ceil(g))
    }

    /// The pedestal state with each of the two sets of per-frame scratch.
    pub(super) fn frame_buffers<'a>(&'a self, state: &'a DeviceState) -> [FrameBuffers<'a>; 2] {
        let w = &self.work;
        [0, 1].map(|i| FrameBuffers {
            state,
            c_plane: &w.c_plane[i],
            t: &w.t[i],
            status: &w.status[i],
        })
    }

    /// Queues the uploads of chunk `job`, one copy per upload group, round-robin over the
    /// copy streams, each followed by its `up` event (staged: after a host copy into the
    /// slot's pinned staging buffer, allocated here if the slot has none).
    pub(super) fn upload(&mut self, job: Job) -> Result<()> {
        let px = self.geom.pixels as usize;
        let (g, groups) = self.groups(job);
        let ctx = self.ctx.clone();
        let slot = &mut self.slots[job.slot];
        let host: *const u16 = match job.src {
            Source::Direct => job.host,
            Source::Staged => {
                if slot.pin_in.is_none() {
                    slot.pin_in = Some(PinnedBuf::new(
                        &ctx,
                        slot.frames * px,
                        true,
                        "staged frames",
                    )?);
                }
                let pin = slot
                    .pin_in
                    .as_mut()
                    .ok_or_else(|| Error::Internal("staging buffer missing".into()))?;
                // SAFETY: the input holds `job.n` frames at `job.host` until the chunk is
                // collected (see `Input`).
                let input = unsafe { std::slice::from_raw_parts(job.host, job.n * px) };
                copy_parallel(&mut pin.as_mut_slice()[..input.len()], input);
                pin.ptr_at(0)
            }
        };
        for gi in 0..groups {
            let (f0, m) = (gi * g, g.min(job.n - gi * g));
            let s = &self.copies[gi % self.copies.len()];
            // SAFETY: source: `m` frames of the input, held until the chunk is collected and,
            // when read by DMA, page-locked under the input's hold until then (a call's hold
            // until the GPU is idle: `UntilIdle`), or pageable (copied by the driver before
            // this returns); or of the staging buffer (not written again before the chunk is
            // collected, not freed before the GPU is idle: `Drop for Pipeline`); destination
            // inside `dev_in`.
            unsafe {
                let src = std::slice::from_raw_parts(host.add(f0 * px), m * px);
                slot.dev_in.upload_async(f0 * px, src, s)
            }
            .cuda("uploading frames")?;
            slot.up[gi].record(s).cuda("recording an upload event")?;
        }
        Ok(())
    }

    /// Frame `k` of the chunk in `slot`, on the device.
    pub(super) fn frame_at(&self, slot: &Slot, k: usize) -> DevicePtr<u16> {
        slot.dev_in.at(k * self.geom.pixels as usize)
    }

    /// Where compact results of the chunk in `slot` from its frame `f` on go: after the
    /// running count of the frames before it, into the chunk's one record buffer.
    pub(super) fn compact_from(&self, slot: &Slot, f: usize) -> Destination {
        let out = &slot.dev_out;
        Destination {
            base_in: out.at(f),
            count_out: out.at(f + 1),
            records: out.at(slot.frames + 1),
            room: (slot.frames * self.cap) as u32,
        }
    }

    /// Records timing event `events[i]` on the compute stream (only with `timing`: without
    /// it the slot has no timing events).
    pub(super) fn mark(&self, events: &[CudaEvent], i: usize) -> Result<()> {
        if self.cfg.timing {
            events[i]
                .record(&self.compute)
                .cuda("recording a timing event")?;
        }
        Ok(())
    }

    /// One cooperative run launch per upload group of chunk `job`, each right after its
    /// upload, with its flags cleared before it.
    pub(super) fn launch_per_upload(
        &self,
        job: Job,
        slot: &Slot,
        buf: &FrameBuffers,
    ) -> Result<()> {
        let (g, groups) = self.groups(job);
        let w = &self.work;
        let run = RunBuffers {
            planes: &w.run_planes,
            work: &w.run_work,
        };
        for gi in 0..groups {
            let (f0, m) = (gi * g, g.min(job.n - gi * g));
            self.compute
                .wait(&slot.up[gi])
                .cuda("waiting for an upload")?;
            // The run kernels' counters and flags, at the start of their work area
            // (`run_work_len` >= `run_flags_len` words).
            w.run_work
                .zero_async(0..self.geom.run_flags_len(), &self.compute)
                .cuda("clearing the run kernel's flags")?;
            self.mark(&slot.t0, gi)?;
            let dst = self.compact_from(slot, f0);
            let frames = self.frame_at(slot, f0);
            self.kernels
                .run(&self.compute, (frames, m as u32), buf, &run, &dst)?;
            self.mark(&slot.t1, gi)?;
            slot.done[gi]
                .record(&self.compute)
                .cuda("recording a kernel event")?;
        }
        Ok(())
    }

    /// Launches per frame of chunk `job`: one `step` launch per frame (classify frame k,
    /// prepare frame k+1, from alternating sets of `bufs`) after one `prepare` of the first
    /// frame; or, with event timing, `prepare` and `classify` per frame, timed apart.
    pub(super) fn launch_per_frame(
        &self,
        job: Job,
        slot: &Slot,
        bufs: &[FrameBuffers; 2],
    ) -> Result<()> {
        let (g, _) = self.groups(job);
        let cs = &self.compute;
        let timing = self.cfg.timing;
        let fused = !timing;
        // Frame k of the chunk with the set of scratch `buf`.
        let at = |k: usize, buf| FrameAt {
            frame: self.frame_at(slot, k),
            buf,
        };
        if fused {
            self.compute
                .wait(&slot.up[0])
                .cuda("waiting for an upload")?;
            self.kernels.prepare(cs, at(0, bufs[0]))?;
        }
        let fw = self.frame_words();
        for k in 0..job.n {
            // The launch that first reads a group's frames waits for its upload: frame k's
            // prepare, or with `fused` the launch before it (it prepares frame k+1).
            let first = if fused { k + 1 } else { k };
            if first < job.n && first % g == 0 {
                self.compute
                    .wait(&slot.up[first / g])
                    .cuda("waiting for an upload")?;
            }
            self.mark(&slot.t0, k)?;
            if !fused {
                self.kernels.prepare(cs, at(k, bufs[0]))?;
            }
            self.mark(&slot.tm, k)?;
            let dst = if self.cfg.compact {
                self.compact_from(slot, k)
            } else {
                Destination {
                    base_in: DevicePtr::NULL,
                    count_out: slot.dev_out.at(k * fw),
                    records: slot.dev_out.at(k * fw + 1),
                    room: self.cap as u32,
                }
            };
            if fused {
                let buf = bufs[(k + 1) % 2];
                let next = if k + 1 < job.n {
                    at(k + 1, buf)
                } else {
                    FrameAt {
                        frame: DevicePtr::NULL,
                        buf,
                    }
                };
                self.kernels.step(cs, at(k, bufs[k % 2]), &dst, next)?;
            } else {
                self.kernels.classify(cs, at(k, bufs[0]), &dst)?;
            }
            self.mark(&slot.t1, k)?;
            if k % g == g - 1 || k + 1 == job.n {
                slot.done[k / g]
                    .record(&self.compute)
                    .cuda("recording a kernel event")?;
            }
        }
        Ok(())
    }

    /// Queues the downloads of chunk `job`'s results, each after the kernels it reads: the
    /// per-frame counts of compact results on the count stream (the records follow at
    /// collection), else each upload group's result slots on its copy stream.
    pub(super) fn download(&self, job: Job, slot: &Slot) -> Result<()> {
        let (g, groups) = self.groups(job);
        let out = &slot.dev_out;
        if self.cfg.compact {
            // Not on a copy stream: the next chunk's uploads must not queue behind a
            // download that waits for this chunk's kernels.
            let s = &self.tally;
            s.wait(&slot.done[groups - 1]).cuda("waiting for kernels")?;
            dtoh(&slot.pin_out, out, 0, job.n + 1, s)?;
            slot.dl[0].record(s).cuda("recording a download event")?;
        } else {
            let fw = self.frame_words();
            for gi in 0..groups {
                let (f0, m) = (gi * g, g.min(job.n - gi * g));
                let s = &self.copies[gi % self.copies.len()];
                s.wait(&slot.done[gi]).cuda("waiting for kernels")?;
                dtoh(&slot.pin_out, out, f0 * fw, m * fw, s)?;
                slot.dl[gi].record(s).cuda("recording a download event")?;
            }
        }
        Ok(())
    }
}
