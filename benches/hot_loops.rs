//! The hot loops of build and verify, per MiB, so that a regression shows in review:
//! `cargo bench --bench hot_loops`. Whole-command figures against the tools a user would
//! otherwise script are `scripts/bench.sh`'s job; these isolate the pieces.

use std::io::{self, Read, Write};

use airlock::bundle::writer::{BundleWriter, Compression};
use airlock::digest::HashingReader;
use airlock::member_path::MemberPath;
use divan::counter::BytesCount;
use divan::{Bencher, black_box};

const LEN: usize = 16 << 20;

fn main() {
    divan::main();
}

/// Incompressible bytes, like weights and gzipped layers.
fn random() -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    (0..LEN)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[4]
        })
        .collect()
}

/// Lines of numbers and Zipf-ish words, which zstd -3 shrinks about three times, like the
/// text of `scripts/bench-content.py`.
fn text() -> Vec<u8> {
    let syllables = ["ka", "to", "ri", "en", "mo", "sa", "lu", "ve", "ni", "ar", "ost", "ph", "qu", "el"];
    let mut state = 7u64;
    let mut next = |n: u64| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % n
    };
    let mut out = Vec::with_capacity(LEN + 128);
    let mut line = 0u64;
    while out.len() < LEN {
        line += 1;
        write!(out, "{line:08} {} ", next(100_000)).expect("writes to a Vec");
        for _ in 0..4 + next(12) {
            // Zipf-ish: small word numbers are far more likely.
            let bound = 1 + next(3000);
            let word = next(bound);
            for syllable in [word % 14, (word / 14) % 14] {
                out.extend_from_slice(syllables[usize::try_from(syllable).expect("below 14")].as_bytes());
            }
            out.push(b' ');
        }
        out.push(b'\n');
    }
    out.truncate(LEN);
    out
}

fn content(kind: &str) -> Vec<u8> {
    if kind == "text" { text() } else { random() }
}

#[divan::bench]
fn sha256(bencher: Bencher) {
    let data = random();
    bencher.counter(BytesCount::new(LEN)).bench(|| {
        let mut hashing = HashingReader::new(data.as_slice());
        io::copy(&mut hashing, &mut io::sink()).expect("reads from memory");
        black_box(hashing.finish())
    });
}

/// zstd level 3 on one thread: the compressor's own speed.
#[divan::bench(args = ["random", "text"])]
fn zstd_level3(bencher: Bencher, kind: &str) {
    let data = content(kind);
    bencher.counter(BytesCount::new(LEN)).bench(|| black_box(zstd::bulk::compress(&data, 3).expect("compresses")));
}

/// One member through the bundle writer: tar header, copy, zstd with its workers.
#[divan::bench(args = ["random", "text"])]
fn bundle_writer(bencher: Bencher, kind: &str) {
    let data = content(kind);
    let path = MemberPath::new("files/member.bin").expect("a valid path");
    bencher.counter(BytesCount::new(LEN)).bench(|| {
        let mut writer = BundleWriter::new(io::sink(), 0, Compression::default()).expect("a writer");
        writer.append(&path, LEN as u64, data.as_slice()).expect("appends");
        black_box(writer.finish().expect("finishes"))
    });
}

/// Decompressing and hashing what the writer made: the reader's inner loop.
#[divan::bench(args = ["random", "text"])]
fn decompress_and_hash(bencher: Bencher, kind: &str) {
    let data = content(kind);
    let path = MemberPath::new("files/member.bin").expect("a valid path");
    let mut writer = BundleWriter::new(Vec::new(), 0, Compression::default()).expect("a writer");
    writer.append(&path, LEN as u64, data.as_slice()).expect("appends");
    let bundle = writer.finish().expect("finishes");
    bencher.counter(BytesCount::new(LEN)).bench(|| {
        let mut hashing = HashingReader::new(zstd::stream::read::Decoder::new(bundle.as_slice()).expect("a decoder"));
        let mut buf = vec![0u8; 1 << 20];
        while hashing.read(&mut buf).expect("decompresses") > 0 {}
        black_box(hashing.finish())
    });
}
