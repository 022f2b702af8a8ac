//! The status words of the classify kernel's decoupled look-back, and the per-lane step of
//! its former one-warp variant, kept with its host test as a model of the protocol.
//!
//! Every tile publishes one 64-bit status word: a flag in the top two bits and a count in the
//! low 32 (the kernel uses [`FLAGS`], [`AGGREGATE`] and [`INCLUSIVE`]). The one-warp variant
//! looked at `32 * K` consecutive predecessors at once, each lane at `K` consecutive ones
//! (lane order = tile order), so its wait chain over T tiles was `T / (32 K)` window reads
//! long; the kernel now reads 256 predecessors per round with the whole block
//! (`look_back_block` in `kernels/frame.rs`), so 625 tiles take at most 3 rounds.

/// Status flag mask.
pub const FLAGS: u64 = 3 << 62;
/// The tile's own count is published.
pub const AGGREGATE: u64 = 1 << 62;
/// The count of this and all earlier tiles is published.
pub const INCLUSIVE: u64 = 2 << 62;

/// What one lane learned from its `K` status words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneSummary {
    /// One of the words is an inclusive count.
    pub inclusive: bool,
    /// A word after the last inclusive one (any word, if none is) is not published yet.
    pub waiting: bool,
    /// The last inclusive count plus the aggregates after it (all aggregates, if none is
    /// inclusive).
    pub sum: u32,
}

/// Summarises status words given oldest first.
#[inline(always)]
pub fn summarize<const K: usize>(words: &[u64; K]) -> LaneSummary {
    let mut s = LaneSummary {
        inclusive: false,
        waiting: false,
        sum: 0,
    };
    for &w in words {
        let flag = w & FLAGS;
        if flag == INCLUSIVE {
            s = LaneSummary {
                inclusive: true,
                waiting: false,
                sum: w as u32,
            };
        } else if flag == 0 {
            s.waiting = true;
        } else {
            s.sum = s.sum.wrapping_add(w as u32);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warp part on the CPU: lanes from the last lane holding an inclusive word on count
    /// once none of them waits; otherwise retry (None) or move back (Some(partial, false)).
    fn combine(lanes: &[LaneSummary; 32]) -> Option<(u32, bool)> {
        let from = (0..32).rev().find(|&l| lanes[l].inclusive).unwrap_or(0);
        if lanes[from..].iter().any(|l| l.waiting) {
            return None;
        }
        let sum = lanes[from..]
            .iter()
            .fold(0u32, |a, l| a.wrapping_add(l.sum));
        Some((sum, lanes[from].inclusive))
    }

    fn look_back<const K: usize>(status: &mut [u64], tile: usize, counts: &[u32]) -> u32 {
        let mut earlier = 0u32;
        let mut end = tile as i64;
        loop {
            let lanes: [LaneSummary; 32] = std::array::from_fn(|lane| {
                let words: [u64; K] = std::array::from_fn(|i| {
                    let j = end - (32 * K) as i64 + (lane * K + i) as i64;
                    if j < 0 { INCLUSIVE } else { status[j as usize] }
                });
                summarize(&words)
            });
            match combine(&lanes) {
                None => {
                    // Someone is late: let every unpublished tile publish its aggregate.
                    for (j, w) in status.iter_mut().enumerate().take(tile) {
                        if *w == 0 {
                            *w = AGGREGATE | counts[j] as u64;
                        }
                    }
                }
                Some((s, done)) => {
                    earlier = earlier.wrapping_add(s);
                    if done {
                        return earlier;
                    }
                    end -= (32 * K) as i64;
                }
            }
        }
    }

    #[test]
    fn look_back_finds_every_prefix_whatever_was_published() {
        let mut x: u64 = 99;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for tiles in [1usize, 2, 31, 32, 33, 255, 256, 257, 625, 1000] {
            let counts: Vec<u32> = (0..tiles).map(|_| (rnd() % 300) as u32).collect();
            let prefix: Vec<u32> = counts
                .iter()
                .scan(0u32, |s, &c| {
                    *s += c;
                    Some(*s)
                })
                .collect();
            for _ in 0..20 {
                let mut status: Vec<u64> = (0..tiles)
                    .map(|j| match rnd() % 3 {
                        0 => 0,
                        1 => AGGREGATE | counts[j] as u64,
                        _ => INCLUSIVE | prefix[j] as u64,
                    })
                    .collect();
                let t = (rnd() as usize) % tiles;
                let want = prefix[t] - counts[t];
                assert_eq!(look_back::<8>(&mut status.clone(), t, &counts), want);
                assert_eq!(look_back::<1>(&mut status, t, &counts), want);
            }
        }
    }

    #[test]
    fn summary_of_words() {
        let a = |c| AGGREGATE | c;
        let i = |c| INCLUSIVE | c;
        assert_eq!(
            summarize(&[a(1), i(10), a(2), a(3)]),
            LaneSummary {
                inclusive: true,
                waiting: false,
                sum: 15
            }
        );
        assert_eq!(
            summarize(&[0, i(10), 0, a(3)]),
            LaneSummary {
                inclusive: true,
                waiting: true,
                sum: 13
            }
        );
        assert_eq!(
            summarize(&[a(1), a(2)]),
            LaneSummary {
                inclusive: false,
                waiting: false,
                sum: 3
            }
        );
    }
}
