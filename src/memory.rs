//! How the process uses the allocator: large blocks of their own, and freed memory handed back
//! to the system between the phases of a run and while a store is emptied into the smaller
//! records a report keeps.
//!
//! A run over a large store has phases that each hold the whole store and then free it (the
//! `cleanup` plan, then its apply; `inspect`'s cleanup prediction, then its own pass; each step
//! of `maintain`). Two habits of glibc's allocator make the phases' peaks add up:
//!
//! - It maps a large block (a store's table, a report's rows, a line's text) on its own, but
//!   once such a block is freed it raises that threshold to the block's size (up to 32 MB), so
//!   that the next phase's growing tables come from the shared heap: each doubling leaves a
//!   hole behind it that the next, larger one does not fit. [`configure`] fixes the threshold
//!   at 1 MiB, so that every large block is mapped, grows in place and goes back whole when
//!   freed. (On the 200,000-entry store `maintain` peaked at 116 MB with the moving
//!   threshold, 91 MB with the fixed one; single commands 3 MB lower; no change in speed
//!   beyond noise on the benchmark store.)
//! - It keeps what a phase freed, in pieces spread over its heap and its threads' arenas.
//!   [`release_freed`] hands every arena's free pages back, so that each phase's peak stands
//!   alone. (One arena for the whole process would spare some of it, at the cost of the
//!   parallel passes' speed.)

/// Blocks of this size and larger are mapped on their own.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAP_ON_THEIR_OWN: libc::c_int = 1 << 20;

/// Set the allocator up for the run: call once, first thing, before any thread starts.
/// (glibc's `mallopt`; nothing elsewhere.)
pub fn configure() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` sets a parameter of the allocator; called before any other thread
    // exists. It returns 0 on a value it refuses, which leaves the allocator as it was.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MAP_ON_THEIR_OWN);
    }
}

/// Return the free memory of every allocator arena to the system (glibc's `malloc_trim`;
/// nothing elsewhere). Cheap next to a phase that loads a store: one walk over the free lists.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only touches the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use std::hint::black_box;

    use super::*;

    /// Bytes the allocator holds in blocks mapped on their own.
    fn mapped() -> usize {
        // SAFETY: `mallinfo2` only reads the allocator's statistics.
        unsafe { libc::mallinfo2() }.hblkhd
    }

    /// Once a large block has been freed, the next one (smaller than it, larger than the
    /// threshold) is still mapped on its own: glibc's own rule would have raised the threshold
    /// to the freed block's size and taken the next from the heap.
    ///
    /// The allocator is shared by every test of this binary: a test running beside this one
    /// maps and unmaps blocks, and one that ran before [`configure`] may have left a large free
    /// chunk in a heap that serves the block. So the check runs in a child process of its own,
    /// this test binary started again with only this test selected.
    #[test]
    fn a_large_block_is_mapped_on_its_own_even_after_a_larger_one_was_freed() {
        const CHILD: &str = "CLAWKEEPER_MEMORY_TEST_CHILD";
        const NAME: &str =
            "memory::tests::a_large_block_is_mapped_on_its_own_even_after_a_larger_one_was_freed";
        if std::env::var_os(CHILD).is_none() {
            let exe = std::env::current_exe().expect("the test binary's path");
            let out = std::process::Command::new(exe)
                .args([NAME, "--exact", "--test-threads=1", "--nocapture"])
                .env(CHILD, "1")
                .output()
                .expect("the test binary starts again");
            assert!(
                out.status.success(),
                "the check failed in its own process:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            // The child ran the test, not an empty selection.
            assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
            return;
        }
        configure();
        const LARGE: usize = 4 << 20;
        drop(black_box(vec![1u8; 2 * LARGE]));
        let before = mapped();
        let block = black_box(vec![1u8; LARGE]);
        let after = mapped();
        drop(block);
        assert!(
            after >= before + LARGE,
            "a {LARGE}-byte block came from the heap"
        );
    }
}
