//! The slots of chunks in flight: how many frames a chunk holds, and their allocation.

use cudarc::driver::sys::CUevent_flags;

use super::super::buffers::{DeviceBuf, PinnedBuf};
use super::super::settings::InputMode;
use super::Pipeline;
use super::chunk::Slot;
use crate::error::{CudaContextExt, Result};
use crate::interpolation::PlacedRow;

impl Pipeline {
    pub(super) fn frame_words(&self) -> usize {
        1 + self.cap * self.size.record_words()
    }

    /// Frames per chunk: the configured chunk, bounded by `slot_bytes` of pinned memory per
    /// slot (but at least one frame), rounded down to a multiple of the stream count.
    pub(super) fn plan_chunk(&self, staged: bool) -> usize {
        let mut per_frame = 4 * self.frame_words();
        if self.placer.is_some() {
            per_frame += size_of::<PlacedRow>() * self.cap;
        }
        if staged {
            per_frame += 2 * self.geom.pixels as usize;
        }
        let fit = (self.cfg.slot_bytes / per_frame).max(1);
        let chunk = self.cfg.chunk.min(fit);
        let s = self.cfg.streams;
        if chunk >= s { chunk - chunk % s } else { chunk }
    }

    /// Allocates the slots for chunks of `frames` frames (and staging buffers when `staged`)
    /// unless the present ones already fit. Must only be called with no work in flight.
    pub(super) fn ensure_slots(&mut self, frames: usize, staged: bool) -> Result<()> {
        let depth = self.cfg.depth;
        let placing = self.placer.is_some();
        let fits = self.slots.len() == depth
            && self.slots.iter().all(|s| s.frames >= frames)
            && self.slots.iter().all(|s| !placing || s.rows.is_some())
            && (!staged || self.slots_staged);
        if fits {
            return Ok(());
        }
        let frames = frames.max(self.slots.first().map_or(0, |s| s.frames));
        self.slots.clear();
        for _ in 0..depth {
            let slot = self.new_slot(frames, staged)?;
            self.slots.push(slot);
        }
        self.slots_staged = staged;
        Ok(())
    }

    pub(super) fn out_words(&self, frames: usize) -> usize {
        if self.cfg.compact {
            frames + 1 + frames * self.cap * self.size.record_words()
        } else {
            frames * self.frame_words()
        }
    }

    pub(super) fn new_slot(&self, frames: usize, staged: bool) -> Result<Slot> {
        let ctx = &self.ctx;
        let px = self.geom.pixels as usize;
        let out_words = self.out_words(frames);
        let events = |flags: Option<CUevent_flags>, n: usize| {
            (0..n)
                .map(|_| ctx.new_event(flags).cuda("creating an event"))
                .collect::<Result<Vec<_>>>()
        };
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let nt = if self.cfg.timing { frames } else { 0 };
        Ok(Slot {
            frames,
            numbers: Vec::with_capacity(frames),
            dev_in: DeviceBuf::new(ctx, frames * px, "uploaded frames")?,
            pin_in: if staged {
                Some(PinnedBuf::new(ctx, frames * px, true, "staged frames")?)
            } else {
                None
            },
            dev_out: DeviceBuf::new(ctx, out_words, "cluster results")?,
            pin_out: PinnedBuf::new(ctx, out_words, false, "cluster results")?,
            ckpt: self.reals.uninit(2 * px, "a pedestal checkpoint")?,
            rows: match self.placer {
                Some(_) => {
                    let room = frames * self.cap;
                    Some((
                        DeviceBuf::new(ctx, room, "placed photons")?,
                        PinnedBuf::new(ctx, room, false, "placed photons")?,
                    ))
                }
                None => None,
            },
            placed: ctx.new_event(None).cuda("creating an event")?,
            up: events(None, frames)?,
            done: events(None, frames)?,
            dl: events(None, frames)?,
            t0: events(timing, nt)?,
            tm: events(timing, nt)?,
            t1: events(timing, nt)?,
        })
    }

    /// Allocates everything a call of `frames` frames needs, so that a timed call allocates
    /// nothing (pinned memory is locked and touched here).
    pub fn reserve(&mut self, frames: usize) -> Result<()> {
        let staged = self.cfg.input == InputMode::Staged;
        let chunk = self.plan_chunk(staged).min(frames.max(1));
        self.ctx.synchronize().cuda("waiting for the GPU")?;
        self.ensure_slots(chunk, staged)
    }
}
