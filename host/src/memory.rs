//! Up-front memory checks, so a valid but huge input (a sparse 65536 x 65536 frame, a
//! 50-million-row descriptor file) is an [`Error::TooLarge`] naming what it was for, never an
//! abort on a failed allocation.
//!
//! The bound is the kernel's `MemAvailable` (Linux `/proc/meminfo`); where that cannot be read
//! only the allocator's own answer ([`Vec::try_reserve_exact`]) decides.

use crate::error::{Error, Result};

/// Bytes of memory available to new allocations, when the system says (`MemAvailable` of
/// `/proc/meminfo` on Linux); `None` elsewhere.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Checks that `bytes` for `what` fit in the available memory; an [`Error::TooLarge`] if not.
pub fn check(what: impl FnOnce() -> String, bytes: u64) -> Result<()> {
    match available_bytes() {
        Some(available) if bytes > available => Err(Error::TooLarge {
            what: what(),
            bytes,
            available,
        }),
        _ => Ok(()),
    }
}

/// A vector of `n` zeroed `T`s, allocated fallibly after [`check`]: an [`Error::TooLarge`]
/// (naming `what`) instead of an abort when the memory is not there (also under an
/// address-space limit, which `MemAvailable` does not show). The memory comes zeroed from the
/// allocator (`calloc`: fresh pages are not touched until written), as `vec![0; n]` does.
pub fn zeroed_vec<T: bytemuck::Zeroable + Clone>(
    what: impl Fn() -> String,
    n: usize,
) -> Result<Vec<T>> {
    let bytes = (n as u64).saturating_mul(std::mem::size_of::<T>() as u64);
    check(&what, bytes)?;
    let too_large = || Error::TooLarge {
        what: what(),
        bytes,
        available: available_bytes().unwrap_or(0),
    };
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| too_large())?;
    if layout.size() == 0 {
        return Ok(vec![T::zeroed(); n]);
    }
    // SAFETY: the layout's size is not zero (checked above).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if ptr.is_null() {
        return Err(too_large());
    }
    // SAFETY: `ptr` comes from the global allocator with the layout of `[T; n]` (so capacity
    // `n` and `T`'s alignment), and its `n` elements are all-zero bytes, a valid `T` because
    // `T: Zeroable`; the vector takes ownership of the allocation.
    Ok(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

/// Writes one zero into every page of `v` (which must be all zeros, as [`zeroed_vec`] gives
/// it), from every core: fresh pages are then mapped before their first real use. Reading a
/// fresh page maps the shared zero page and the first write after copies it, with a TLB flush
/// that interrupts every thread of the process; a device copy into fresh pages faults them in
/// one at a time on one thread.
pub fn prefault<T: bytemuck::Pod + Send>(v: &mut [T]) {
    use rayon::prelude::*;
    let page = (4096 / std::mem::size_of::<T>().max(1)).max(1);
    v.par_chunks_mut(page * 256).for_each(|run| {
        for p in run.chunks_mut(page) {
            // SAFETY: `p` is a live, non-empty slice of `v`; zero is what it holds.
            unsafe { std::ptr::write_volatile(p.as_mut_ptr(), T::zeroed()) };
        }
    });
}

/// An empty vector with room for `n` `T`s, reserved fallibly after [`check`]: an
/// [`Error::TooLarge`] (naming `what`) instead of an abort when the memory is not there.
pub fn with_capacity<T>(what: impl Fn() -> String, n: usize) -> Result<Vec<T>> {
    let bytes = (n as u64).saturating_mul(std::mem::size_of::<T>() as u64);
    check(&what, bytes)?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::TooLarge {
        what: what(),
        bytes,
        available: available_bytes().unwrap_or(0),
    })?;
    Ok(v)
}

/// Makes room in `v` for `additional` more `T`s, fallibly, for a vector that grows as rows
/// come (their count is not known up front): an [`Error::TooLarge`] (naming `what`) instead of
/// an abort when the memory is not there. It grows to twice its capacity while that fits in
/// the available memory ([`check`]), else to exactly what is asked, so a list near the limit
/// never asks for more than its rows.
pub fn reserve<T>(v: &mut Vec<T>, additional: usize, what: impl Fn() -> String) -> Result<()> {
    if v.capacity() - v.len() >= additional {
        return Ok(());
    }
    let size = std::mem::size_of::<T>() as u64;
    let need = v.len().saturating_add(additional);
    let doubled = need.max(v.capacity().saturating_mul(2));
    let bytes = |n: usize| (n as u64).saturating_mul(size);
    let target = if check(&what, bytes(doubled)).is_ok() {
        doubled
    } else {
        check(&what, bytes(need))?;
        need
    };
    v.try_reserve_exact(target - v.len())
        .map_err(|_| Error::TooLarge {
            what: what(),
            bytes: bytes(need),
            available: available_bytes().unwrap_or(0),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_grows_or_refuses_by_name() {
        let mut v: Vec<u64> = Vec::new();
        reserve(&mut v, 10, || "rows".into()).unwrap();
        assert!(v.capacity() >= 10);
        v.extend_from_slice(&[1; 10]);
        reserve(&mut v, 1, || "rows".into()).unwrap();
        assert!(v.capacity() >= 20, "doubles: {}", v.capacity());
        let e = reserve(&mut v, usize::MAX / 16, || "kept rows".into()).unwrap_err();
        assert!(matches!(e, Error::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("kept rows"), "{e}");
        assert_eq!(v.len(), 10, "left as it was");
    }

    #[test]
    fn huge_is_an_error_small_is_fine() {
        let e = zeroed_vec::<u64>(|| "test buffer".into(), usize::MAX / 16).unwrap_err();
        assert!(matches!(e, Error::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("test buffer"), "{e}");
        assert_eq!(
            zeroed_vec::<u16>(|| "small".into(), 10).unwrap(),
            vec![0; 10]
        );
    }
}
