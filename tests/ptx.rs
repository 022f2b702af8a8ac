//! The PTX build holds every kernel the GPU finder loads, and its only fused multiply-adds
//! are the deliberate ones of the variance (runs without a GPU).

use std::mem::{offset_of, size_of};

use cluda::cuda::{PTX, ptx_entries};
use cluda_gpu::args::{ClassifyArgs, PrepareArgs, RunArgs, StepArgs, names};

#[test]
fn ptx_holds_every_finder_kernel() {
    let entries = ptx_entries();
    let mut want = vec![
        "cluda_prepare_f64".to_string(),
        "cluda_prepare_f32".to_string(),
    ];
    for p in ["f64", "f32"] {
        for side in [3, 5, 7, 9] {
            want.push(format!("cluda_classify_{p}_{side}"));
            want.push(format!("cluda_step_{p}_{side}"));
            want.push(format!("cluda_run1_{p}_{side}"));
        }
    }
    for w in &want {
        assert!(
            entries.contains(&w.as_str()),
            "PTX lacks `.entry {w}`; has {entries:?}"
        );
    }
    // The name table the host loads from lists exactly these.
    let mut table: Vec<String> = [names::prepare(true), names::prepare(false)]
        .into_iter()
        .map(String::from)
        .collect();
    for f64 in [true, false] {
        for side in names::SIDES {
            for name in [
                names::classify(f64, side),
                names::step(f64, side),
                names::run(f64, side),
            ] {
                table.push(name.expect("every side has kernels").to_string());
            }
        }
    }
    table.sort();
    want.sort();
    assert_eq!(table, want);
    assert_eq!(names::run(true, 4), None);
}

/// The `(size, offset)` of every parameter of entry `name`, from its PTX parameter list
/// (offsets as CUDA lays out a parameter buffer: each at a multiple of its size).
fn ptx_params(name: &str) -> Vec<(usize, usize)> {
    let head = format!(".visible .entry {name}(");
    let start = PTX
        .find(&head)
        .unwrap_or_else(|| panic!("PTX lacks `{name}`"))
        + head.len();
    let end = start + PTX[start..].find(')').expect("a parameter list ends");
    let mut at = 0usize;
    let mut out = Vec::new();
    for line in PTX[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        let size = if line.starts_with(".param .u64") || line.starts_with(".param .f64") {
            8
        } else if line.starts_with(".param .u32") || line.starts_with(".param .f32") {
            4
        } else {
            panic!("`{name}`: unexpected parameter `{line}`")
        };
        at = at.next_multiple_of(size);
        out.push((at, size));
        at += size;
    }
    out
}

/// Every kernel the host can ask for takes exactly its family's argument struct, field by
/// field: as many parameters as fields, each of its field's size at its field's offset (the
/// host hands a launch the address of every field).
#[test]
fn every_kernel_takes_its_argument_struct() {
    let check = |name: &str, layout: &[(usize, usize)]| {
        assert_eq!(
            ptx_params(name),
            layout,
            "`{name}` against its argument struct"
        );
    };
    for (f64, prepare, classify, step, run) in [
        (
            true,
            PrepareArgs::<f64>::layout().to_vec(),
            ClassifyArgs::<f64>::layout().to_vec(),
            StepArgs::<f64>::layout().to_vec(),
            RunArgs::<f64>::layout().to_vec(),
        ),
        (
            false,
            PrepareArgs::<f32>::layout().to_vec(),
            ClassifyArgs::<f32>::layout().to_vec(),
            StepArgs::<f32>::layout().to_vec(),
            RunArgs::<f32>::layout().to_vec(),
        ),
    ] {
        check(names::prepare(f64), &prepare);
        for side in names::SIDES {
            check(names::classify(f64, side).unwrap(), &classify);
            check(names::step(f64, side).unwrap(), &step);
            check(names::run(f64, side).unwrap(), &run);
        }
    }
}

