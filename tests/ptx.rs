//! The PTX build holds every kernel the GPU finder loads, and its only fused multiply-adds
//! are the deliberate ones of the variance (runs without a GPU).

use cluda::cuda::{PTX, ptx_entries};

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
            want.push(format!("cluda_classify_smem_{p}_{side}"));
            want.push(format!("cluda_step_{p}_{side}"));
            want.push(format!("cluda_step_smem_{p}_{side}"));
            want.push(format!("cluda_run1_{p}_{side}"));
        }
    }
    for w in &want {
        assert!(
            entries.contains(&w.as_str()),
            "PTX lacks `.entry {w}`; has {entries:?}"
        );
    }
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
