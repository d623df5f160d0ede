//! Progress reporting. The library calls a `Reporter`; only the CLI draws bars (indicatif, on
//! a terminal). Library code never prints.

/// Receives progress from long operations. Implementations must be cheap: `advance` is called
/// for every buffer that streams past.
pub trait Reporter {
    /// A phase begins; `total_bytes` is what it will stream.
    fn start(&self, phase: &str, total_bytes: u64);
    fn advance(&self, bytes: u64);
    fn finish(&self);
}

/// Reports nothing (tests, `--json`, non-terminal output).
pub struct Silent;

impl Reporter for Silent {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}