/// Every matcher kernel takes its argument struct field by field, under the struct's entry
/// name (the host loads each kernel by that name and launches it with that struct).
#[test]
fn every_matcher_kernel_takes_its_argument_struct() {
    use cluda_gpu::args::{
        MatchMergePartialsArgs, MatchSqnormsArgs, MatchV1DistancesArgs, MatchV1RowminArgs,
        MatchV2FusedArgs, MatchV3FoldArgs, MatchV3RescoreArgs, MatchV4FoldArgs, MatchV4RadiiArgs,
        MatchV4RescoreArgs,
    };
    /// `(entry name, parameter layout)` of each argument struct.
    macro_rules! kernels {
        ($($args:ident),*) => {
            vec![$(($args::ENTRY, $args::layout().to_vec())),*]
        };
    }
    #[allow(
        unused_mut,
        reason = "the feature `experimental` adds V4's fused kernels"
    )]
    let mut kernels: Vec<(&str, Vec<(usize, usize)>)> = kernels!(
        MatchV1DistancesArgs,
        MatchV1RowminArgs,
        MatchV2FusedArgs,
        MatchMergePartialsArgs,
        MatchSqnormsArgs,
        MatchV3FoldArgs,
        MatchV3RescoreArgs,
        MatchV4RadiiArgs,
        MatchV4FoldArgs,
        MatchV4RescoreArgs
    );
    #[cfg(feature = "experimental")]
    {
        use cluda_gpu::args::{MatchV4Fused1Args, MatchV4FusedArgs, MatchV4MergeArgs};
        kernels.extend(kernels!(
            MatchV4FusedArgs,
            MatchV4Fused1Args,
            MatchV4MergeArgs
        ));
    }
    let entries = ptx_entries();
    let mut matcher: Vec<&str> = entries
        .iter()
        .copied()
        .filter(|e| e.starts_with("cluda_match_"))
        .collect();
    matcher.sort_unstable();
    let mut names: Vec<&str> = kernels.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    assert_eq!(
        names, matcher,
        "the matcher's structs name every matcher kernel"
    );
    for (name, layout) in &kernels {
        assert_eq!(&ptx_params(name), layout, "`{name}` against its struct");
    }
}

/// Offsets of the named fields of `$t`.
macro_rules! offsets {
    ($t:ty: $($f:ident),*) => {
        [$(offset_of!($t, $f)),*]
    };
}

/// The argument structs' layouts, pinned: the host and the kernels agree on them by
/// construction; this catches a change to them that nobody meant.
#[test]
fn argument_struct_layouts_are_pinned() {
    assert_eq!(
        offsets!(PrepareArgs<f64>: frame, base, a, b, frozen_std, cols, pixels, stride, r, inv,
            n_sigma, live, c_plane, t_out, status, n_status),
        [
            0, 8, 16, 24, 32, 40, 44, 48, 52, 56, 64, 72, 80, 88, 96, 104
        ]
    );
    assert_eq!(
        offsets!(PrepareArgs<f32>: inv, n_sigma, live, c_plane, t_out, status, n_status),
        [56, 60, 64, 72, 80, 88, 96]
    );
    assert_eq!(
        offsets!(ClassifyArgs<f64>: frame, base, a, b, c, t, cols, pixels, stride, tiles, inv,
            status, base_in, count_out, records, room),
        [
            0, 8, 16, 24, 32, 40, 48, 52, 56, 60, 64, 72, 80, 88, 96, 104
        ]
    );
    assert_eq!(
        offsets!(ClassifyArgs<f32>: inv, status, room),
        [64, 72, 104]
    );
    assert_eq!(
        offsets!(StepArgs<f64>: room, next_frame, frozen_std, r, n_sigma, live, c_next, t_next,
            status_next),
        [104, 112, 120, 128, 136, 144, 152, 160, 168]
    );
    assert_eq!(
        offsets!(StepArgs<f32>: n_sigma, live, c_next, t_next, status_next),
        [132, 136, 144, 152, 160]
    );
    assert_eq!(
        offsets!(RunArgs<f64>: frames, n, base, a, b, frozen_std, planes, plane_len, work, cols,
            pixels, stride, tiles, r, inv, n_sigma, live, base_in, count_out, records, room),
        [
            0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 76, 80, 84, 88, 96, 104, 112, 120, 128, 136, 144
        ]
    );
    assert_eq!(
        offsets!(RunArgs<f32>: r, inv, n_sigma, live, base_in, count_out, records, room),
        [88, 92, 96, 100, 104, 112, 120, 128]
    );
    let sizes = [
        (size_of::<PrepareArgs<f64>>(), 112),
        (size_of::<PrepareArgs<f32>>(), 104),
        (size_of::<ClassifyArgs<f64>>(), 112),
        (size_of::<ClassifyArgs<f32>>(), 112),
        (size_of::<StepArgs<f64>>(), 176),
        (size_of::<StepArgs<f32>>(), 168),
        (size_of::<RunArgs<f64>>(), 152),
        (size_of::<RunArgs<f32>>(), 136),
    ];
    for (i, (got, want)) in sizes.into_iter().enumerate() {
        assert_eq!(got, want, "argument struct {i}: size");
    }
    assert_eq!(PrepareArgs::<f64>::PARAMS, 16);
    assert_eq!(ClassifyArgs::<f64>::PARAMS, 16);
    assert_eq!(StepArgs::<f64>::PARAMS, 24);
    assert_eq!(RunArgs::<f64>::PARAMS, 21);
}

