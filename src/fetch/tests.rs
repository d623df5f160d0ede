use std::time::Duration;

use super::land::{Landing, Streaming, attempts};
use super::retry::without_urls_of;
use super::*;
use crate::cache::CacheError;
use crate::digest::Sha256;
use crate::failure::{Class, Classify};

#[test]
fn a_retry_line_names_the_url_once() {
    let what = "GET https://mirror.site/current/airlock/manifest.json";
    let detail = "GET https://mirror.site/current/airlock/manifest.json: error sending request for url \
                  (https://mirror.site/current/airlock/manifest.json): dns error";
    assert_eq!(without_urls_of(detail, what), "error sending request: dns error");
}
use crate::progress::Counted;

/// Lands bytes as a partial file does: from `offset`, or again from 0 after a full answer.
struct Tally(u64);

impl Landing for Tally {
    fn offset(&mut self) -> u64 {
        self.0
    }

    async fn restart_at_zero(&mut self) -> Result<(), CacheError> {
        self.0 = 0;
        Ok(())
    }

    async fn land(&mut self, chunk: bytes::Bytes) -> Result<bool, CacheError> {
        self.0 += chunk.len() as u64;
        Ok(true)
    }

    async fn pause(&mut self) -> Result<(), CacheError> {
        Ok(())
    }
}

type Chunks = futures_util::stream::Iter<std::vec::IntoIter<Result<bytes::Bytes, String>>>;

fn chunks(parts: &[Result<&'static str, &str>]) -> Chunks {
    let items: Vec<_> =
        parts.iter().map(|p| p.map(|s| bytes::Bytes::from_static(s.as_bytes())).map_err(str::to_owned)).collect();
    futures_util::stream::iter(items)
}

/// The bytes `attempts` reports for a download of "0123456789" landing in `landing`, whose
/// answers come from `answers` in turn.
fn reported(mut landing: Tally, answers: Vec<Opened<Chunks>>) -> u64 {
    let counted = Counted::default();
    let done = run(&mut landing, answers, &counted);
    assert!(matches!(done, Ok(true)), "the download completes");
    assert_eq!(landing.0, 10, "every byte landed");
    assert_eq!(counted.item.get(), counted.bytes.get(), "the item and the phase count alike");
    counted.bytes.get()
}

/// `attempts` for `landing`, whose answers come from `answers` in turn.
fn run(
    landing: &mut impl Landing,
    answers: Vec<Opened<Chunks>>,
    counted: &Counted,
) -> Result<bool, DownloadError<HttpError>> {
    let options = NetOptions { base_wait: Duration::from_millis(1), ..NetOptions::default() };
    let mut answers = answers.into_iter();
    let open = |_offset: u64| {
        let next = answers.next();
        async move { next.ok_or(Failure::<HttpError>::Transient("no more answers".into())) }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(attempts(landing, ("blob", "key"), counted, &options, open))
}

#[test]
fn a_stream_past_its_declared_size_is_refused_as_an_overrun_and_not_handed_over() {
    let (out, _reader) = crate::overlap::flow();
    let mut streaming = Streaming { out, sent: 0, skip: 0, limit: 8, what: "layer sha256:ab".into() };
    let answers = vec![Opened::Full(chunks(&[Ok("01234"), Ok("56789")]))];
    let done = run(&mut streaming, answers, &Counted::default());
    let Err(DownloadError::Overrun(overrun)) = &done else { panic!("an overrun, not {done:?}") };
    assert_eq!((overrun.what.as_str(), overrun.limit), ("layer sha256:ab", 8));
    assert_eq!(done.as_ref().map_err(Classify::class).err(), Some(Class::Verification));
    assert_eq!(streaming.sent, 5, "the chunk that would pass the size is not handed over");
}

#[test]
fn bytes_sent_again_from_zero_are_reported_once() {
    // The connection drops after 5 bytes; the retry's range is ignored: 0123456789 again.
    let answers = vec![Opened::Full(chunks(&[Ok("01234"), Err("dropped")])), Opened::Full(chunks(&[Ok("0123456789")]))];
    assert_eq!(reported(Tally(0), answers), 10);
}

/// `data` from `from` on, in chunks of 64 KiB; cut (a transient error) once `cut` bytes of
/// the whole have been sent, if it is past `from`.
fn sent(data: &[u8], from: usize, cut: Option<usize>) -> Chunks {
    let end = cut.filter(|&c| c > from).unwrap_or(data.len());
    let mut items: Vec<_> = data[from..end].chunks(64 << 10).map(|c| Ok(bytes::Bytes::copy_from_slice(c))).collect();
    if end < data.len() {
        items.push(Err("connection reset".to_owned()));
    }
    futures_util::stream::iter(items)
}

/// `download_to_file` of `data` into a new file, the answers to each attempt made by
/// `answer(attempt, offset)`: the file's bytes and what it returned.
fn downloaded(data: &[u8], answer: impl Fn(usize, u64) -> Opened<Chunks>) -> (Vec<u8>, Sha256, u64) {
    let dir = tempfile::tempdir().expect("a directory");
    let path = dir.path().join("member.deb");
    let options = NetOptions { base_wait: Duration::from_millis(1), ..NetOptions::default() };
    let tries = std::cell::Cell::new(0);
    let open = |offset: u64| {
        tries.set(tries.get() + 1);
        let opened = answer(tries.get(), offset);
        async move { Ok::<_, Failure<HttpError>>(opened) }
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let size = data.len() as u64;
    let done = runtime.block_on(download_to_file(&path, size, "member.deb", &Counted::default(), &options, open));
    let (sha, landed) = done.expect("the download completes");
    (std::fs::read(&path).expect("the file"), sha, landed)
}

/// 3.5 MiB and a tail that is no whole block, bytes that differ at every offset, so a byte
/// out of place shows.
fn member() -> Vec<u8> {
    (0..(7u32 << 19) + 1000).map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes()[2]).collect()
}

#[test]
fn a_member_cut_after_several_writes_resumes_where_it_stopped_and_lands_whole() {
    let data = member();
    let (file, sha, landed) = downloaded(&data, |attempt, offset| match attempt {
        1 => Opened::Full(sent(&data, 0, Some(2_500_000))),
        _ => Opened::Partial(sent(&data, usize::try_from(offset).expect("an offset"), None)),
    });
    assert!(file == data, "the file holds the member's bytes in order");
    assert_eq!((sha, landed), (Sha256::of_bytes(&data), data.len() as u64));
}

#[test]
fn a_resumed_member_answered_from_byte_zero_is_written_and_hashed_over_from_the_start() {
    let data = member();
    let (file, sha, landed) = downloaded(&data, |attempt, _| match attempt {
        1 => Opened::Full(sent(&data, 0, Some(3_000_000))),
        _ => Opened::Full(sent(&data, 0, None)),
    });
    assert!(file == data, "the file holds the member once, not its first part twice");
    assert_eq!((sha, landed), (Sha256::of_bytes(&data), data.len() as u64));
}

#[test]
fn bytes_a_partial_file_holds_already_are_reported() {
    let answers = vec![Opened::Partial(chunks(&[Ok("456"), Ok("789")]))];
    assert_eq!(reported(Tally(4), answers), 10);
}
