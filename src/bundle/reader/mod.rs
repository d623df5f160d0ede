//! The streaming bundle reader: verifies while it reads, in one pass, trusting nothing before
//! the signature has been checked.
//!
//! Order of trust: member 1 must be `airlock/manifest.json` and member 2 its signature, both
//! size-bounded; the manifest's exact bytes go to an unnamed spool file (`MemberSink::spool`)
//! and are hashed on the way; the signature is checked against the trusted keys over that
//! digest; only then is the manifest parsed, from the spool, and its entries used as the plan
//! for the rest.
//! Every later member is rejected unless it is a regular file at a safe path, listed once,
//! with the listed size and sha256. Decompressed output is capped at what the manifest
//! declares (a small zstd stream can expand to anything), and the stream must end cleanly.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, Write};

use super::format::MAX_WINDOW_LOG;
use super::frames::FrameReader;
use super::manifest::{
    ByPath, Entry, MANIFEST, MAX_MANIFEST_BYTES, MAX_SIGNATURE_BYTES, Manifest, PROVENANCE, SIGNATURE, VerifiedManifest,
};
use super::provenance;
pub use super::rejection::{Problem, Rejection};
use super::spans;
use crate::digest::{HashingReader, Sha256};
use crate::member_path::MemberPath;
use crate::overlap::ReadAhead;
use crate::progress::{Reporter, Tracked};
use crate::sign::policy::{Outcome, Source};
use crate::sign::{KeyId, Policy};

use budget::{Bounded, Budget};
use head::{HEAD_BUDGET, ListEntries};
use sinks::{Capture, filtered_platforms};

mod budget;
mod head;
mod sinks;

pub use head::{Head, leading_members, leading_trust, read_head, read_outline};
pub use sinks::{Discard, OnProblem, Report, SinkError, UpstreamCheck};

/// Where accepted members go while they are read. The bytes are not verified yet when they
/// arrive: a sink must keep them invisible until the whole report is clean.
pub trait MemberSink {
    fn member(&mut self, path: &MemberPath, data: &mut dyn Read) -> io::Result<()>;

    /// An unnamed file for the manifest's bytes while its signature is checked and it is
    /// parsed (they are not held in memory: 100,000 entries make a 26 MB manifest). Nothing
    /// names it, so nothing else can open it; it goes when it is closed.
    fn spool(&mut self) -> io::Result<File> {
        // Where `TMPDIR` cannot be written (a read-only audit box), in memory as before.
        tempfile::tempfile().or_else(|_| {
            let fd = rustix::fs::memfd_create("airlock-manifest", rustix::fs::MemfdFlags::CLOEXEC)?;
            Ok(File::from(fd))
        })
    }
}

/// Read and verify a whole bundle, handing accepted members to `sink`.
pub fn read_bundle(
    input: impl Read + Send,
    trust: &Policy,
    sink: &mut dyn MemberSink,
    on_problem: OnProblem,
    reporter: &dyn Reporter,
) -> Result<Report, SinkError> {
    let mut reader = Reader { report: Report::default(), on_problem };
    // Decompression runs on a thread of its own, overlapping hashing and the sink's writes.
    let outcome = std::thread::scope(|scope| reader.run(scope, input, trust, sink, reporter));
    reader.report_of(outcome)
}

/// Read and verify a bundle file, keeping nothing (`verify`): as [`read_bundle`] with
/// [`Discard`], but the members stored as they are (raw zstd blocks) are hashed from the file
/// on a thread of their own while the stream goes on (`spans`). `len`: the file's size.
pub fn verify_file(
    file: File,
    len: u64,
    trust: &Policy,
    on_problem: OnProblem,
    reporter: &dyn Reporter,
) -> Result<Report, SinkError> {
    let mut reader = Reader { report: Report::default(), on_problem };
    let file = std::sync::Arc::new(file);
    let outcome = std::thread::scope(|scope| reader.run_file(scope, file, len, trust, reporter));
    reader.report_of(outcome)
}

