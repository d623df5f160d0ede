//! SHA-256 digests: a parsed newtype (parse, don't validate) and hashers that count and hash
//! bytes while they stream past, so content never has to be held in memory to be checked.

use std::fmt;
use std::io::{self, Read};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::Digest as _;

/// A SHA-256 digest, written as 64 lower-case hex characters everywhere airlock prints or stores it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256([u8; 32]);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{value}` is not a sha256 digest: expected {expected}")]
pub struct DigestParseError {
    pub value: String,
    /// `64 lower-case hex characters`, with `sha256:` before them where the OCI way is read.
    pub expected: &'static str,
}

impl crate::failure::Classify for DigestParseError {
    fn class(&self) -> crate::failure::Class {
        // What claimed to be a digest is not one: a document that does not hold.
        crate::failure::Class::Verification
    }
}

impl Sha256 {
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self(sha2::Sha256::digest(bytes).into())
    }

    pub fn from_raw(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The first `n` hex characters, for short identifiers such as a site's bundle id.
    pub fn short(&self, n: usize) -> String {
        let mut hex = self.to_string();
        hex.truncate(n);
        hex
    }
}

impl FromStr for Sha256 {
    type Err = DigestParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || DigestParseError { value: s.to_owned(), expected: "64 lower-case hex characters" };
        // Upper-case hex would round-trip to a different string; refuse it rather than
        // silently normalising a digest someone copied from elsewhere.
        if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(err());
        }
        let mut out = [0u8; 32];
        hex::decode_to_slice(s, &mut out).map_err(|_| err())?;
        Ok(Self(out))
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{self}")
    }
}

impl Serialize for Sha256 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Sha256 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Serde for digests written the OCI way, `sha256:HEX`: `#[serde(with = "crate::digest::prefixed")]`.
pub mod prefixed {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Sha256;

    pub fn serialize<S: Serializer>(d: &Sha256, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("sha256:{d}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Sha256, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).map_err(serde::de::Error::custom)
    }

    /// `sha256:HEX` to a digest.
    pub fn parse(s: &str) -> Result<Sha256, super::DigestParseError> {
        let expected = "`sha256:` and 64 lower-case hex characters";
        s.strip_prefix("sha256:")
            .and_then(|hex| hex.parse().ok())
            .ok_or_else(|| super::DigestParseError { value: s.to_owned(), expected })
    }
}

/// A digest that serialises the OCI way (`sha256:HEX`), for optional and repeated fields.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Prefixed(pub Sha256);

impl fmt::Display for Prefixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.0)
    }
}

impl Serialize for Prefixed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        prefixed::serialize(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for Prefixed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        prefixed::deserialize(d).map(Self)
    }
}

/// Hashes and counts every byte read through it.
pub struct HashingReader<R> {
    inner: R,
    hasher: sha2::Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        Self { inner, hasher: sha2::Sha256::new(), count: 0 }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn finish(self) -> (Sha256, u64) {
        (Sha256(self.hasher.finalize().into()), self.count)
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// Hashes and counts every byte written through it.
pub struct HashingWriter<W> {
    inner: W,
    hasher: sha2::Sha256,
    count: u64,
}

impl<W: io::Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        Self { inner, hasher: sha2::Sha256::new(), count: 0 }
    }

    /// The digest and count of what was written, and the writer.
    pub fn finish(self) -> (Sha256, u64, W) {
        (Sha256(self.hasher.finalize().into()), self.count, self.inner)
    }
}

impl<W: io::Write> io::Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Stream a whole reader through SHA-256 without keeping it.
pub fn hash_reader(reader: impl Read) -> io::Result<(Sha256, u64)> {
    let mut hashing = HashingReader::new(reader);
    io::copy(&mut hashing, &mut io::sink())?;
    Ok(hashing.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn parses_and_prints_lower_hex() {
        let d: Sha256 = EMPTY.parse().unwrap();
        assert_eq!(d.to_string(), EMPTY);
        assert_eq!(d, Sha256::of_bytes(b""));
        assert_eq!(d.short(12), "e3b0c44298fc");
    }

    #[test]
    fn rejects_upper_case_wrong_length_and_prefixes() {
        for bad in [&EMPTY.to_uppercase(), &EMPTY[1..], &format!("sha256:{EMPTY}"), "zz"] {
            assert!(bad.parse::<Sha256>().is_err(), "{bad}");
        }
    }

    #[test]
    fn hashing_reader_counts_and_hashes() {
        let (d, n) = hash_reader(&b"abc"[..]).unwrap();
        assert_eq!(n, 3);
        assert_eq!(d.to_string(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
