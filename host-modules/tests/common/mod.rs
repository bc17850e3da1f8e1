//! What the interop tests share: a panic that says what was missing, and a small deterministic
//! generator for their seeded random cases. Each test binary uses part of it.
#![allow(dead_code)]

/// The value a test needs from a result or an option, or a panic saying what was there.
pub trait Must<T> {
    fn must(self, what: &str) -> T;
}

impl<T, E: std::fmt::Debug> Must<T> for Result<T, E> {
    fn must(self, what: &str) -> T {
        self.unwrap_or_else(|e| panic!("{what}: {e:?}"))
    }
}

impl<T> Must<T> for Option<T> {
    fn must(self, what: &str) -> T {
        self.unwrap_or_else(|| panic!("{what}: nothing"))
    }
}

/// A small deterministic generator (xorshift64*), so a seed names the same cases every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}