enum Halt {
    /// A problem was recorded and reading cannot, or must not, go on.
    Stopped,
    Sink(SinkError),
}

/// The manifest's bytes in the sink's spool, with their digest, taken as they were written.
struct Spooled {
    file: File,
    sha256: Sha256,
    size: u64,
}

impl Spooled {
    /// The bytes from the start (no more than were hashed).
    fn rewind(&mut self) -> io::Result<BufReader<io::Take<&mut File>>> {
        self.file.rewind()?;
        Ok(BufReader::with_capacity(256 << 10, (&mut self.file).take(self.size)))
    }
}

struct Reader {
    report: Report,
    on_problem: OnProblem,
}

/// Members taken from the stream as spans of the bundle file, and their digests, most of
/// them found ahead of the stream.
struct Deferred {
    deferral: spans::Deferral,
    scanner: spans::Scanner,
}

impl Reader {
    /// The report of a reading that ended with `outcome`: a problem stopped it or none did;
    /// the sink's failure is not the bundle's.
    fn report_of(self, outcome: Result<(), Halt>) -> Result<Report, SinkError> {
        match outcome {
            Ok(()) | Err(Halt::Stopped) => Ok(self.report),
            Err(Halt::Sink(e)) => Err(e),
        }
    }

    /// Record a problem; `Err` when reading must stop here.
    fn problem(&mut self, member: Option<String>, reason: Rejection) -> Result<(), Halt> {
        self.report.problems.push(Problem { member, reason });
        match self.on_problem {
            OnProblem::Stop => Err(Halt::Stopped),
            OnProblem::Continue => Ok(()),
        }
    }

    fn fatal(&mut self, member: Option<String>, reason: Rejection) -> Halt {
        self.report.problems.push(Problem { member, reason });
        Halt::Stopped
    }

    /// The zstd stream over `input`, with the largest window a bundle may ask for; raw frames
    /// read by hand (`frames::FrameReader`).
    fn decoder<R: Read>(&mut self, input: R) -> Result<FrameReader<R>, Halt> {
        FrameReader::new(input, MAX_WINDOW_LOG).map_err(|e| self.fatal(None, Rejection::NotABundle(stream_words(&e))))
    }

    /// Members 1 and 2 (the manifest, spooled, and the signature's bytes), bounded, before any trust.
    fn head<R: Read>(
        &mut self,
        members: &mut tar::Entries<'_, R>,
        budget: &Budget,
        sink: &mut dyn MemberSink,
    ) -> Result<(Spooled, Vec<u8>), Halt> {
        let entry = self.manifest_member(members, budget)?;
        let manifest = self.spool_manifest(entry, budget, sink)?;
        let signature = match members.next() {
            None => {
                return Err(self.fatal(None, Rejection::SignatureNotSecond { found: "end of archive".into() }));
            }
            Some(Err(e)) => return Err(self.fatal(None, budget.explain(&e, Rejection::Truncated))),
            Some(Ok(entry)) => self.small_member(entry, SIGNATURE, MAX_SIGNATURE_BYTES, budget, |found| {
                Rejection::SignatureNotSecond { found }
            })?,
        };
        Ok((manifest, signature))
    }

