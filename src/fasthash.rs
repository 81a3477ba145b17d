//! A fast, non-randomised hasher (the Fx hash of rustc) for the large sets of paths and keys
//! maintenance builds: std's SipHash costs more than the rest of a lookup there, and the
//! inputs are the user's own file names and store keys, so flooding resistance buys nothing.

use std::hash::{BuildHasherDefault, Hasher};

/// `BuildHasher` for [`FxHasher`].
pub type FastState = BuildHasherDefault<FxHasher>;
pub type FastSet<T> = std::collections::HashSet<T, FastState>;
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastState>;

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// The Fx hash: one rotate, xor and multiply per 8 bytes.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_find_what_they_hold() {
        let mut s: FastSet<std::path::PathBuf> = FastSet::default();
        for i in 0..1000 {
            s.insert(format!("/d/{i}.jsonl").into());
        }
        assert!(s.contains(std::path::Path::new("/d/999.jsonl")));
        assert!(!s.contains(std::path::Path::new("/d/1000.jsonl")));
        assert_eq!(s.len(), 1000);
    }
}
