//! Read-only memory maps of input files that survive the file shrinking underneath them.
//!
//! Reading a page of a shared file map that lies beyond the file's end (another program
//! truncated the file after it was mapped) raises SIGBUS, which kills the process: a library
//! or Python user loses the interpreter, the command line its cleanup and its message. A
//! [`GuardedMap`] registers its address range with a process-wide SIGBUS handler that cluda
//! installs the first time it maps a file. On a fault inside a registered range the handler
//!
//! 1. marks the map as faulted ([`GuardedMap::faulted`]), then
//! 2. maps anonymous zero pages over the map from the faulting page to its end
//!    (`mmap(MAP_FIXED)`), and returns: the read that faulted is restarted and reads zeros.
//!
//! The owner checks [`GuardedMap::faulted`] before it trusts what it read (the engine: before
//! each frame's clusters are handed on, and at the end of the input) and turns it into an
//! error naming the file. Nothing unwinds or jumps out of the handler: it only stores to
//! atomics and makes the `mmap` system call (async-signal-safe in practice on Linux: a plain
//! system call, no lock, no allocation), and it saves and restores `errno`.
//!
//! A SIGBUS that is not a fault in a registered range (another map, a signal sent with
//! `kill`) goes to the handler that was installed before (Rust's own, Python's
//! `faulthandler`, ...) or, when there was none, to the default action (the process ends with
//! SIGBUS, as without cluda). A map is only made while cluda's handler is the one installed:
//! when another program part replaced it, [`GuardedMap::new`] gives `None` and the caller
//! reads the file instead.
//!
//! Linux only; elsewhere [`GuardedMap::new`] always gives `None` (inputs are read).

use std::fs::File;

/// A read-only shared memory map of a whole file whose reads of pages beyond the file's end
/// (after another program truncated it) read zeros and set [`GuardedMap::faulted`] instead of
/// ending the process with SIGBUS (see the module docs).
#[derive(Debug)]
pub struct GuardedMap {
    /// The map; unmapped after the registration is removed ([`Drop`] runs before the fields
    /// are dropped).
    map: memmap2::Mmap,
    /// The registry slot that holds its range.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    slot: usize,
}