    fn run<'scope>(
        &mut self,
        scope: &'scope std::thread::Scope<'scope, '_>,
        input: impl Read + Send + 'scope,
        trust: &Policy,
        sink: &mut dyn MemberSink,
        reporter: &dyn Reporter,
    ) -> Result<(), Halt> {
        let decoder = self.decoder(input)?;
        self.read_archive(ReadAhead::spawn(scope, decoder), tar::Archive::entries, trust, sink, reporter, None)
    }

    /// `run` over a bundle file whose raw blocks are read as spans of it (`spans`).
    fn run_file<'scope>(
        &mut self,
        scope: &'scope std::thread::Scope<'scope, '_>,
        file: std::sync::Arc<File>,
        len: u64,
        trust: &Policy,
        reporter: &dyn Reporter,
    ) -> Result<(), Halt> {
        let frames = FrameReader::spans(spans::Positional::new(file.clone(), len), MAX_WINDOW_LOG)
            .map_err(|e| self.fatal(None, Rejection::NotABundle(stream_words(&e))))?;
        let (stream, deferral) = spans::spawn(scope, frames, file.clone());
        let deferred = Deferred { deferral, scanner: spans::Scanner::spawn(scope, file, len) };
        self.read_archive(stream, tar::Archive::entries_with_seek, trust, &mut Discard, reporter, Some(deferred))
    }

    /// The tar archive in `stream`, its members listed by `entries` (in order, or skipping
    /// what can be sought past), then the stream to its end.
    fn read_archive<S: Read>(
        &mut self,
        stream: S,
        entries: ListEntries<S>,
        trust: &Policy,
        sink: &mut dyn MemberSink,
        reporter: &dyn Reporter,
        deferred: Option<Deferred>,
    ) -> Result<(), Halt> {
        let budget = Budget::new(HEAD_BUDGET);
        let mut archive = tar::Archive::new(Bounded::new(stream, &budget));
        let members = entries(&mut archive).map_err(|e| self.fatal(None, Rejection::NotABundle(stream_words(&e))))?;
        let checked = self.members(members, &budget, trust, sink, reporter, deferred)?;
        self.end_of_stream(archive.into_inner(), &budget)?;
        self.checked(checked);
        Ok(())
    }

    /// The stream read to its end: what the report keeps of the manifest.
    fn checked(&mut self, manifest: VerifiedManifest) {
        self.report.manifest_sha256 = Some(manifest.sha256());
        self.report.manifest = Some(manifest);
    }

    /// The members, from the manifest on: the head, the signature check, then each member
    /// against the manifest. The manifest and its digest, when every member was read.
    fn members<R: Read>(
        &mut self,
        mut members: tar::Entries<'_, R>,
        budget: &Budget,
        trust: &Policy,
        sink: &mut dyn MemberSink,
        reporter: &dyn Reporter,
        mut deferred: Option<Deferred>,
    ) -> Result<VerifiedManifest, Halt> {
        let (mut spooled, signature) = self.head(&mut members, budget, sink)?;
        let manifest_sha256 = spooled.sha256;

        let checked = trust.check(&manifest_sha256, &signature);
        self.report.signers = checked.signers;
        self.report.signatures = checked.signatures;
        if self.report.signers.is_empty() {
            let detail = checked.embedded_error.map(|e| format!("; {e}")).unwrap_or_default();
            let claimed = spooled.rewind().ok().and_then(super::manifest::claimed_builder);
            let reason = Rejection::Untrusted { tried: trust.key_ids(), claimed, detail };
            return Err(self.fatal(Some(SIGNATURE.into()), reason));
        }
        if let Some(short) = trust.shortfall(&self.report.signers) {
            let reason = Rejection::Threshold {
                role: short.role,
                need: short.need,
                signers: short.have,
                cosignatures: trust.cosignatures.len(),
            };
            return Err(self.fatal(None, reason));
        }

        tracing::info!(
            "signature: manifest signed by {} distinct trusted key(s); required: {}",
            self.report.signers.len(),
            trust.describe()
        );
        // Trusted bytes from here on; still check what the manifest says. Memory here grows
        // with the member count: the entries are held once, parsed; the bytes stay on disk.
        let manifest_path = || MemberPath::new(MANIFEST).expect("reserved member names are valid paths");
        let read_error = |source| Halt::Sink(SinkError { path: manifest_path(), source });
        let mut manifest: Manifest = serde_json::from_reader(spooled.rewind().map_err(read_error)?)
            .map_err(|e| self.fatal(Some(MANIFEST.into()), Rejection::ManifestInvalid(e.to_string())))?;
        // The leading members are verified now: stage them like any other.
        let path = manifest_path();
        let mut bytes = spooled.rewind().map_err(read_error)?;
        sink.member(&path, &mut bytes).map_err(|source| Halt::Sink(SinkError { path, source }))?;
        drop(spooled);
        let path = MemberPath::new(SIGNATURE).expect("reserved member names are valid paths");
        sink.member(&path, &mut signature.as_slice()).map_err(|source| Halt::Sink(SinkError { path, source }))?;
        manifest.shrink_to_fit();
        let manifest = VerifiedManifest::establish(manifest, manifest_sha256, trust, &self.report.signers)
            .map_err(|e| self.fatal(Some(MANIFEST.into()), Rejection::ManifestRefused(e)))?;
        // A delta's `from_base` entries are not in the stream: no budget, no progress for them.
        budget.allow_more(declared_stream_bytes(manifest.carried()));
        reporter.start("verifying", manifest.carried_bytes());
        let mut listing = Listing::of(&manifest.entries).map_err(|p| {
            self.fatal(Some(MANIFEST.into()), Rejection::ManifestInvalid(format!("entry `{p}` is listed twice")))
        })?;
        let mut sink = Capture::new(sink, &manifest);

        for item in members.by_ref() {
            let entry = item.map_err(|e| self.fatal(None, budget.explain(&e, Rejection::Truncated)))?;
            if entry.path_bytes().as_ref() == PROVENANCE.as_bytes() && self.report.provenance.is_none() {
                self.provenance_member(entry, trust, manifest_sha256, &manifest.builder.key_id, budget, &mut sink)?;
                continue;
            }
            self.content_member(entry, &mut listing, budget, &mut sink, reporter, deferred.as_mut())?;
        }
        if let Some(deferred) = deferred {
            self.hashed(deferred.scanner.finish(reporter))?;
        }
        reporter.finish();
        tracing::info!("members: {} of {} entries verified", self.report.entries_verified, manifest.carried().count());
        let missing: Vec<String> = listing.unseen().map(|e| e.path.to_string()).collect();
        for path in missing {
            self.problem(Some(path), Rejection::Missing)?;
        }
        // Not listed (it signs the manifest, not the other way round), so its absence would go
        // unnoticed by the entry checks: format v1 requires it.
        if self.report.provenance.is_none() {
            self.problem(Some(PROVENANCE.into()), Rejection::Missing)?;
        }
        // Upstream signatures are checked over bytes that verified, or not at all.
        if self.report.problems.is_empty() {
            self.upstream(&manifest, &sink.got, &trust.sigstore_root)?;
        }
        Ok(manifest)
    }

    /// Every upstream signature the manifest records, verified again over the captured
    /// members under `root`: what lets a site prove, offline and years later, who signed.
    fn upstream(
        &mut self,
        manifest: &VerifiedManifest,
        got: &BTreeMap<Sha256, Vec<u8>>,
        root: &crate::sign::sigstore::Root,
    ) -> Result<(), Halt> {
        use crate::bundle::manifest::Artifact;
        for a in &manifest.artifacts {
            let (name, subject, signature) = match a {
                Artifact::Image(i) => (i.reference.clone(), i.upstream_digest.map_or(i.digest, |d| d.0), &i.signature),
                Artifact::File(f) => (f.name.as_str().to_owned(), f.sha256, &f.signature),
                Artifact::Wheel(w) => (w.filename.clone(), w.sha256, &w.signature),
                _ => continue,
            };
            let Some(signature) = signature else { continue };
            let bytes = |d: Sha256| got.get(&d).cloned();
            if let Artifact::Image(i) = a
                && let Err(detail) = filtered_platforms(i, &bytes)
            {
                let member = i.filtered_indexes().first().map(|(p, _)| p.to_string());
                self.problem(member, Rejection::UpstreamSignature { artifact: name.clone(), detail })?;
                continue;
            }
            match crate::sign::sigstore::upstream::recheck(signature, subject, &name, &bytes, root) {
                Ok(v) => {
                    tracing::info!(
                        "upstream signature of `{name}`: {} under {}",
                        signature.describe(),
                        root.describe()
                    );
                    self.report.upstream.push(UpstreamCheck {
                        artifact: name.clone(),
                        identity: v.identity.unwrap_or_default(),
                        issuer: v.issuer.unwrap_or_default(),
                        logged_at: v.logged_at,
                        root: root.describe(),
                    });
                }
                Err(e) => {
                    let member = signature.members().first().map(|(p, _)| p.to_string());
                    self.problem(
                        member,
                        Rejection::UpstreamSignature { artifact: name.clone(), detail: e.to_string() },
                    )?;
                }
            }
        }
        Ok(())
    }

    /// The members hashed from the file (`spans`), checked against the manifest.
    fn hashed(&mut self, (hashed, ahead, here): (Vec<spans::Hashed>, usize, usize)) -> Result<(), Halt> {
        tracing::info!(
            "stored members: {} hashed from the bundle file beside the stream ({ahead} ahead of it, {here} as reached)",
            hashed.len()
        );
        for done in hashed {
            match done.actual {
                Ok(actual) if actual == done.expected => self.report.entries_verified += 1,
                Ok(actual) => {
                    self.problem(Some(done.name), Rejection::DigestMismatch { expected: done.expected, actual })?;
                }
                Err(e) => return Err(self.fatal(Some(done.name), Rejection::Truncated(stream_words(&e)))),
            }
        }
        Ok(())
    }

    /// The rest of the stream after the archive's last member: the end of the archive (zeros:
    /// tar stopped at the first of its two zero blocks) and a complete zstd frame (the last,
    /// compressed, whose checksum holds). Reading to the end is what proves the stream was not
    /// cut; a cut where a raw frame ends (`frames`) leaves no zero block to read.
    fn end_of_stream(&mut self, mut rest: impl Read, budget: &Budget) -> Result<(), Halt> {
        let mut buf = vec![0u8; 64 << 10];
        let mut zeros = 0usize;
        loop {
            match rest.read(&mut buf) {
                Ok(0) => break,
                Ok(n) if buf[..n].iter().all(|b| *b == 0) => zeros += n,
                Ok(_) => return Err(self.fatal(None, Rejection::TrailingData)),
                Err(e) => return Err(self.fatal(None, budget.explain(&e, Rejection::Truncated))),
            }
        }
        if zeros < 512 {
            let cut = "the archive ends without its two zero blocks".to_owned();
            return Err(self.fatal(None, Rejection::Truncated(cut)));
        }
        Ok(())
    }

    /// The DSSE provenance: verified with the trusted keys against this manifest's digest.
    #[allow(clippy::too_many_arguments, reason = "the reader's state for one member, passed once from `run`")]
    fn provenance_member<R: Read>(
        &mut self,
        mut entry: tar::Entry<'_, R>,
        trust: &Policy,
        manifest_sha256: Sha256,
        build_key: &KeyId,
        budget: &Budget,
        sink: &mut dyn MemberSink,
    ) -> Result<(), Halt> {
        let name = Some(PROVENANCE.to_owned());
        // Present, not (yet) verified: an empty signer list.
        self.report.provenance = Some(Vec::new());
        if let Some(kind) = forbidden_type(entry.header().entry_type()) {
            return self.problem(name, Rejection::EntryType(kind));
        }
        if entry.size() > provenance::MAX_BYTES {
            return self.problem(name, Rejection::TooLargeBeforeTrust { limit: provenance::MAX_BYTES });
        }
        // Not listed (it names the manifest as its subject): allow for exactly its bytes.
        budget.extend(entry.size().div_ceil(512).saturating_mul(512).saturating_add(1024));
        let mut bytes = Vec::new();
        (&mut entry)
            .take(provenance::MAX_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| self.fatal(name.clone(), budget.explain(&e, Rejection::Truncated)))?;
        match provenance::verify(&bytes, &trust.keys, manifest_sha256) {
            Ok(v) => {
                tracing::info!("provenance: signed by {} trusted key(s), names this manifest", v.signers.len());
                self.report.provenance = Some(v.signers);
            }
            Err(e) => {
                let reason = self.provenance_rejection(&e, build_key);
                return self.problem(name, reason);
            }
        }
        let path = MemberPath::new(PROVENANCE).expect("reserved member names are valid paths");
        sink.member(&path, &mut bytes.as_slice()).map_err(|source| Halt::Sink(SinkError { path, source }))
    }

    /// Why a provenance that did not verify was refused: when the embedded signature did not
    /// count and the manifest is trusted through co-signatures alone, the likely cause is that
    /// the build key (which signs the provenance) is simply not trusted; say so.
    fn provenance_rejection(&self, e: &provenance::ProvenanceError, build_key: &KeyId) -> Rejection {
        let embedded_valid =
            self.report.signatures.iter().any(|s| s.source == Source::Embedded && s.outcome == Outcome::Valid);
        let untrusted = matches!(e, provenance::ProvenanceError::Untrusted);
        if !embedded_valid && !self.report.signers.contains(build_key) && untrusted {
            return Rejection::ProvenanceBuildKeyUntrusted {
                build_key: build_key.clone(),
                cosigners: self.report.signers.clone(),
            };
        }
        Rejection::Provenance(e.to_string())
    }

    /// One member after the head: checked against the manifest, streamed to the sink while
    /// hashed, and accepted only if its size and digest match.
    fn content_member<R: Read>(
        &mut self,
        mut entry: tar::Entry<'_, R>,
        listing: &mut Listing<'_>,
        budget: &Budget,
        sink: &mut Capture<'_>,
        reporter: &dyn Reporter,
        deferred: Option<&mut Deferred>,
    ) -> Result<(), Halt> {
        let raw = entry.path_bytes().into_owned();
        let name = crate::escape::bytes(&raw);
        let path = match MemberPath::from_bytes(&raw) {
            Ok(p) => p,
            Err(e) => return self.problem(Some(name), Rejection::UnsafePath(e.reason)),
        };
        if let Some(kind) = forbidden_type(entry.header().entry_type()) {
            return self.problem(Some(name), Rejection::EntryType(kind));
        }
        if [MANIFEST, SIGNATURE, PROVENANCE].contains(&path.as_str()) {
            return self.problem(Some(name), Rejection::Duplicate);
        }
        let expected = match listing.meet(&path) {
            Met::First(entry) => entry,
            Met::Again => return self.problem(Some(name), Rejection::Duplicate),
            Met::Unlisted => return self.problem(Some(name), Rejection::Unlisted),
        };
        if expected.from_base {
            return self.problem(Some(name), Rejection::FromBase);
        }
        let actual_size = entry.size();
        if actual_size != expected.size {
            return self.problem(Some(name), Rejection::SizeMismatch { expected: expected.size, actual: actual_size });
        }
        // Stored as it is, in a file: hashed from there on a thread of its own; the `tar`
        // crate skips its bytes. Not a member whose bytes are wanted here (a signature).
        if let Some(deferred) = deferred.filter(|_| !sink.wants(&path)) {
            match deferred.deferral.take(actual_size) {
                Ok(Some(spans)) => {
                    deferred.scanner.push(spans::Job { name, expected: expected.sha256, spans }, reporter);
                    return Ok(());
                }
                Ok(None) => {}
                Err(e) => return Err(self.fatal(Some(name), budget.explain(&e, Rejection::Truncated))),
            }
        }
        // Hashed on the way to the sink; a read error is the bundle's fault, a write error the site's.
        let mut tap = Tracked::new(HashingReader::new(&mut entry), reporter);
        let stored = sink.member(&path, &mut tap).and_then(|()| io::copy(&mut tap, &mut io::sink()).map(drop));
        if let Err(e) = stored {
            return Err(match tap.take_read_error() {
                Some(read) => self.fatal(Some(name), budget.explain(&read, Rejection::Truncated)),
                None => Halt::Sink(SinkError { path, source: e }),
            });
        }
        let (actual, count) = tap.into_inner().finish();
        if count != expected.size {
            let reason = Rejection::Truncated(format!("{count} of {} bytes", expected.size));
            return Err(self.fatal(Some(name), budget.tripped().unwrap_or(reason)));
        }
        if actual != expected.sha256 {
            return self.problem(Some(name), Rejection::DigestMismatch { expected: expected.sha256, actual });
        }
        self.report.entries_verified += 1;
        Ok(())
    }

    /// Member 1, the manifest (`manifest_member`): copied into the sink's spool while it is
    /// hashed, and bounded.
    fn spool_manifest<R: Read>(
        &mut self,
        mut entry: tar::Entry<'_, R>,
        budget: &Budget,
        sink: &mut dyn MemberSink,
    ) -> Result<Spooled, Halt> {
        let name = MANIFEST.to_owned();
        let size = entry.size();
        let path = || MemberPath::new(MANIFEST).expect("reserved member names are valid paths");
        let store_error = |source| Halt::Sink(SinkError { path: path(), source });
        let mut out = io::BufWriter::with_capacity(256 << 10, sink.spool().map_err(store_error)?);
        let mut tap = HashingReader::new((&mut entry).take(MAX_MANIFEST_BYTES));
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match tap.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.fatal(Some(name), budget.explain(&e, Rejection::Truncated))),
            };
            out.write_all(&buf[..n]).map_err(store_error)?;
        }
        let (sha256, count) = tap.finish();
        if count != size {
            return Err(self.fatal(Some(name), Rejection::Truncated(format!("{count} of {size} bytes"))));
        }
        let file = out.into_inner().map_err(|e| store_error(e.into_error()))?;
        Ok(Spooled { file, sha256, size })
    }

    /// A leading member checked before any of it is read: its fixed name (else `misplaced`),
    /// a regular file, at most `limit` bytes. Its name, printable.
    fn leading<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
        want: &str,
        limit: u64,
        misplaced: impl Fn(String) -> Rejection,
    ) -> Result<String, Halt> {
        let name = crate::escape::bytes(&entry.path_bytes());
        if name != want {
            return Err(self.fatal(Some(name.clone()), misplaced(name)));
        }
        if let Some(kind) = forbidden_type(entry.header().entry_type()) {
            return Err(self.fatal(Some(name), Rejection::EntryType(kind)));
        }
        if entry.size() > limit {
            return Err(self.fatal(Some(name), Rejection::TooLargeBeforeTrust { limit }));
        }
        Ok(name)
    }

    /// Member 1, which must be the manifest (checked by `leading`, not yet read).
    fn manifest_member<'a, R: Read>(
        &mut self,
        members: &mut tar::Entries<'a, R>,
        budget: &Budget,
    ) -> Result<tar::Entry<'a, R>, Halt> {
        match members.next() {
            None => Err(self.fatal(None, Rejection::NotABundle("no members".into()))),
            Some(Err(e)) => Err(self.fatal(None, budget.explain(&e, Rejection::NotABundle))),
            Some(Ok(entry)) => {
                self.leading(&entry, MANIFEST, MAX_MANIFEST_BYTES, |found| Rejection::ManifestNotFirst { found })?;
                Ok(entry)
            }
        }
    }

    /// The last problem recorded, for the head readers that stop at the first.
    fn last_problem(&mut self) -> Problem {
        self.report
            .problems
            .pop()
            .unwrap_or(Problem { member: None, reason: Rejection::NotABundle("unreadable".into()) })
    }

    /// Read a small leading member whose name is fixed, refusing anything else.
    fn small_member<R: Read>(
        &mut self,
        mut entry: tar::Entry<'_, R>,
        want: &str,
        limit: u64,
        budget: &Budget,
        misplaced: impl Fn(String) -> Rejection,
    ) -> Result<Vec<u8>, Halt> {
        let name = self.leading(&entry, want, limit, misplaced)?;
        // Its size is bounded by `limit` just above: reserved once, not doubled as it grows.
        let mut bytes = Vec::with_capacity(usize::try_from(entry.size()).unwrap_or(0));
        (&mut entry)
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| self.fatal(Some(name.clone()), budget.explain(&e, Rejection::Truncated)))?;
        if bytes.len() as u64 != entry.size() {
            return Err(
                self.fatal(Some(name), Rejection::Truncated(format!("{} of {} bytes", bytes.len(), entry.size())))
            );
        }
        Ok(bytes)
    }
}