#[test]
fn only_the_variance_is_fused() {
    // Split the PTX into entries: the prepare kernels hold the one variance fma; the classify
    // kernels (window sums, pedestal update) must hold none.
    // The step kernels (classify, then the next frame's prepare) hold exactly the prepare
    // kernel's one variance fma. A run kernel with T tiles per block prepares each of its T
    // pixels at two places (the launch's first frame, then every next frame), each with that
    // one variance fma: 2T in all.
    let mut current = String::new();
    let mut fused = std::collections::BTreeMap::<String, usize>::new();
    for line in PTX.lines() {
        if let Some(rest) = line.trim_start().strip_prefix(".visible .entry ") {
            current = rest.split('(').next().unwrap_or(rest).trim().to_string();
            fused.insert(current.clone(), 0);
        }
        let l = line.trim_start();
        if l.starts_with("fma.") || l.starts_with("mad.f") || l.starts_with("mad.rn") {
            assert!(
                !current.starts_with("cluda_classify_"),
                "unexpected fused operation in `{current}`: {l}"
            );
            *fused.entry(current.clone()).or_default() += 1;
        }
    }
    for (entry, n) in &fused {
        if entry.starts_with("cluda_step_") || entry.starts_with("cluda_prepare_") {
            assert_eq!(
                *n, 1,
                "`{entry}` holds {n} fused operations, want the variance's one"
            );
        }
        if entry.starts_with("cluda_run1_") {
            // The variance of the first frame's threshold, and of every later frame's.
            assert_eq!(
                *n, 2,
                "`{entry}` holds {n} fused operations, want the variance's two"
            );
        }
    }
    assert!(
        PTX.contains("fma.rn.f64"),
        "the f64 variance fma is missing"
    );
    assert!(
        PTX.contains("fma.rn.f32"),
        "the f32 variance fma is missing"
    );
}

#[test]
fn one_tile_run_kernels_carry_their_launch_bounds() {
    // build.rs adds `.maxntid 256, 1, 1` and `.minnctapersm 5` to every `cluda_run1_*` entry
    // (five 256-thread blocks per SM keep a 400x400 frame's 625 tiles resident on an H200);
    // without them the finder silently falls back to one launch per frame.
    let mut current = String::new();
    let mut bounds = std::collections::BTreeMap::<String, (bool, bool)>::new();
    for line in PTX.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix(".visible .entry ") {
            current = rest.split('(').next().unwrap_or(rest).trim().to_string();
            if current.starts_with("cluda_run1_") {
                bounds.insert(current.clone(), (false, false));
            }
        }
        if let Some(b) = bounds.get_mut(&current) {
            b.0 |= l == ".maxntid 256, 1, 1";
            b.1 |= l == ".minnctapersm 5";
        }
    }
    assert_eq!(bounds.len(), 8, "one-tile run kernels: {bounds:?}");
    for (entry, (maxntid, minctas)) in &bounds {
        assert!(*maxntid && *minctas, "`{entry}` lacks its launch bounds");
    }
}

#[test]
fn both_builds_hold_the_same_kernels_for_their_targets() {
    use cluda::cuda::{PTX_BASELINE, PtxBuild, ptx_entries_of};
    let mut tuned = ptx_entries_of(PTX);
    let mut base = ptx_entries_of(PTX_BASELINE);
    assert!(!tuned.is_empty());
    tuned.sort_unstable();
    base.sort_unstable();
    assert_eq!(
        tuned, base,
        "the sm80 and sm90 builds differ in their entries"
    );
    let header = |ptx: &'static str, key: &str| {
        ptx.lines()
            .map(str::trim)
            .find(|l| l.starts_with(key))
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(header(PTX, ".target"), ".target sm_90");
    assert_eq!(header(PTX, ".version"), ".version 8.0");
    assert_eq!(header(PTX_BASELINE, ".target"), ".target sm_80");
    assert_eq!(header(PTX_BASELINE, ".version"), ".version 7.0");
    // Both carry the run kernels' launch bounds.
    for b in PtxBuild::ALL {
        let runs = ptx_entries_of(b.ptx())
            .iter()
            .filter(|e| e.starts_with("cluda_run1_"))
            .count();
        assert!(runs > 0);
        assert_eq!(b.ptx().matches(".minnctapersm 5").count(), runs, "{b:?}");
    }
}
