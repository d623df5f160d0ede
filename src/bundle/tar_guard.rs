//! A watch on the tar structure of a decompressed bundle, below the `tar` crate. The crate
//! reads a PAX record or a GNU long name whole into memory before anyone can look at it, and
//! after the signature check the reader's byte budget is the whole declared content size: an
//! attacker who splices a 250 MB record in after an intact signed head (no key needed) would
//! make every reader allocate it. This tracker follows every header block as it streams past
//! and refuses an extension record larger than [`MAX_EXTENSION_BYTES`] (Go's `archive/tar`
//! caps PAX records at 1 MiB the same way), more than [`MAX_EXTENSIONS_IN_A_ROW`] of them
//! before one member, and GNU sparse members — before the crate reads the record's data.
//! Hand-written: no tar crate exposes its headers before acting on them.

/// The largest PAX record set or GNU long name accepted (airlock writes a few hundred bytes).
pub const MAX_EXTENSION_BYTES: u64 = 1 << 20;
/// Extension records before one member: a PAX header and a GNU long name and link at most.
pub const MAX_EXTENSIONS_IN_A_ROW: u32 = 3;

const BLOCK: usize = 512;

/// What the tracker refuses, before the `tar` crate reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TarRefusal {
    #[error("an unreadable tar header")]
    UnreadableHeader,
    #[error("{0} bytes passed unread outside a member's data")]
    PassedOutside(u64),
    #[error("a tar header: {0}")]
    Header(String),
    #[error("a GNU sparse member (bundles hold regular files only)")]
    Sparse,
    #[error("a {kind} extension record of {size} bytes (at most {MAX_EXTENSION_BYTES} are read)")]
    LargeExtension { kind: &'static str, size: u64 },
    #[error("more than {MAX_EXTENSIONS_IN_A_ROW} extension records before one member")]
    ExtensionsInARow,
    #[error("a member size of {0} bytes")]
    Size(u64),
    #[error("unreadable PAX records: {0}")]
    Pax(String),
    #[error("PAX size `{0}`")]
    PaxSize(String),
}

impl crate::failure::Classify for TarRefusal {
    /// A bundle's stream that the tracker refuses does not hold.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Verification
    }
}

/// Where the stream is: inside a header block, or passing an entry's data and padding.
#[derive(Default)]
pub struct Tracker {
    header: Vec<u8>,
    /// Data and padding bytes of the current entry still to pass.
    skip: u64,
    /// A PAX record set being captured (bounded by `MAX_EXTENSION_BYTES`) for its `size`.
    pax: Option<(Vec<u8>, u64)>,
    /// The size a PAX record gave the next member.
    next_size: Option<u64>,
    in_a_row: u32,
    /// A header block whose checksum does not hold: the `tar` crate refuses it; should it read
    /// on regardless, nothing more is passed.
    lost: bool,
}

impl Tracker {
    /// Follow `bytes`, the next bytes of the stream. `Err` names what is refused.
    pub fn observe(&mut self, mut bytes: &[u8]) -> Result<(), TarRefusal> {
        while !bytes.is_empty() {
            if self.lost {
                return Err(TarRefusal::UnreadableHeader);
            }
            if self.skip > 0 {
                let n = usize::try_from(self.skip).unwrap_or(usize::MAX).min(bytes.len());
                if let Some((data, left)) = &mut self.pax {
                    let take = usize::try_from(*left).unwrap_or(usize::MAX).min(n);
                    data.extend_from_slice(&bytes[..take]);
                    *left -= take as u64;
                }
                self.skip -= n as u64;
                bytes = &bytes[n..];
                if self.skip == 0
                    && let Some((data, _)) = self.pax.take()
                {
                    self.next_size = pax_size(&data)?;
                }
                continue;
            }
            let n = (BLOCK - self.header.len()).min(bytes.len());
            self.header.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.header.len() == BLOCK {
                let header = std::mem::take(&mut self.header);
                self.header_done(&header)?;
            }
        }
        Ok(())
    }

    /// Follow `n` bytes passed without being read (a member's data and padding, skipped):
    /// only inside an entry's data, never past it into a header the tracker did not see.
    pub fn pass(&mut self, n: u64) -> Result<(), TarRefusal> {
        if self.lost || !self.header.is_empty() || self.pax.is_some() || n > self.skip {
            return Err(TarRefusal::PassedOutside(n));
        }
        self.skip -= n;
        Ok(())
    }

    fn header_done(&mut self, header: &[u8]) -> Result<(), TarRefusal> {
        if header.iter().all(|&b| b == 0) {
            return Ok(()); // an end-of-archive block
        }
        if !checksum_holds(header) {
            self.lost = true;
            return Ok(());
        }
        // The size exactly as the `tar` crate will read it, so that both stay in step.
        let size = tar::Header::from_byte_slice(header).entry_size().map_err(|e| TarRefusal::Header(e.to_string()))?;
        let kind = match header[156] {
            b'x' => Some("PAX"),
            b'g' => Some("PAX global"),
            b'L' => Some("GNU long name"),
            b'K' => Some("GNU long link"),
            b'S' => return Err(TarRefusal::Sparse),
            _ => None,
        };
        let size = if let Some(kind) = kind {
            if size > MAX_EXTENSION_BYTES {
                return Err(TarRefusal::LargeExtension { kind, size });
            }
            self.in_a_row += 1;
            if self.in_a_row > MAX_EXTENSIONS_IN_A_ROW {
                return Err(TarRefusal::ExtensionsInARow);
            }
            if header[156] == b'x' {
                self.pax = Some((Vec::with_capacity(usize::try_from(size).unwrap_or(0)), size));
            }
            size
        } else {
            self.in_a_row = 0;
            self.next_size.take().unwrap_or(size)
        };
        self.skip = size.checked_next_multiple_of(BLOCK as u64).ok_or(TarRefusal::Size(size))?;
        if self.skip == 0
            && let Some((data, _)) = self.pax.take()
        {
            self.next_size = pax_size(&data)?;
        }
        Ok(())
    }
}

