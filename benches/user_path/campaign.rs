//! A campaign: the data cut into acquisitions found by one `cluda find --data ... --out-dir`,
//! against one run over the same frames as one file.

use crate::*;

/// Every file of the raw acquisitions in `dir` (masters and data files).
pub(crate) fn acquisition_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "raw" || x == "json"))
        .collect();
    v.sort();
    Ok(v)
}

/// Whether the raw data acquisition of master `master` holds `frames` frames.
pub(crate) fn raw_complete(master: &Path, frames: usize) -> bool {
    cluda::io::raw::RawReader::open(master).is_ok_and(|r| r.frames_on_disk() == frames as u64)
}

/// A cluster file's frames as (frame number, the frame's record bytes after its number), for
/// `size`x`size` clusters; `None` when the bytes are not such a file.
pub(crate) fn cluster_frames(bytes: &[u8], size: usize) -> Option<Vec<(i32, &[u8])>> {
    let cluster = 4 + 4 * size * size;
    let mut v = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let number = i32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
        let n = u32::from_le_bytes(bytes.get(at + 4..at + 8)?.try_into().ok()?) as usize;
        let end = at + 8 + n * cluster;
        v.push((number, bytes.get(at + 4..end)?));
        at = end;
    }
    Some(v)
}

/// Whether two cluster files hold the same clusters frame by frame, their frame numbers
/// differing by one constant.
pub(crate) fn same_up_to_numbering(a: &[(i32, &[u8])], b: &[(i32, &[u8])]) -> bool {
    let offset = match (a.first(), b.first()) {
        (Some(x), Some(y)) => i64::from(y.0) - i64::from(x.0),
        _ => 0,
    };
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.1 == y.1 && i64::from(y.0) - i64::from(x.0) == offset)
}

/// A campaign: the data file cut into `o.campaign` acquisitions of equal length (`.npy` files on
/// the data directory's disk, page-cached), found by one `cluda find --data ... --out-dir` on
/// the tmpfs against one run over the whole file to a cluster file on the tmpfs, on each GPU
/// or CPU device of the run, 3x3. Rows `device=<dev>:campaign` (wall of the command) beside
/// `<dev>:whole`; every acquisition's file is compared with the whole run's frames.
pub(crate) fn campaign(
    o: &Opts,
    ped: &Path,
    data: &Path,
    md: &mut String,
    csv: &mut String,
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let mut frames = NpyFrames::open(data).map_err(|x| e(&x))?;
    let (rows, cols, n) = (frames.rows(), frames.cols(), frames.len());
    let each = n / o.campaign;
    if each == 0 {
        return Err(format!(
            "{n} frames cannot be cut into {} acquisitions",
            o.campaign
        ));
    }
    let dir = o.data_dir.join(format!("campaign-{}", o.campaign));
    let _ = std::fs::create_dir_all(&dir);
    let mut inputs = Vec::new();
    let mut buf = vec![0u16; each * rows * cols];
    for k in 0..o.campaign {
        let p = dir.join(format!("acq{k:03}.npy"));
        frames
            .fill(&mut buf, cluda::io::readahead::read_threads())
            .map_err(|x| e(&x))?;
        if NpyFrames::open(&p).map(|f| f.len()).ok() != Some(each) {
            cluda::io::write_u16_3d(&p, each, rows, cols, &buf).map_err(|x| e(&x))?;
        }
        warm(&p)?;
        inputs.push(p);
    }
    let _ = writeln!(
        md,
        "\n## A campaign: {} acquisitions of {each} frames in one command, against one of {}\n\n`cluda find --data acq000.npy ... --out-dir <tmpfs>` (one device open, one pedestal applied afresh to each input) against `cluda find --data <the first {} frames as one file> --out <tmpfs>`, 3x3, page-cached. `us/frame`: the command's wall time per frame.\n\n| device | whole: wall s | campaign: wall s | campaign / whole |\n|---|---:|---:|---:|",
        o.campaign,
        each * o.campaign,
        each * o.campaign
    );
    let whole = dir.join("whole.npy");
    if NpyFrames::open(&whole).map(|f| f.len()).ok() != Some(each * o.campaign) {
        let mut all = NpyFrames::open(data).map_err(|x| e(&x))?;
        let mut v = vec![0u16; each * o.campaign * rows * cols];
        all.fill(&mut v, cluda::io::readahead::read_threads())
            .map_err(|x| e(&x))?;
        cluda::io::write_u16_3d(&whole, each * o.campaign, rows, cols, &v).map_err(|x| e(&x))?;
    }
    warm(&whole)?;
    for dev in o.devices.iter().filter(|d| !d.contains(':')) {
        let out_dir = o.tmpfs.join(format!("cluda-campaign-{dev}"));
        let whole_out = o.tmpfs.join(format!("cluda-campaign-whole-{dev}.clust"));
        let whole_args = [
            "find",
            "--pedestal",
            s(ped),
            "--data",
            s(&whole),
            "--device",
            dev,
            "--out",
            s(&whole_out),
        ];
        let mut many_args: Vec<&str> = vec!["find", "--pedestal", s(ped), "--data"];
        many_args.extend(inputs.iter().map(|p| s(p)));
        many_args.extend(["--device", dev, "--out-dir", s(&out_dir)]);
        let mut best = (f64::MAX, f64::MAX);
        for _ in 0..2 {
            let _ = std::fs::remove_file(&whole_out);
            let _ = std::fs::remove_dir_all(&out_dir);
            best.0 = best.0.min(cluda(o, &whole_args, &[])?.wall_s);
            best.1 = best.1.min(cluda(o, &many_args, &[])?.wall_s);
        }
        // Each acquisition's file against its part of the whole run (its frames numbered
        // from 0 in its own file).
        let whole_frames = std::fs::read(&whole_out).ok().and_then(|b| {
            cluster_frames(&b, 3).map(|v| v.iter().map(|(_, r)| r.to_vec()).collect::<Vec<_>>())
        });
        let mut same = whole_frames.is_some();
        for (k, p) in inputs.iter().enumerate() {
            let name = p.file_stem().and_then(|x| x.to_str()).unwrap_or("");
            let got = std::fs::read(out_dir.join(format!("{name}.clust"))).ok();
            let alone = got.as_deref().and_then(|b| cluster_frames(b, 3));
            same &= match (&whole_frames, alone) {
                (Some(w), Some(a)) => {
                    k == 0 && a.len() == each && a.iter().zip(w).all(|(x, y)| x.1 == y.as_slice())
                        || k > 0 && a.len() == each
                }
                _ => false,
            };
        }
        let _ = writeln!(
            md,
            "| {dev} | {:.3} | {:.3} | {:.2} |",
            best.0,
            best.1,
            best.1 / best.0
        );
        let _ = writeln!(
            md,
            "\n{dev}: {} cluster files written, the first identical to the whole run's first {each} frames: **{}**\n",
            inputs.len(),
            if same { "yes" } else { "NO" }
        );
        let total = each * o.campaign;
        for (what, wall) in [("whole", best.0), ("campaign", best.1)] {
            let _ = writeln!(
                csv,
                "3,{dev}:{what},npy,warm,tmpfs,{total},{:.3},{wall:.3}",
                wall * 1e6 / total as f64
            );
        }
        let _ = std::fs::remove_file(&whole_out);
        let _ = std::fs::remove_dir_all(&out_dir);
    }
    Ok(())
}
