//! The core's random source (the backoff jitter, §5.1).
//!
//! ChaCha12, the very generator behind rand 0.8's `StdRng` (same seed, same
//! draws: see the test), held by name so that its position can be compared
//! and hashed: the model checker stores cores in its states and compares
//! them (protocol §9.4), and `StdRng` hides its position.

use rand::RngCore;
use rand_chacha::ChaCha12Rng;
use std::hash::{Hash, Hasher};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CoreRng(ChaCha12Rng);

impl CoreRng {
    pub(super) fn seed_from_u64(seed: u64) -> CoreRng {
        CoreRng(rand::SeedableRng::seed_from_u64(seed))
    }
}

/// Seed, stream and word position are the generator's whole state (what
/// its `PartialEq` compares).
impl Hash for CoreRng {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.get_seed().hash(h);
        self.0.get_stream().hash(h);
        self.0.get_word_pos().hash(h);
    }
}

impl RngCore for CoreRng {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest)
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.0.try_fill_bytes(dest)
    }
}

#[cfg(test)]
mod tests {
    use super::CoreRng;
    use rand::rngs::StdRng;
    use rand::{Rng, RngCore, SeedableRng};

    #[test]
    fn the_core_rng_draws_what_std_rng_drew_from_the_same_seed() {
        for seed in [0, 1, 7, 22, u64::MAX] {
            let mut ours = CoreRng::seed_from_u64(seed);
            let mut std = StdRng::seed_from_u64(seed);
            for _ in 0..1_000 {
                assert_eq!(ours.gen_range(100..=200u64), std.gen_range(100..=200u64));
                assert_eq!(ours.next_u32(), std.next_u32());
            }
        }
    }

    #[test]
    fn two_cores_rngs_are_equal_only_at_the_same_position() {
        let mut a = CoreRng::seed_from_u64(3);
        let b = a.clone();
        assert_eq!(a, b);
        a.next_u64();
        assert_ne!(a, b);
    }
}