/// The kind name of an entry type that is not a regular file.
fn forbidden_type(t: tar::EntryType) -> Option<&'static str> {
    use tar::EntryType as T;
    match t {
        T::Regular => None,
        T::Symlink => Some("symlink"),
        T::Link => Some("hardlink"),
        T::Char => Some("character device"),
        T::Block => Some("block device"),
        T::Fifo => Some("fifo"),
        T::Directory => Some("directory"),
        _ => Some("special"),
    }
}

/// The manifest's entries by path, and which of them the stream has brought so far.
struct Listing<'a> {
    entries: &'a [Entry],
    by_path: ByPath<'a>,
    seen: Vec<bool>,
}

/// A member's path, looked up.
enum Met<'a> {
    First(&'a Entry),
    Again,
    Unlisted,
}

impl<'a> Listing<'a> {
    /// `Err` with a path listed twice (which `Manifest::check` has refused already).
    fn of(entries: &'a [Entry]) -> Result<Self, &'a str> {
        Ok(Self { entries, by_path: ByPath::new(entries)?, seen: vec![false; entries.len()] })
    }

    fn meet(&mut self, path: &MemberPath) -> Met<'a> {
        match self.by_path.position(path.as_str()) {
            None => Met::Unlisted,
            Some(at) if std::mem::replace(&mut self.seen[at], true) => Met::Again,
            Some(at) => Met::First(&self.entries[at]),
        }
    }

