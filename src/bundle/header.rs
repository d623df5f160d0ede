//! Deterministic tar headers: POSIX ustar, uid/gid 0, no owner names, mode 0644, mtime from
//! the build timestamp. A PAX extended header carries what ustar cannot hold (paths that do
//! not split into its 155 + 100 byte fields, sizes of 8 GiB and more); nothing else varies.

use tar::{EntryType, Header};

use crate::member_path::MemberPath;

/// Largest size the 11-digit octal ustar size field holds.
const USTAR_MAX_SIZE: u64 = 0o777_7777_7777;

/// A regular-file header and the PAX records that must precede it (possibly none).
pub struct MemberHeader {
    pub header: Header,
    pub pax: Vec<(&'static str, Vec<u8>)>,
}

pub fn regular_file(path: &MemberPath, size: u64, mtime: u64) -> MemberHeader {
    let mut header = Header::new_ustar();
    let mut pax = Vec::new();
    header.set_entry_type(EntryType::Regular);
    header.set_mode(0o644);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(mtime);
    if size > USTAR_MAX_SIZE {
        pax.push(("size", size.to_string().into_bytes()));
    }
    header.set_size(size);
    if header.set_path(path.as_str()).is_err() {
        // Too long for ustar: the PAX `path` record is authoritative; the ustar name keeps a
        // readable, deterministic stand-in (the tail of the path) for tools without PAX.
        pax.push(("path", path.as_str().as_bytes().to_vec()));
        let tail = tail_within(path.as_str(), 100);
        if let Some(ustar) = header.as_ustar_mut() {
            ustar.prefix = [0; 155];
        }
        header.as_old_mut().name = [0; 100];
        header.as_old_mut().name[..tail.len()].copy_from_slice(tail.as_bytes());
    }
    header.set_cksum();
    MemberHeader { header, pax }
}

/// The longest suffix of `s` that fits in `max` bytes, cut at a char boundary.
fn tail_within(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_paths_are_plain_ustar_with_fixed_fields() {
        let p = MemberPath::new("files/fw.bin").unwrap();
        let h = regular_file(&p, 42, 1_700_000_000);
        assert!(h.pax.is_empty());
        let hd = &h.header;
        assert_eq!(hd.path_bytes().as_ref(), b"files/fw.bin");
        assert_eq!(hd.size().unwrap(), 42);
        assert_eq!(hd.mtime().unwrap(), 1_700_000_000);
        assert_eq!((hd.uid().unwrap(), hd.gid().unwrap(), hd.mode().unwrap()), (0, 0, 0o644));
        assert_eq!(hd.username_bytes(), Some(&b""[..]));
        assert_eq!(hd.groupname_bytes(), Some(&b""[..]));
        assert_eq!(&hd.as_bytes()[257..263], b"ustar\0", "POSIX ustar magic");
        // Same inputs, same 512 bytes.
        assert_eq!(hd.as_bytes(), regular_file(&p, 42, 1_700_000_000).header.as_bytes());
    }

    #[test]
    fn long_paths_and_huge_sizes_use_pax_records() {
        let long = format!("models/org/name/{}/weights.safetensors", "c".repeat(200));
        let p = MemberPath::new(long.clone()).unwrap();
        let h = regular_file(&p, USTAR_MAX_SIZE + 1, 0);
        let keys: Vec<_> = h.pax.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, ["size", "path"]);
        assert_eq!(h.pax[1].1, long.as_bytes());
        assert!(long.ends_with(std::str::from_utf8(h.header.path_bytes().as_ref()).unwrap()));
    }
}
