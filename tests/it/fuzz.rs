//! Mutation campaigns on stable Rust (no nightly here for cargo-fuzz): seeded random mutations
//! of a valid bundle (compressed stream, tar headers, padding, manifest, signature), of a
//! signed manifest's JSON, and of a spec. Never a panic, never acceptance of different
//! content; a bundle that verifies after a mutation carries exactly the original members.
//!
//! The suite runs 300 bundle mutations with fixed seeds. `scripts/fuzz.sh DURATION` runs the
//! `#[ignore]`d campaigns below for DURATION seconds per target with fresh seeds, under a
//! memory limit, and keeps any input that fails in `target/fuzz-crashes/`.

use std::collections::BTreeMap;
use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::*;
use airlock::bundle::reader::{MemberSink, OnProblem, read_bundle};
use airlock::digest::Sha256;
use airlock::member_path::MemberPath;
use airlock::sign::{Policy, TrustedKey};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

struct Quiet;

impl airlock::progress::Reporter for Quiet {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// What a reader handed over: member path -> sha256 of its bytes.
#[derive(Default)]
struct Recorded(BTreeMap<String, Sha256>);

impl MemberSink for Recorded {
    fn member(&mut self, path: &MemberPath, data: &mut dyn Read) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        data.read_to_end(&mut bytes)?;
        self.0.insert(path.to_string(), Sha256::of_bytes(&bytes));
        Ok(())
    }
}

struct Target {
    _t: tempfile::TempDir,
    bundle: Vec<u8>,
    tar: Vec<u8>,
    policy: Policy,
    members: BTreeMap<String, Sha256>,
    spec: String,
    /// Offsets of every header block in `tar`, with the member's data offset and size.
    headers: Vec<(usize, usize, usize)>,
}

fn target() -> Target {
    let Built { t, keys, bundle, project, .. } = built_project();
    let bundle = std::fs::read(bundle).unwrap();
    let tar = zstd::stream::decode_all(bundle.as_slice()).unwrap();
    let policy = Policy::new(vec![TrustedKey::load(&keys.public).unwrap()], 1, Vec::new()).unwrap();
    let mut recorded = Recorded::default();
    let report = read_bundle(bundle.as_slice(), &policy, &mut recorded, OnProblem::Stop, &Quiet).unwrap();
    assert!(report.verified(), "the unmutated bundle verifies");
    let mut headers = Vec::new();
    let mut at = 0;
    while at + 512 <= tar.len() && tar[at..at + 512].iter().any(|&b| b != 0) {
        let size_field = String::from_utf8_lossy(&tar[at + 124..at + 135]).trim_matches(['\0', ' ']).to_owned();
        let size = usize::from_str_radix(&size_field, 8).unwrap_or(0);
        headers.push((at, at + 512, size));
        at += 512 + size.div_ceil(512) * 512;
    }
    let spec = std::fs::read_to_string(&project.spec).unwrap();
    Target { _t: t, bundle, tar, policy, members: recorded.0, spec, headers }
}

/// One mutation of the bundle, by `seed`: which part it hits and how.
fn mutate(t: &Target, seed: u64) -> (Vec<u8>, String) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut tar = t.tar.clone();
    let recompress = |tar: &[u8]| zstd::stream::encode_all(tar, 1).unwrap();
    let pick_member = |rng: &mut StdRng| t.headers[rng.gen_range(0..t.headers.len())];
    let kind = rng.gen_range(0..9);
    let what = match kind {
        0 => {
            let mut z = t.bundle.clone();
            let i = rng.gen_range(0..z.len());
            z[i] ^= rng.gen_range(1..=255u8);
            return (z, format!("compressed byte {i}"));
        }
        1 => {
            let i = rng.gen_range(0..tar.len());
            tar[i] = rng.r#gen();
            format!("tar byte {i}")
        }
        2 => {
            let (h, _, _) = pick_member(&mut rng);
            let i = h + rng.gen_range(0..512);
            tar[i] = rng.r#gen();
            format!("header byte {i}")
        }
        3 | 4 => {
            // The manifest is member 0, the signature member 1.
            let (_, data, size) = t.headers[kind - 3];
            let i = data + rng.gen_range(0..size.max(1));
            tar[i] = rng.r#gen();
            format!("{} byte {i}", if kind == 3 { "manifest" } else { "signature" })
        }
        5 => {
            let cut = rng.gen_range(0..tar.len());
            tar.truncate(cut);
            format!("cut at {cut}")
        }
        6 => {
            let i = rng.gen_range(0..tar.len());
            let junk: Vec<u8> = (0..rng.gen_range(1..1024)).map(|_| rng.r#gen()).collect();
            tar.splice(i..i, junk);
            format!("bytes inserted at {i}")
        }
        7 => {
            let (h, _, _) = pick_member(&mut rng);
            let digits: String = (0..11).map(|_| char::from(b'0' + rng.gen_range(0..8u8))).collect();
            tar[h + 124..h + 135].copy_from_slice(digits.as_bytes());
            format!("size field of the header at {h}")
        }
        _ => {
            let (h, data, size) = pick_member(&mut rng);
            let pad = data + size;
            let end = data + size.div_ceil(512) * 512;
            if pad < end {
                tar[rng.gen_range(pad..end)] = rng.gen_range(1..=255u8);
                format!("padding after the member at {h}")
            } else {
                let block = tar[h..h + 512].to_vec();
                tar.splice(h..h, block);
                format!("header at {h} repeated")
            }
        }
    };
    (recompress(&tar), what)
}

