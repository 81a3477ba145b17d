//! Handing freed memory back to the system between the phases of a run, and while a store is
//! emptied into the smaller records a report keeps.
//!
//! A run over a large store has phases that each hold the whole store and then free it (the
//! `cleanup` plan, then its apply; `inspect`'s cleanup prediction, then its own pass). The
//! allocator keeps what a phase freed for later use, but memory a worker thread freed stays in
//! that thread's arena, where the next phase (on another thread) never finds it: the phases'
//! peaks then add up. [`release_freed`] returns every arena's free pages, so each phase's peak
//! stands alone. (One arena for the whole process would do the same, at the cost of the
//! parallel passes' speed.)

/// Return the free memory of every allocator arena to the system (glibc's `malloc_trim`;
/// nothing elsewhere). Cheap next to a phase that loads a store: one walk over the free lists.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only touches the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