    /// The carried entries the stream never brought.
    fn unseen(&self) -> impl Iterator<Item = &'a Entry> + '_ {
        self.entries.iter().zip(&self.seen).filter(|(e, seen)| !e.from_base && !**seen).map(|(e, _)| e)
    }
}

/// The most decompressed bytes the content members may take: data rounded to tar blocks, plus
/// a header, a PAX header and PAX records per entry, plus the end-of-archive blocks.
fn declared_stream_bytes<'a>(entries: impl Iterator<Item = &'a Entry>) -> u64 {
    // Saturating: the manifest check bounds the sizes, but this must not overflow on its own.
    let block = |n: u64| n.div_ceil(512).saturating_mul(512);
    let per_entry = entries.fold(0u64, |sum, e| {
        sum.saturating_add(block(e.size))
            .saturating_add(2 * 512)
            .saturating_add(block(e.path.as_str().len() as u64 + 64))
    });
    per_entry.saturating_add(1024 + (64 << 10))
}

/// What went wrong reading the compressed tar stream, in our words. The `tar` crate's messages
/// quote the header bytes they could not parse (`numeric field was not a number: <100 bytes of
/// the file>`): hostile bytes, never shown. Other messages (zstd's) are escaped and cut short.
fn stream_words(e: &io::Error) -> String {
    let text = e.to_string();
    let known = [
        ("cksum", "the tar header is invalid (bad checksum field)"),
        ("checksum", "the tar header is invalid (bad checksum field)"),
        ("numeric field", "the tar header is invalid (a numeric field is not a number)"),
        ("utf-8", "the tar header is invalid (a field is not text)"),
        ("entire block", "the stream ends in the middle of a tar header"),
        ("pax", "a tar extension record is invalid"),
        ("long name", "a tar long-name record is invalid"),
    ];
    if let Some((_, words)) = known.iter().find(|(needle, _)| text.contains(needle)) {
        return (*words).to_owned();
    }
    if e.kind() == io::ErrorKind::UnexpectedEof {
        return "the stream ends early".to_owned();
    }
    let shown: String = text.chars().take(120).collect();
    crate::escape::value(&shown).into_owned()
}
