//! Connections to registries: one `oci_client::Client` per registry (its stored auth is keyed
//! by registry and never replaced), built from the spec's `[registries."HOST"]` settings (or
//! install's `--registry` flags) and the user's docker config credentials. Files (CA bundles,
//! docker configs) are read with tokio's file API: connecting happens on the async executor.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;

use crate::fetch::{self, NetOptions, Verdict};
use crate::oci::ImageRef;
use crate::oci::doc::{ACCEPTED, MAX_MANIFEST_BYTES};

/// How to reach one registry. Plain HTTP is an explicit, loud exception.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    #[default]
    Https,
    /// `insecure = true` in the spec, or `--insecure-registry` on install.
    InsecureHttp,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot read CA file `{}` for registry `{registry}`", path.display())]
    CaRead {
        registry: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "CA file `{}` for registry `{registry}` is not a PEM bundle of certificates (none found, or a block that is no certificate)",
        path.display()
    )]
    CaEmpty { registry: String, path: PathBuf },
    #[error("cannot read docker config `{}`", path.display())]
    ConfigRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("docker config `{}`: {detail}", path.display())]
    ConfigParse { path: PathBuf, detail: String },
    #[error("cannot set up a client for registry `{registry}`: {detail}")]
    Build { registry: String, detail: String },
}

impl crate::failure::Classify for ClientError {
    fn class(&self) -> crate::failure::Class {
        // A CA or docker config that cannot be read or used: the host's files, not the bundle.
        crate::failure::Class::Runtime
    }
}

/// Registry credentials; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials").field("username", &self.username).field("password", &"<redacted>").finish()
    }
}

