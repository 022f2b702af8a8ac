//! The engine's kept ring on a GPU (needs a CUDA GPU: ignored elsewhere; run with
//! `--include-ignored`): runs from borrowed memory ([`MemorySource`]) through one ring of
//! page-locked slots kept between them ([`find_stream_with`], as the Python package's
//! find calls run), of lengths that do and do not fill the ring, give the CPU's clusters and
//! pedestal in one call over the same frames, and the same slots come back after each run.

use cluda::cluster::ClusterSize;
use cluda::engine::{EngineConfig, RingSlots, find_stream_with};
use cluda::finder::gpu::PipelineConfig;
use cluda::io::MemorySource;
use cluda::{ClusterBatch, ClusterFinder, Precision, ThresholdMode};
use support::gpu_vs_cpu::{Data, cpu_finder, gpu_finder};

#[test]
#[ignore = "needs a CUDA GPU"]
fn runs_through_a_kept_ring_equal_one_cpu_call() {
    for size in [ClusterSize::S3, ClusterSize::S9] {
        let d = Data::new(64, 96, 11, 40, 300);
        let cfg = d.config(size, Precision::F64, ThresholdMode::Live);
        let mut want = ClusterBatch::new(size);
        let mut cpu = cpu_finder(&cfg, &d);
        cpu.find_each(d.data(), &mut |fc| {
            want.push_frame(fc.words());
            Ok(())
        })
        .expect("cpu");
        let mut gpu = gpu_finder(&cfg, PipelineConfig::default(), &d);
        let engine = EngineConfig {
            chunk: 32,
            slots: 3,
            map: false,
        };
        let mut ring = Some(RingSlots::allocate(&gpu, engine).expect("ring"));
        let mut got = ClusterBatch::new(size);
        let mut frames = 0usize;
        // 1 frame, less than a slot, exactly two slots, then the rest (not a whole slot).
        for (from, to) in [(0, 1), (1, 20), (20, 84), (84, 300)] {
            let mut src = MemorySource::new(&d.data[from * d.px()..to * d.px()], d.rows, d.cols)
                .expect("src");
            let stats = find_stream_with(&mut gpu, &mut src, engine, &mut ring, &mut |_, fc| {
                assert_eq!(fc.frame.get() as usize + from, frames, "frames in order");
                frames += 1;
                got.push_frame(fc.words());
                Ok(())
            })
            .expect("run");
            assert_eq!(stats.frames as usize, to - from);
            assert!(
                ring.is_some(),
                "the ring came back after frames {from}..{to}"
            );
        }
        assert_eq!(frames, 300);
        assert!(got.words() == want.words(), "{size:?}: clusters differ");
        assert_eq!(
            gpu.pedestal().expect("gpu pedestal"),
            cpu.pedestal().expect("cpu pedestal")
        );
    }
}