/// Read `bytes`; `Err` says what went wrong (a panic, or different content accepted).
fn check_bundle(t: &Target, bytes: &[u8]) -> Result<bool, String> {
    let mut recorded = Recorded::default();
    let run = catch_unwind(AssertUnwindSafe(|| read_bundle(bytes, &t.policy, &mut recorded, OnProblem::Stop, &Quiet)));
    let report = match run {
        Err(panic) => return Err(format!("panicked: {:?}", panic.downcast_ref::<String>())),
        Ok(Err(e)) => return Err(format!("sink error: {e}")),
        Ok(Ok(report)) => report,
    };
    if report.verified() && recorded.0 != t.members {
        return Err(format!("accepted different content: {:?}", recorded.0));
    }
    Ok(report.verified())
}

fn keep_crash(target: &str, seed: u64, input: &[u8]) -> PathBuf {
    let dir = repo("target/fuzz-crashes");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{target}-{seed}.bin"));
    std::fs::write(&path, input).unwrap();
    path
}

#[test]
fn three_hundred_mutated_bundles_are_refused_or_carry_exactly_the_original_members() {
    let t = target();
    let mut accepted = 0;
    let mut failures = Vec::new();
    for seed in 0..300 {
        let (bytes, what) = mutate(&t, seed);
        match check_bundle(&t, &bytes) {
            Ok(true) => accepted += 1,
            Ok(false) => {}
            Err(e) => failures
                .push(format!("seed {seed} ({what}): {e}; kept at {}", keep_crash("reader", seed, &bytes).display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Padding and a few header fields (mode, mtime) do not change content; most mutations must
    // be refused.
    assert!(accepted < 100, "{accepted} of 300 mutations were accepted");
}

/// Run `one(seed)` with fresh seeds until `AIRLOCK_FUZZ_SECS` (default 10) pass.
fn campaign(name: &str, mut one: impl FnMut(u64) -> Result<(), (String, Vec<u8>)>) {
    let secs: u64 = std::env::var("AIRLOCK_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let start = Instant::now();
    let base: u64 = std::env::var("AIRLOCK_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_secs())
    });
    let (mut runs, mut failures) = (0u64, Vec::new());
    while start.elapsed() < Duration::from_secs(secs) {
        let seed = base.wrapping_mul(1_000_003).wrapping_add(runs);
        if let Err((why, input)) = one(seed) {
            failures.push(format!("seed {seed}: {why}; kept at {}", keep_crash(name, seed, &input).display()));
        }
        runs += 1;
    }
    println!("fuzz {name}: {runs} inputs in {:.0?}, {} failures (base seed {base})", start.elapsed(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "a campaign: scripts/fuzz.sh"]
fn fuzz_bundle_reader() {
    let t = target();
    campaign("reader", |seed| {
        let (bytes, what) = mutate(&t, seed);
        check_bundle(&t, &bytes).map(drop).map_err(|e| (format!("{what}: {e}"), bytes))
    });
}

/// Flip, insert or remove a few random bytes of `input`.
fn scramble(input: &[u8], seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = input.to_vec();
    for _ in 0..rng.gen_range(1..8) {
        let i = rng.gen_range(0..out.len().max(1));
        match rng.gen_range(0..3) {
            0 if !out.is_empty() => out[i] = rng.r#gen(),
            1 => out.insert(i.min(out.len()), rng.r#gen()),
            _ if !out.is_empty() => {
                out.remove(i.min(out.len() - 1));
            }
            _ => {}
        }
    }
    out
}

#[test]
#[ignore = "a campaign: scripts/fuzz.sh"]
fn fuzz_manifest_parser() {
    let t = target();
    let (_, data, size) = t.headers[0];
    let manifest = t.tar[data..data + size].to_vec();
    campaign("manifest", |seed| {
        let input = scramble(&manifest, seed);
        let parsed = catch_unwind(|| {
            serde_json::from_slice::<airlock::bundle::Manifest>(&input).map(|m| (m.check(), m.content_bytes()))
        });
        parsed.map(drop).map_err(|_| ("panicked".to_owned(), input))
    });
}

#[test]
#[ignore = "a campaign: scripts/fuzz.sh"]
fn fuzz_spec_parser() {
    let t = target();
    // The project's spec and the DESIGN example's kinds, so every table is reached.
    let extra = "\n[[wheel]]\nindex = \"http://127.0.0.1:1/simple\"\nlockfile = \"pylock.toml\"\npython = [\"3.11\", \"3.12\"]\n\
                 \n[[deb]]\nrepo = \"http://127.0.0.1:1/debian\"\nsuite = \"stable\"\ncomponents = [\"main\"]\narch = \"amd64\"\npackages = [\"hello=2.10-3\", \"jq\"]\nresolve = true\n\
                 \n[[image]]\nref = \"127.0.0.1:5000/rocm/vllm:1\"\nplatforms = [\"linux/amd64\"]\n\
                 \n[[model]]\nhub = \"http://127.0.0.1:1\"\nrepo = \"org/m\"\nrevision = \"main\"\nfiles = [\"*.json\"]\n";
    let spec = format!("{}{extra}", t.spec);
    let path = Path::new("fuzz/airlock.toml");
    campaign("spec", |seed| {
        let input = scramble(spec.as_bytes(), seed);
        let text = String::from_utf8_lossy(&input).into_owned();
        catch_unwind(|| airlock::spec::SpecFile::parse(path, text).map(drop))
            .map(drop)
            .map_err(|_| ("panicked".to_owned(), input))
    });
}