/// Whether a header's checksum (the unsigned sum of its bytes, the checksum field counted as
/// spaces) is what it says, as the `tar` crate checks it.
fn checksum_holds(header: &[u8]) -> bool {
    let sum: u32 =
        header.iter().enumerate().map(|(i, &b)| if (148..156).contains(&i) { 32 } else { u32::from(b) }).sum();
    tar::Header::from_byte_slice(header).cksum().is_ok_and(|c| c == sum)
}

/// The `size` record of a PAX record set, if any.
fn pax_size(data: &[u8]) -> Result<Option<u64>, TarRefusal> {
    for record in tar::PaxExtensions::new(data) {
        let record = record.map_err(|e| TarRefusal::Pax(e.to_string()))?;
        if record.key_bytes() == b"size" {
            let value = record.value().map_err(|e| TarRefusal::Pax(format!("size: {e}")))?;
            return value.parse().map(Some).map_err(|_| TarRefusal::PaxSize(value.escape_default().to_string()));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: tar::EntryType, size: u64) -> Vec<u8> {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_path("x").unwrap();
        h.set_cksum();
        h.as_bytes().to_vec()
    }

    /// Feed `bytes` in small, odd-sized pieces, as a decompressor would.
    fn feed(t: &mut Tracker, bytes: &[u8]) -> Result<(), TarRefusal> {
        bytes.chunks(77).try_for_each(|c| t.observe(c))
    }

    #[test]
    fn bytes_pass_unread_only_inside_a_members_data_and_padding() {
        let mut t = Tracker::default();
        // Not before a header has been seen, nor inside one.
        assert!(t.pass(1).is_err());
        let member = header(tar::EntryType::Regular, 1000);
        feed(&mut t, &member[..100]).unwrap();
        assert!(t.pass(1).is_err());
        feed(&mut t, &member[100..]).unwrap();
        // 1000 bytes of data and 24 of padding: some read, the rest passed; no more.
        feed(&mut t, &[7u8; 10]).unwrap();
        assert!(t.pass(1015).is_err(), "past the padding, into the next header");
        t.pass(1014).unwrap();
        // The next header is followed again: a PAX record too large is still refused.
        assert!(feed(&mut t, &header(tar::EntryType::XHeader, MAX_EXTENSION_BYTES + 1)).is_err());
    }

    #[test]
    fn follows_members_and_pax_sizes_and_refuses_large_records() {
        let mut t = Tracker::default();
        let mut stream = header(tar::EntryType::Regular, 700);
        stream.extend(vec![7u8; 1024]);
        // A PAX size record makes the next member 1000 bytes, whatever its header says.
        let records = b"13 size=1000\n";
        stream.extend(header(tar::EntryType::XHeader, records.len() as u64));
        stream.extend(records);
        stream.extend(vec![0u8; 512 - records.len()]);
        stream.extend(header(tar::EntryType::Regular, 0));
        stream.extend(vec![9u8; 1024]);
        stream.extend(header(tar::EntryType::Regular, 1));
        stream.extend(vec![1u8; 512]);
        stream.extend(vec![0u8; 1024]);
        feed(&mut t, &stream).unwrap();
        assert_eq!((t.skip, t.header.len()), (0, 0));

        let mut t = Tracker::default();
        let err = feed(&mut t, &header(tar::EntryType::XHeader, 250 << 20)).unwrap_err();
        assert_eq!(err, TarRefusal::LargeExtension { kind: "PAX", size: 250 << 20 });
        assert!(err.to_string().contains("PAX extension record of 262144000 bytes"), "{err}");
        let err = feed(&mut Tracker::default(), &header(tar::EntryType::GNULongName, 150 << 20)).unwrap_err();
        assert_eq!(err, TarRefusal::LargeExtension { kind: "GNU long name", size: 150 << 20 });
        let err = feed(&mut Tracker::default(), &header(tar::EntryType::GNUSparse, 1)).unwrap_err();
        assert_eq!(err, TarRefusal::Sparse);
        let many: Vec<u8> = (0..4).flat_map(|_| [header(tar::EntryType::GNULongName, 0)]).flatten().collect();
        assert_eq!(feed(&mut Tracker::default(), &many).unwrap_err(), TarRefusal::ExtensionsInARow);
        // A block that is no header is left to the tar crate, and nothing after it passes.
        let mut t = Tracker::default();
        feed(&mut t, &[0x55; 512]).unwrap();
        assert_eq!(t.observe(b"more").unwrap_err(), TarRefusal::UnreadableHeader);
    }

    #[test]
    fn sizes_near_the_top_of_u64_do_not_overflow() {
        let mut field = [0u8; 12];
        field[0] = 0x80;
        field[4..].copy_from_slice(&u64::MAX.to_be_bytes());
        let mut h = tar::Header::new_ustar();
        h.as_old_mut().size.copy_from_slice(&field);
        h.set_cksum();
        let h = h.as_bytes().to_vec();
        let err = feed(&mut Tracker::default(), &h).unwrap_err();
        assert_eq!(err, TarRefusal::Size(u64::MAX));
        assert!(pax_size(b"29 size=99999999999999999999\n").is_err());
    }
}
