//! Imaging on the device: placing every chunk's records as photon rows, and accumulating an
//! eta cube or image from every checked chunk, with copies of it on request.

use std::sync::Arc;

use super::super::accumulate::{ChunkRecords, DeviceAccum, DevicePlacer, PlacedOutputs};
use super::Pipeline;
use super::chunk::{Job, Slot};
use crate::error::{CudaContextExt, Error, Result};
use crate::interpolation::AccumulationPeek;

impl Pipeline {
    /// The records of the chunk in `slot` (compact results), as the eta kernels read them.
    pub(super) fn chunk_records(&self, job: Job, slot: &Slot) -> ChunkRecords {
        ChunkRecords {
            out: slot.dev_out.ptr(),
            frames: job.n as u32,
            records_at: (slot.frames + 1) as u32,
            room: (slot.frames * self.cap) as u32,
        }
    }

    /// Queues the placement of chunk `job`'s records (when rows are asked for) on the compute
    /// stream, right after its kernels, and marks it done with the slot's `placed` event. An
    /// overflowing chunk's records are not placed (the kernel sees the count over the room);
    /// a chunk redone is placed again.
    pub(super) fn place(&self, job: Job, slot: &Slot) -> Result<()> {
        let (Some(placer), Some((rows, _))) = (&self.placer, &slot.rows) else {
            return Ok(());
        };
        placer.launch(
            &self.compute,
            self.chunk_records(job, slot),
            PlacedOutputs::rows(rows.ptr()),
        )?;
        slot.placed
            .record(&self.compute)
            .cuda("recording a placement event")
    }

    /// Queues the accumulation of a checked chunk's records (when one is asked for), on the
    /// compute stream: after its kernels, before anything the slot's next chunk queues.
    pub(super) fn accumulate(&self, job: Job) -> Result<()> {
        let Some(acc) = &self.accum else {
            return Ok(());
        };
        let slot = &self.slots[job.slot];
        acc.launch(&self.compute, self.chunk_records(job, slot))
    }

    /// Starts placing every chunk's records on the device from the next call on, for rows
    /// handed out with the clusters (`Some`), or stops (`None`). Whether rows will come:
    /// `false` without compact results (the records are not in one buffer). Must only be
    /// called between calls (the slots are remade with room for the rows).
    pub fn place_rows(
        &mut self,
        device: &crate::cuda::Device,
        rules: Option<&crate::interpolation::PlaceRows>,
    ) -> Result<bool> {
        self.placer = None;
        let Some(rules) = rules else {
            return Ok(false);
        };
        if !self.cfg.compact {
            return Ok(false);
        }
        self.ctx.bind_to_thread().cuda("binding the CUDA context")?;
        let placer = DevicePlacer::new(device, &self.compute, rules, self.size)?;
        // The uploads ran on the compute stream, which every launch follows.
        self.placer = Some(placer);
        Ok(true)
    }

    /// Starts accumulating `what` from every chunk found from now on; `false` without compact
    /// results (the records are not in one buffer) or while another accumulation is under
    /// way (one at a time: the caller counts on the host).
    pub fn start_accumulating(
        &mut self,
        device: &crate::cuda::Device,
        what: &crate::interpolation::Accumulate,
        rows: usize,
        cols: usize,
    ) -> Result<bool> {
        if !self.cfg.compact || self.accum.is_some() {
            return Ok(false);
        }
        self.accum = Some(DeviceAccum::new(
            device,
            &self.compute,
            what,
            self.size,
            rows,
            cols,
        )?);
        Ok(true)
    }

    /// A copy of what was accumulated so far (every chunk checked until now), on the compute
    /// stream; the accumulation goes on.
    pub fn peek_accumulated(&mut self) -> Result<Option<crate::interpolation::Accumulated>> {
        match &self.accum {
            Some(a) => {
                self.ctx.bind_to_thread().cuda("binding the CUDA context")?;
                a.peek(&self.compute).map(Some)
            }
            None => Ok(None),
        }
    }

    /// The request for copies of the accumulation under way, made when first asked for.
    pub fn accumulation_peek(&mut self) -> Option<Arc<AccumulationPeek>> {
        self.accum.as_ref()?;
        Some(self.peek.get_or_insert_with(Default::default).clone())
    }

    /// Answers a request for a copy of the counts, if one was made: after a chunk was
    /// delivered, so the copy counts every frame visited so far. The download waits for the
    /// chunks in flight on the compute stream (which the next checks wait for anyway): one
    /// short gap in the pipeline per request.
    pub(super) fn answer_peek(&mut self) {
        if let Some(p) = self.peek.clone()
            && p.is_wanted()
        {
            let counts = self.peek_accumulated().and_then(|a| {
                a.ok_or_else(|| Error::Internal("a peek with nothing accumulated".into()))
            });
            p.answer(counts);
        }
    }

    /// What was accumulated, which stops accumulating.
    pub fn take_accumulated(&mut self) -> Result<Option<crate::interpolation::Accumulated>> {
        self.peek = None;
        match self.accum.take() {
            Some(a) => a.take(&self.compute).map(Some),
            None => Ok(None),
        }
    }
}
