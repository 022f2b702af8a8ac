//! Work over two per-pixel arrays a chunk of pixels at a time, on rayon's threads or on the
//! calling thread: how the fill phase adds frames and the ready state pushes one.

use rayon::prelude::*;

/// Calls `work((i, (a_i, b_i)))` for the `i`-th chunks of `chunk` pixels of `a` and `b`, in
/// parallel when `parallel`, else in order on the calling thread.
pub(super) fn for_each_chunk_pair<T: Send>(
    a: &mut [T],
    b: &mut [T],
    chunk: usize,
    parallel: bool,
    work: impl Fn((usize, (&mut [T], &mut [T]))) + Send + Sync,
) {
    if parallel {
        a.par_chunks_mut(chunk)
            .zip(b.par_chunks_mut(chunk))
            .enumerate()
            .for_each(work);
    } else {
        a.chunks_mut(chunk)
            .zip(b.chunks_mut(chunk))
            .enumerate()
            .for_each(work);
    }
}