/// The docker config files airlock reads, first found first: `$REGISTRY_AUTH_FILE`,
/// `$DOCKER_CONFIG/config.json`, `~/.docker/config.json`.
pub fn docker_config_paths() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("REGISTRY_AUTH_FILE") {
        out.push(PathBuf::from(p));
    }
    if let Some(d) = std::env::var_os("DOCKER_CONFIG") {
        out.push(Path::new(&d).join("config.json"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        out.push(Path::new(&h).join(".docker/config.json"));
    }
    out
}

/// Credentials for `registry` from the first docker config that has an entry for it.
pub async fn credentials_for(registry: &str) -> Result<Option<Credentials>, ClientError> {
    for path in docker_config_paths() {
        let text = match tokio::fs::read_to_string(&path).await {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => return Err(ClientError::ConfigRead { path, source }),
        };
        if let Some(c) =
            parse_docker_config(&text, registry).map_err(|detail| ClientError::ConfigParse { path, detail })?
        {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

#[derive(serde::Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(serde::Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

fn parse_docker_config(text: &str, registry: &str) -> Result<Option<Credentials>, String> {
    let config: DockerConfig = serde_json::from_str(text).map_err(|e| e.to_string())?;
    // Keys may be bare hosts or URLs (`https://host/v1/`), as docker writes them.
    let entry = config.auths.iter().find(|(k, _)| {
        let host = k.trim_start_matches("https://").trim_start_matches("http://");
        host.split('/').next() == Some(registry)
    });
    let Some((_, entry)) = entry else { return Ok(None) };
    if let (Some(username), Some(password)) = (&entry.username, &entry.password) {
        return Ok(Some(Credentials { username: username.clone(), password: password.clone() }));
    }
    let Some(auth) = &entry.auth else { return Ok(None) };
    let decoded = STANDARD.decode(auth.trim()).map_err(|_| format!("`auth` for `{registry}` is not base64"))?;
    let text = String::from_utf8(decoded).map_err(|_| format!("`auth` for `{registry}` is not UTF-8"))?;
    let (username, password) =
        text.split_once(':').ok_or_else(|| format!("`auth` for `{registry}` is not `user:password`"))?;
    Ok(Some(Credentials { username: username.to_owned(), password: password.to_owned() }))
}

/// A client for one registry and the auth to use with it.
pub struct Connection {
    pub client: oci_client::Client,
    pub auth: RegistryAuth,
    /// Small documents (manifests, indexes, referrers) are read with this client, to a limit:
    /// oci-client reads a whole body into memory whatever its size.
    http: reqwest::Client,
    scheme: &'static str,
    /// `Authorization` values by repository, as obtained for pulls.
    authorizations: tokio::sync::Mutex<BTreeMap<String, Option<String>>>,
}

impl Connection {
    /// The connection's HTTP client (its CA bundle and timeouts): pushes reuse it rather than
    /// reading the CA again for every image.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A manifest or index by tag or digest, read to `MAX_MANIFEST_BYTES` at the most, with
    /// the digest of the bytes received. The caller that asked for a digest checks it (and
    /// says so as a verification failure, exit 3); a registry's `Docker-Content-Digest`
    /// header is a claim and not needed: the bytes are what is used.
    pub async fn manifest(
        &self,
        reference: &oci_client::Reference,
    ) -> Result<(bytes::Bytes, String), OciDistributionError> {
        let at = reference.digest().or(reference.tag()).unwrap_or("latest");
        let body = self.get_small(reference, &format!("manifests/{at}"), &ACCEPTED.join(", ")).await?;
        let actual = format!("sha256:{}", crate::digest::Sha256::of_bytes(&body));
        Ok((body, actual))
    }

    /// The referrers of the manifest `reference` names by digest: the referrers API, else the
    /// referrers tag schema (`sha256-HEX`); each read to a limit.
    pub async fn referrers(
        &self,
        reference: &oci_client::Reference,
    ) -> Result<oci_client::manifest::OciImageIndex, OciDistributionError> {
        if let Some(index) = self.referrers_api(reference).await? {
            return Ok(index);
        }
        let tag = reference.digest().unwrap_or_default().replace(':', "-");
        let tagged =
            oci_client::Reference::with_tag(reference.registry().to_owned(), reference.repository().to_owned(), tag);
        let body = match self.manifest(&tagged).await {
            Ok((body, _)) => body,
            // Neither the API nor the tag: no referrers.
            Err(e) if is_not_found(&e) => bytes::Bytes::from_static(br#"{"schemaVersion":2,"manifests":[]}"#),
            Err(e) => return Err(e),
        };
        serde_json::from_slice(&body).map_err(|e| OciDistributionError::ManifestParsingError(e.to_string()))
    }

    /// The referrers API's answer for the manifest `reference` names by digest, read to a
    /// limit; `None` where the registry has no such API (distribution 2.8: 404). For a caller
    /// that reads the referrers tag schema itself.
    pub async fn referrers_api(
        &self,
        reference: &oci_client::Reference,
    ) -> Result<Option<oci_client::manifest::OciImageIndex>, OciDistributionError> {
        let digest = reference.digest().unwrap_or_default();
        let accept = oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE;
        match self.get_small(reference, &format!("referrers/{digest}"), accept).await {
            Ok(body) => serde_json::from_slice(&body)
                .map(Some)
                .map_err(|e| OciDistributionError::ManifestParsingError(e.to_string())),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /v2/REPO/PATH`, with the pull authorization, its body read to `MAX_MANIFEST_BYTES`
    /// and refused past it. An expired token is fetched again once.
    async fn get_small(
        &self,
        reference: &oci_client::Reference,
        path: &str,
        accept: &str,
    ) -> Result<bytes::Bytes, OciDistributionError> {
        use futures_util::StreamExt as _;
        let url = format!("{}://{}/v2/{}/{path}", self.scheme, reference.resolve_registry(), reference.repository());
        let mut fresh = false;
        let response = loop {
            let mut request = self.http.get(&url).header(reqwest::header::ACCEPT, accept);
            if let Some(value) = self.authorization(reference, fresh).await? {
                request = request.header(reqwest::header::AUTHORIZATION, value);
            }
            let response = request.send().await?;
            if response.status() == reqwest::StatusCode::UNAUTHORIZED && !fresh {
                fresh = true;
                continue;
            }
            break response;
        };
        let status = response.status();
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            body.extend_from_slice(&chunk?);
            if body.len() as u64 > MAX_MANIFEST_BYTES {
                return Err(OciDistributionError::GenericError(Some(format!(
                    "{url}: the registry sent more than {MAX_MANIFEST_BYTES} bytes, more than a manifest can be"
                ))));
            }
        }
        // The errors oci-client gives for the same answers (`retryable`, `is_not_found` and
        // the messages read them).
        let message = || String::from_utf8_lossy(&body[..body.len().min(4096)]).into_owned();
        match status {
            s if s.is_success() => {}
            reqwest::StatusCode::UNAUTHORIZED => return Err(OciDistributionError::UnauthorizedError { url }),
            s if s.is_client_error() => {
                return Err(match serde_json::from_slice::<oci_client::errors::OciEnvelope>(&body) {
                    Ok(envelope) => OciDistributionError::RegistryError { envelope, url },
                    Err(_) => OciDistributionError::ServerError { code: s.as_u16(), url, message: message() },
                });
            }
            s => return Err(OciDistributionError::ServerError { code: s.as_u16(), url, message: message() }),
        }
        Ok(bytes::Bytes::from(body))
    }

    /// The `Authorization` header for a request made outside oci-client: the token its
    /// challenge handling obtained (`Client::auth`), else the docker config's basic
    /// credentials, else none.
    pub fn authorization_header(&self, token: Option<String>) -> Option<String> {
        match (token, &self.auth) {
            (Some(token), _) => Some(format!("Bearer {token}")),
            (None, RegistryAuth::Basic(user, password)) => {
                Some(format!("Basic {}", STANDARD.encode(format!("{user}:{password}"))))
            }
            (None, _) => None,
        }
    }

    /// A blob of `reference`'s repository, whole. Its pull is authorized first (once per
    /// command): oci-client's blob requests carry only credentials obtained before and answer
    /// a challenge with 401, and a build whose manifests are all in the cache (kept by `lock`)
    /// asks for blobs first.
    pub async fn blob(
        &self,
        reference: &oci_client::Reference,
        digest: &str,
    ) -> Result<oci_client::client::SizedStream, OciDistributionError> {
        self.authorization(reference, false).await?;
        self.client.pull_blob_stream(reference, digest).await
    }

    /// A blob from byte `offset` (`Range`), authorized as [`Connection::blob`] is.
    pub async fn blob_from(
        &self,
        reference: &oci_client::Reference,
        digest: &str,
        offset: u64,
    ) -> Result<oci_client::client::BlobResponse, OciDistributionError> {
        self.authorization(reference, false).await?;
        self.client.pull_blob_stream_partial(reference, digest, offset, None).await
    }

    /// The `Authorization` value for pulls from `reference`'s repository: none where the
    /// registry asks for nothing, a token obtained through oci-client's challenge handling
    /// (kept for the command), or the docker config's basic credentials.
    async fn authorization(
        &self,
        reference: &oci_client::Reference,
        fresh: bool,
    ) -> Result<Option<String>, OciDistributionError> {
        if let RegistryAuth::Bearer(token) = &self.auth {
            return Ok((!token.is_empty()).then(|| format!("Bearer {token}")));
        }
        let mut known = self.authorizations.lock().await;
        let key = reference.repository().to_owned();
        if !fresh && let Some(value) = known.get(&key) {
            return Ok(value.clone());
        }
        let token = self.client.auth(reference, &self.auth, oci_client::RegistryOperation::Pull).await?;
        let value = self.authorization_header(token);
        known.insert(key, value.clone());
        Ok(value)
    }
}

/// How to reach one registry: transport and an extra CA bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub transport: Transport,
    pub ca: Option<PathBuf>,
}

/// The registry connections of one command: one per registry, made on first use and shared
/// by everything the command does there (resolving tags, pulling, pushing).
#[derive(Default)]
pub struct Registries {
    endpoints: BTreeMap<String, Endpoint>,
    /// Connect and read timeouts.
    timeouts: (Duration, Duration),
    open: tokio::sync::Mutex<BTreeMap<String, Arc<Connection>>>,
}

impl Registries {
    /// Connections over `endpoints` (by `host[:port]`); a registry not named there is HTTPS with
    /// the system roots.
    pub fn new(endpoints: BTreeMap<String, Endpoint>, timeouts: (Duration, Duration)) -> Self {
        Self { endpoints, timeouts, open: tokio::sync::Mutex::default() }
    }

    /// The connection to `registry`, made now if this is its first use.
    pub async fn get(&self, registry: &str) -> Result<Arc<Connection>, ClientError> {
        let mut open = self.open.lock().await;
        if let Some(c) = open.get(registry) {
            return Ok(c.clone());
        }
        let endpoint = self.endpoints.get(registry).cloned().unwrap_or_default();
        let conn = Arc::new(connect(registry, endpoint.transport, endpoint.ca.as_deref(), self.timeouts).await?);
        open.insert(registry.to_owned(), conn.clone());
        Ok(conn)
    }
}

/// A CA bundle file (`--registry-ca`), checked when it is read: it must hold at least one
/// certificate and every certificate in it must parse. The one loader of CA files: every
/// client airlock makes for a registry is given every certificate of the bundle (`http_client`
/// and oci-client alike).
pub fn load_ca(registry: &str, path: &Path) -> Result<Vec<u8>, ClientError> {
    let pem = std::fs::read(path).map_err(|source| ClientError::CaRead {
        registry: registry.to_owned(),
        path: path.to_owned(),
        source,
    })?;
    // oci-client accepts garbage here without a word: check every block ourselves.
    let blocks = pem::parse_many(&pem).unwrap_or_default();
    let certs = reqwest::Certificate::from_pem_bundle(&pem).unwrap_or_default();
    if certs.is_empty() || !blocks.iter().all(|b| b.tag() == "CERTIFICATE") {
        return Err(ClientError::CaEmpty { registry: registry.to_owned(), path: path.to_owned() });
    }
    Ok(pem)
}

/// An HTTP client for a registry: `fetch::client_builder`'s (user agent, timeouts), and every
/// certificate of a CA bundle `load_ca` read, trusted beside the system roots.
pub fn http_client(timeouts: (Duration, Duration), ca_pem: Option<&[u8]>) -> reqwest::Result<reqwest::Client> {
    let mut builder = crate::fetch::client_builder(timeouts.0, timeouts.1);
    if let Some(pem) = ca_pem {
        for cert in reqwest::Certificate::from_pem_bundle(pem)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder.build()
}

/// `timeouts`: connect and read.
pub async fn connect(
    registry: &str,
    transport: Transport,
    ca: Option<&Path>,
    timeouts: (Duration, Duration),
) -> Result<Connection, ClientError> {
    let ca_pem = match ca {
        Some(path) => {
            let path = path.to_owned();
            let registry = registry.to_owned();
            Some(fetch::blocking(move || load_ca(&registry, &path)).await?)
        }
        None => None,
    };
    let extra: Vec<Certificate> =
        ca_pem.iter().map(|pem| Certificate { encoding: CertificateEncoding::Pem, data: pem.clone() }).collect();
    let http = http_client(timeouts, ca_pem.as_deref())
        .map_err(|e| ClientError::Build { registry: registry.to_owned(), detail: e.to_string() })?;
    let (protocol, scheme) = match transport {
        Transport::Https => (ClientProtocol::Https, "https"),
        Transport::InsecureHttp => {
            tracing::warn!("talking plain HTTP to registry `{registry}` (insecure): no transport security");
            (ClientProtocol::Http, "http")
        }
    };
    let config = ClientConfig {
        protocol,
        extra_root_certificates: extra,
        connect_timeout: Some(timeouts.0),
        read_timeout: Some(timeouts.1),
        ..ClientConfig::default()
    };
    let client = oci_client::Client::try_from(config)
        .map_err(|e| ClientError::Build { registry: registry.to_owned(), detail: e.to_string() })?;
    let auth = if asks_for_credentials(&http, registry, scheme).await {
        match credentials_for(registry).await? {
            Some(c) => RegistryAuth::Basic(c.username, c.password),
            None => RegistryAuth::Anonymous,
        }
    } else {
        // oci-client caches only the tokens it obtains: a registry that never asks for one
        // gets `GET /v2/` again before every request (7 of the 14 requests that lock one
        // image). Given a token it sends it without asking, and such a registry ignores it.
        RegistryAuth::Bearer(String::new())
    };
    Ok(Connection { client, auth, http, scheme, authorizations: tokio::sync::Mutex::default() })
}

/// Whether `GET /v2/` asks for credentials (anything but a 2xx without a challenge). Asked
/// once per registry and command; when it cannot be asked, the answer is yes, and the
/// requests that follow report the problem.
async fn asks_for_credentials(client: &reqwest::Client, registry: &str, scheme: &str) -> bool {
    match client.get(format!("{scheme}://{registry}/v2/")).send().await {
        Ok(response) => {
            !response.status().is_success() || response.headers().contains_key(reqwest::header::WWW_AUTHENTICATE)
        }
        Err(e) => {
            tracing::debug!("{registry}: /v2/ not reachable ({e})");
            true
        }
    }
}

/// Whether a registry error is worth another try: 5xx and 429 (as a status or as the
/// `TOOMANYREQUESTS` error code) and dropped connections. oci-client does not hand over the
/// response headers, so a registry's `Retry-After` cannot be honoured: backoff only.
pub fn retryable(e: &OciDistributionError) -> Verdict {
    match e {
        OciDistributionError::RequestError(_) | OciDistributionError::IoError(_) => Verdict::Retry,
        OciDistributionError::ServerError { code, .. } if *code >= 500 || *code == 429 => Verdict::Retry,
        OciDistributionError::RegistryError { envelope, .. }
            if envelope.errors.iter().any(|e| e.code == OciErrorCode::Toomanyrequests) =>
        {
            Verdict::Retry
        }
        _ => Verdict::Fatal,
    }
}

/// A manifest or index by tag or digest, with its digest header, tried again where
/// registries fail (`retryable`).
pub async fn pull_manifest(
    conn: &Connection,
    at: &ImageRef,
    options: &NetOptions,
) -> Result<(bytes::Bytes, String), OciDistributionError> {
    let reference = at.to_client();
    let what = format!("manifest {at}");
    fetch::with_retries(options, &what, || conn.manifest(&reference), retryable).await
}

/// A 404-like answer: the tag or manifest does not exist.
pub fn is_not_found(e: &OciDistributionError) -> bool {
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => {
            envelope.errors.iter().any(|e| matches!(e.code, OciErrorCode::ManifestUnknown | OciErrorCode::NotFound))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_auth_forms() {
        let auth = STANDARD.encode("alice:s3cret:with:colons");
        let text = format!(
            r#"{{"auths": {{"https://reg.example/v1/": {{"auth": "{auth}"}}, "127.0.0.1:5000": {{"username": "bob", "password": "pw"}}}}}}"#
        );
        let c = parse_docker_config(&text, "reg.example").unwrap().unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("alice", "s3cret:with:colons"));
        let c = parse_docker_config(&text, "127.0.0.1:5000").unwrap().unwrap();
        assert_eq!(c.username, "bob");
        assert!(parse_docker_config(&text, "other.example").unwrap().is_none());
        assert!(!format!("{c:?}").contains("pw"), "credentials are redacted in Debug");
        assert!(parse_docker_config(r#"{"auths": {"x": {"auth": "%%"}}}"#, "x").is_err());
    }
}
