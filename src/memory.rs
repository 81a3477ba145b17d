//! Handing freed memory back to the system between the phases of a run, and while a store is
//! emptied into the smaller records a report keeps.
//!
//! A run over a large store has phases that each hold the whole store and then free it (the
//! `cleanup` plan, then its apply; `inspect`'s cleanup prediction, then its own pass). The
//! allocator keeps what a phase freed, in pieces spread over its heap and its threads' arenas;
//! the next phase's large blocks (a store's table, a report's rows) often fit none of them and
//! take new memory, so that the phases' peaks add up. [`release_freed`] hands every arena's
//! free pages back, so that each phase's peak stands alone. (One arena for the whole process
//! would spare some of it, at the cost of the parallel passes' speed.)

/// Return the free memory of every allocator arena to the system (glibc's `malloc_trim`;
/// nothing elsewhere). Cheap next to a phase that loads a store: one walk over the free lists.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only touches the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
