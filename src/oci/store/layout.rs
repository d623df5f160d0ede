//! An OCI image layout directory's files (`oci-layout:DIR`): its blobs by digest, its
//! `index.json` read bounded and updated whole, a blob written and checked before it becomes
//! visible. Files are opened as airlock opens what it did not write (`regular`), on the
//! blocking pool.

use std::path::{Path, PathBuf};

use futures_util::StreamExt as _;
use oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE;
use sha2::Digest as _;
use tokio::io::AsyncWriteExt as _;

use super::{ByteStream, StoreError};
use crate::digest::Sha256;
use crate::fetch::blocking;
use crate::oci::doc::{Descriptor, MAX_MANIFEST_BYTES, REF_NAME};

pub(super) fn io_err(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |e| StoreError::Io { path: path.to_owned(), detail: e.to_string() }
}

/// A layout's file opened as airlock opens what it did not write (`regular::open`).
pub(super) fn open_layout_file(path: &Path) -> Result<std::fs::File, StoreError> {
    crate::regular::open(path).map_err(io_err(path))?.ok_or_else(|| StoreError::NotRegular { path: path.to_owned() })
}

pub fn layout_blob(dir: &Path, digest: Sha256) -> PathBuf {
    dir.join("blobs/sha256").join(digest.to_string())
}

/// A layout's small document (index, manifest), refused when larger than a manifest can be:
/// a truncated read would only fail later, and less clearly.
pub(super) fn read_small(path: &Path) -> Result<Vec<u8>, StoreError> {
    use crate::regular::Refused;
    match crate::regular::read(path, MAX_MANIFEST_BYTES) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(StoreError::Io { path: path.to_owned(), detail: "no such file".into() }),
        Err(Refused::NotRegular) => Err(StoreError::NotRegular { path: path.to_owned() }),
        Err(Refused::TooLarge) => {
            let detail = format!("larger than {MAX_MANIFEST_BYTES} bytes, more than a manifest can be");
            Err(StoreError::Io { path: path.to_owned(), detail })
        }
        Err(Refused::Io(e)) => Err(io_err(path)(e)),
    }
}

pub(super) fn read_layout_index(dir: &Path) -> Result<Vec<Descriptor>, StoreError> {
    let path = dir.join("index.json");
    if !path.exists() {
        return Ok(Vec::new());
    }
    crate::oci::doc::parse_layout_index(&read_small(&path)?).map_err(|detail| StoreError::LayoutIndex { path, detail })
}

/// The entry `tag` names in a layout, or its only tagged entry when no tag is given.
pub(super) fn layout_tagged(dir: &Path, tag: Option<&str>) -> Result<Descriptor, StoreError> {
    let entries = read_layout_index(dir)?;
    let tags: Vec<&str> = entries.iter().filter_map(|e| e.annotations.get(REF_NAME).map(String::as_str)).collect();
    let named: Vec<&Descriptor> = entries
        .iter()
        .filter(|e| match tag {
            Some(t) => e.annotations.get(REF_NAME).map(String::as_str) == Some(t),
            None => e.annotations.contains_key(REF_NAME),
        })
        .collect();
    let path = dir.join("index.json");
    match named.as_slice() {
        [one] => Ok((*one).clone()),
        [] => {
            let has = if tags.is_empty() { "none".to_owned() } else { tags.join(", ") };
            let detail = match tag {
                Some(t) => format!("no manifest tagged `{t}` (it has {has})"),
                None => "no tagged manifest at all".to_owned(),
            };
            Err(StoreError::Io { path, detail })
        }
        _ => Err(StoreError::Io {
            path,
            detail: format!("several tagged manifests ({has}): name one (oci-layout:DIR:TAG)", has = tags.join(", ")),
        }),
    }
}

/// Add `added` to a layout's `index.json`, in place of the entries `replaced` picks.
pub(super) fn update_layout_index(
    dir: &Path,
    added: Vec<Descriptor>,
    replaced: impl Fn(&Descriptor) -> bool,
) -> Result<(), StoreError> {
    let path = dir.join("index.json");
    let mut entries = read_layout_index(dir)?;
    entries.retain(|e| !replaced(e));
    entries.extend(added);
    let index =
        serde_json::json!({ "schemaVersion": 2, "mediaType": OCI_IMAGE_INDEX_MEDIA_TYPE, "manifests": entries });
    let mut bytes =
        serde_json::to_vec_pretty(&index).map_err(|e| StoreError::Io { path: path.clone(), detail: e.to_string() })?;
    bytes.push(b'\n');
    crate::atomic::write(&path, &bytes).map_err(io_err(&path))?;
    crate::atomic::write(&dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).map_err(io_err(dir))
}

/// Write a blob into a layout, checked against its digest and size before it appears; the
/// writes go through tokio's file, which does them on the blocking pool.
pub(super) async fn write_layout_blob(dir: &Path, d: &Descriptor, mut stream: ByteStream) -> Result<(), StoreError> {
    let path = layout_blob(dir, d.digest);
    let target = path.clone();
    let tmp = blocking(move || {
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        crate::atomic::temp_beside(&target)
    })
    .await
    .map_err(io_err(&path))?;
    let mut file = tokio::fs::File::from_std(tmp.as_file().try_clone().map_err(io_err(&path))?);
    let mut hash = sha2::Sha256::new();
    let mut size = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| StoreError::Io { path: path.clone(), detail: e.to_string() })?;
        hash.update(&chunk);
        size += chunk.len() as u64;
        file.write_all(&chunk).await.map_err(io_err(&path))?;
    }
    file.flush().await.map_err(io_err(&path))?;
    let actual = Sha256::from_raw(hash.finalize().into());
    if actual != d.digest || size != d.size {
        return Err(StoreError::Digest { what: format!("blob for `{}`", path.display()), expected: d.digest, actual });
    }
    let target = path.clone();
    blocking(move || tmp.persist(&target).map(drop).map_err(|e| e.error)).await.map_err(io_err(&path))
}