impl GuardedMap {
    /// Maps all of `file` (a regular file) read-only, its range registered with the SIGBUS
    /// handler. `None` when the file cannot be mapped, the handler cannot be installed or is
    /// no longer the one installed, every registry slot is taken, or on a system other than
    /// Linux: the caller reads the file instead.
    pub fn new(file: &File) -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            if !handler::ensure_installed() {
                return None;
            }
            // SAFETY: a read-only shared map. Another program may change the file while it is
            // mapped: the bytes read then change as a file changed during a read would (the
            // owner documents this), and a file that shrinks reads zeros with `faulted` set,
            // through the handler (the range is registered below, before the map is used).
            let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
            if map.is_empty() {
                return None;
            }
            let start = map.as_ptr() as usize;
            let slot = handler::register(start, start + map.len())?;
            Some(Self { map, slot })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = file;
            None
        }
    }

    /// Whether a read of the map found pages beyond the file's end (the file shrank while it
    /// was mapped) since it was made: what was read from the faulting page on is zeros, not
    /// the file's data.
    pub fn faulted(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            handler::faulted(self.slot)
        }
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Asks the kernel to fault in `len` bytes from `offset` ahead of their use (best effort:
    /// older kernels refuse, and the pages are then faulted in when read).
    pub fn prefault(&self, offset: usize, len: usize) {
        #[cfg(target_os = "linux")]
        {
            let _ = self
                .map
                .advise_range(memmap2::Advice::PopulateRead, offset, len);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = (offset, len);
    }
}

impl std::ops::Deref for GuardedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for GuardedMap {
    fn drop(&mut self) {
        // Unregistered before `map` is unmapped (fields drop after this): the handler never
        // sees a range that is not mapped by its owner.
        #[cfg(target_os = "linux")]
        handler::unregister(self.slot);
    }
}

#[cfg(target_os = "linux")]
mod handler {
    //! The registry of guarded ranges and the SIGBUS handler that reads it.

    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};

    /// Most maps registered at once (a run maps one per input); a map beyond it is not made.
    const SLOTS: usize = 256;

    /// One registered range, written under a sequence number (odd while it changes) so that
    /// the handler, which cannot lock, reads a consistent `start..end` or skips the slot.
    struct Slot {
        /// Taken by a registration (only registering and unregistering code touch it).
        taken: AtomicBool,
        /// Even when `start..end` is stable; odd while it is written.
        seq: AtomicU64,
        start: AtomicUsize,
        end: AtomicUsize,
        /// Set by the handler on a fault in the range.
        faulted: AtomicBool,
    }

    #[allow(clippy::declare_interior_mutable_const)]
    const FREE: Slot = Slot {
        taken: AtomicBool::new(false),
        seq: AtomicU64::new(0),
        start: AtomicUsize::new(0),
        end: AtomicUsize::new(0),
        faulted: AtomicBool::new(false),
    };

    static REGISTRY: [Slot; SLOTS] = [FREE; SLOTS];

    /// The page size, read before the handler is installed.
    static PAGE: AtomicUsize = AtomicUsize::new(4096);

    /// The action SIGBUS had before cluda's handler (`None`: installing failed).
    static PREVIOUS: OnceLock<Option<Previous>> = OnceLock::new();

    /// The previous action, as the handler needs it.
    struct Previous {
        action: libc::sigaction,
    }

    // SAFETY: a plain record of integers and a signal set, written once before the handler is
    // installed and only read afterwards.
    unsafe impl Sync for Previous {}
    // SAFETY: as above.
    unsafe impl Send for Previous {}

    /// Installs the handler once (keeping the previous action for what is not cluda's);
    /// whether it is the action installed now.
    pub(super) fn ensure_installed() -> bool {
        let installed = PREVIOUS.get_or_init(|| {
            // SAFETY: sysconf has no preconditions.
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if let Ok(page) = usize::try_from(page)
                && page.is_power_of_two()
            {
                PAGE.store(page, Ordering::Relaxed);
            }
            // SAFETY: both structs are zeroed plain data (a valid "no handler, empty mask"),
            // filled as sigaction(2) documents; `on_sigbus` has the SA_SIGINFO signature and
            // only does async-signal-safe things (see the module docs).
            unsafe {
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
                new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut new.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, &new, &mut old) != 0 {
                    return None;
                }
                Some(Previous { action: old })
            }
        });
        if installed.is_none() {
            return false;
        }
        // Still cluda's? (A later `faulthandler.enable()`, or any other program part, may
        // have replaced it; maps are then not made.)
        // SAFETY: a query only (no new action); `now` is zeroed plain data it fills.
        unsafe {
            let mut now: libc::sigaction = std::mem::zeroed();
            libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut now) == 0
                && now.sa_sigaction == on_sigbus as *const () as libc::sighandler_t
        }
    }

    /// Registers `start..end` (the whole map); its slot, or `None` when every slot is taken.
    pub(super) fn register(start: usize, end: usize) -> Option<usize> {
        let k = REGISTRY.iter().position(|s| {
            s.taken
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })?;
        let s = &REGISTRY[k];
        s.seq.fetch_add(1, Ordering::AcqRel);
        s.faulted.store(false, Ordering::Relaxed);
        s.start.store(start, Ordering::Relaxed);
        s.end.store(end, Ordering::Relaxed);
        s.seq.fetch_add(1, Ordering::Release);
        Some(k)
    }

    /// Removes slot `k`'s range (its map is about to be unmapped).
    pub(super) fn unregister(k: usize) {
        let Some(s) = REGISTRY.get(k) else { return };
        s.seq.fetch_add(1, Ordering::AcqRel);
        s.start.store(0, Ordering::Relaxed);
        s.end.store(0, Ordering::Relaxed);
        s.seq.fetch_add(1, Ordering::Release);
        s.taken.store(false, Ordering::Release);
    }

    /// Whether the handler saw a fault in slot `k`'s range.
    pub(super) fn faulted(k: usize) -> bool {
        REGISTRY
            .get(k)
            .is_some_and(|s| s.faulted.load(Ordering::SeqCst))
    }

    /// The slot whose stable range holds `addr`, with its end.
    fn find(addr: usize) -> Option<(&'static Slot, usize)> {
        REGISTRY.iter().find_map(|s| {
            let before = s.seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                // Being written: a range being registered is not used yet, one being removed
                // is no longer used; neither is the one that faulted.
                return None;
            }
            let (start, end) = (
                s.start.load(Ordering::Relaxed),
                s.end.load(Ordering::Relaxed),
            );
            fence(Ordering::Acquire);
            let stable = s.seq.load(Ordering::Relaxed) == before;
            (stable && start <= addr && addr < end).then_some((s, end))
        })
    }

    /// The SIGBUS handler (see the module docs).
    extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: errno is this thread's; restored before returning.
        let errno = unsafe { *libc::__errno_location() };
        // A fault the kernel raised (si_code > 0) carries its address; one sent by a program
        // (kill, raise: si_code <= 0) is never cluda's.
        // SAFETY: the kernel passes a valid siginfo_t for an SA_SIGINFO handler.
        let addr = unsafe {
            match info.as_ref() {
                Some(i) if i.si_code > 0 => i.si_addr() as usize,
                _ => 0,
            }
        };
        if addr != 0
            && let Some((slot, end)) = find(addr)
        {
            // Set before the zero pages appear, so that whoever reads zeros finds it set.
            slot.faulted.store(true, Ordering::SeqCst);
            let page = PAGE.load(Ordering::Relaxed);
            let from = addr & !(page - 1);
            let to = end.div_ceil(page) * page;
            // SAFETY: `from..to` lies in the registered map (whose owner is alive: a read of
            // it just faulted); replacing its pages with anonymous zero pages leaves the
            // range mapped (the owner's munmap removes them with the rest).
            let p = unsafe {
                libc::mmap(
                    from as *mut libc::c_void,
                    to - from,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                // SAFETY: as above.
                unsafe { *libc::__errno_location() = errno };
                return;
            }
        }
        // SAFETY: passes the signal on as the previous action would have taken it.
        unsafe {
            pass_on(sig, info, ctx);
            *libc::__errno_location() = errno;
        }
    }

    /// Hands a SIGBUS that is not cluda's to the action installed before cluda's: its handler,
    /// or the default action (the faulting read, restarted, or the signal raised again, ends
    /// the process with SIGBUS). A SIGBUS sent by a program (`kill`) ends the process too
    /// unless the previous handler keeps it from doing so.
    ///
    /// # Safety
    /// Only from the SIGBUS handler, with the arguments it received.
    unsafe fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: see the function's contract; every call below is async-signal-safe.
        unsafe {
            let previous = PREVIOUS.get().and_then(Option::as_ref);
            let handler = previous.map_or(libc::SIG_DFL, |p| p.action.sa_sigaction);
            let sent = info.as_ref().is_none_or(|i| i.si_code <= 0);
            if handler == libc::SIG_IGN && sent {
                return;
            }
            if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigemptyset(&mut dfl.sa_mask);
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
                if sent {
                    // Delivered once this handler returns (SIGBUS is blocked until then).
                    libc::raise(libc::SIGBUS);
                }
                return;
            }
            let flags = previous.map_or(0, |p| p.action.sa_flags);
            if flags & libc::SA_SIGINFO != 0 {
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    std::mem::transmute(handler);
                f(sig, info, ctx);
            } else {
                let f: extern "C" fn(libc::c_int) = std::mem::transmute(handler);
                f(sig);
            }
            // A handler that gave up by restoring the default action (Rust's own stack
            // overflow handler does, expecting the faulting read to fault again) would leave a
            // signal that was sent, not raised by a fault, without effect: it is raised again,
            // and the default action ends the process.
            if sent {
                let mut now: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut now) == 0
                    && now.sa_sigaction == libc::SIG_DFL
                {
                    libc::raise(libc::SIGBUS);
                }
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A map of a file truncated to nothing reads zeros where the data was and says so,
    /// instead of ending the process; an untouched map says nothing.
    #[test]
    fn a_map_of_a_truncated_file_reads_zeros_and_says_so() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 3 * 65536]).expect("write");
        let file = File::open(&path).expect("open");
        let map = GuardedMap::new(&file).expect("map");
        let other = GuardedMap::new(&file).expect("second map");
        assert_eq!(map[100], 7);
        assert!(!map.faulted());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open for writing")
            .set_len(65536)
            .expect("truncate");
        // Within the file still: the data.
        assert_eq!(map[100], 7);
        assert!(!map.faulted());
        // Beyond its new end: zeros and the mark (a SIGBUS without the handler).
        let tail: u64 = map[65536..].iter().map(|&b| u64::from(b)).sum();
        assert_eq!(tail, 0);
        assert!(map.faulted());
        // The other map of the same file is not marked until it is read there.
        assert!(!other.faulted());
        assert_eq!(other[2 * 65536 + 5], 0);
        assert!(other.faulted());
        drop(map);
        drop(other);
        // Slots are given back: many maps one after another never run out.
        for _ in 0..1000 {
            let m = GuardedMap::new(&file).expect("map again");
            assert!(!m.faulted());
        }
    }
}
