//! The lib tests' allocator: the system allocator, counting the bytes each thread holds, so
//! that a test can bound the memory a piece of code needs ([`peak_during`]) without timing
//! anything or reading the process's resident size (which other tests share).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    /// Bytes allocated minus bytes freed by this thread (freeing another thread's allocation
    /// lowers it).
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn add(n: isize) {
    // `try_with`: a thread being torn down has no counters left; its allocations don't count.
    let _ = HELD.try_with(|h| {
        let now = h.get() + n;
        h.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

// SAFETY: every call is passed to `System` unchanged; the counters only read the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        add(-(layout.size() as isize));
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Run `f` on this thread and return it with the most bytes it held at once beyond what the
/// thread held before (allocations of other threads, e.g. rayon's, are not seen).
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = HELD.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let out = f();
    let peak = PEAK.with(Cell::get);
    (out, (peak - start).max(0) as usize)
}

#[test]
fn the_peak_counts_what_is_held_at_once() {
    let ((), peak) = peak_during(|| {
        let a = vec![0u8; 1 << 20];
        drop(a);
        let b = vec![0u8; 1 << 19];
        std::hint::black_box(&b);
    });
    assert!((1 << 20..(1 << 20) + 4096).contains(&peak), "{peak}");
}
