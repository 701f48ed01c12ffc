//! The `s3://bucket/prefix` archive: S3, or an S3-compatible server (MinIO, Ceph RGW,
//! S3Proxy …) at `archive_s3_endpoint`, through the `object_store` crate (request signing,
//! retries, paged listing, multipart upload).
//!
//! `ArchiveTarget` is synchronous and is called from the archiver's own thread and from the
//! `linden archive`/`restore` commands, never from a worker of the server's runtime. The target
//! therefore owns a small current-thread runtime and blocks on it; a call made from inside
//! some other runtime (a test, a future caller) runs on a scoped thread instead of panicking.
//!
//! Settings (`S3Settings::from_config`), in order of precedence for the credentials:
//! `archive_s3_access_key_id` + `archive_s3_secret_access_key` (file, `LINDEN_…` variables or
//! flags), then `archive_s3_credentials_file`, then `AWS_ACCESS_KEY_ID` +
//! `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`). The secret is never shown: not in
//! `describe`, not in messages, not in `Debug`.

use std::future::Future;
use std::path::Path;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, PutPayload, RetryConfig};
use store::persist::archive::{is_data_file, ArchiveError, ArchiveTarget, ArchivedFile};

use super::SettingsError;
use crate::config::{Config, Hidden};

/// Files larger than this go up in parts (a single S3 PUT takes at most 5 GiB); either way the
/// object appears whole or not at all.
const MULTIPART_OVER: usize = 64 << 20;
/// Size of one part of a multipart upload (S3 wants at least 5 MiB for all but the last).
const PART_BYTES: usize = 16 << 20;
/// Longest wait for a connection to the endpoint.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest one request may take (a part of up to `PART_BYTES`, a whole file of up to
/// `MULTIPART_OVER`, or a read back of a snapshot on a slow link).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// Retries of one request inside `object_store` (the archiver retries whole rounds with its
/// own backoff on top, and says so).
const RETRIES: usize = 3;
const RETRY_TIMEOUT: Duration = Duration::from_secs(30);

/// The settings of an `s3://` archive, resolved from the configuration and the environment.
pub struct S3Settings {
    pub bucket: String,
    /// The key prefix, without leading or trailing `/` ("" for the bucket's top).
    pub prefix: String,
    /// The endpoint of an S3-compatible server; `None`: AWS.
    pub endpoint: Option<String>,
    pub region: String,
    pub access_key_id: String,
    secret_access_key: Hidden,
    session_token: Option<Hidden>,
    pub allow_http: bool,
    /// Where the credentials came from, for the start's log line.
    pub credentials_from: String,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("credentials_from", &self.credentials_from)
            .finish_non_exhaustive()
    }
}

fn bad(key: &'static str, message: String) -> SettingsError {
    SettingsError { key, message }
}

/// Whether `host` (as written in a URL: `127.0.0.1`, `[::1]`, `localhost`) is a loopback
/// address.
fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The host of an `http(s)://host[:port][/…]` URL.
fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    if authority.starts_with('[') {
        return authority.split_inclusive(']').next();
    }
    Some(authority.split(':').next().unwrap_or(authority)).filter(|h| !h.is_empty())
}

/// A bucket name as S3 allows it: 3 to 63 lower-case letters, digits, dots and hyphens,
/// starting and ending with a letter or digit.
fn valid_bucket(b: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-';
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (3..=63).contains(&b.len())
        && b.chars().all(ok_char)
        && edge(b.chars().next())
        && edge(b.chars().last())
}

/// What a credentials file holds.
#[derive(Default)]
struct FileCredentials {
    key_id: Option<String>,
    secret: Option<String>,
    token: Option<String>,
}

/// Reads a credentials file: AWS's shared credentials format (`[default]` then
/// `aws_access_key_id = …`, `aws_secret_access_key = …`, optionally `aws_session_token = …`),
/// or the same `key = value` lines with no section. The section read is `profile` (AWS_PROFILE,
/// else `default`); lines before any section count too. `#` and `;` start comments.
fn parse_credentials(text: &str, profile: &str) -> FileCredentials {
    let mut out = FileCredentials::default();
    let mut in_profile = true;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let section = section.trim();
            let section = section.strip_prefix("profile ").unwrap_or(section).trim();
            in_profile = section == profile;
            continue;
        }
        if !in_profile {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"').trim_matches('\'').to_string();
        match k.trim().to_ascii_lowercase().as_str() {
            "aws_access_key_id" => out.key_id = Some(v),
            "aws_secret_access_key" => out.secret = Some(v),
            "aws_session_token" => out.token = Some(v),
            _ => {}
        }
    }
    out
}

impl S3Settings {
    /// The settings of `config.archive` (an `s3://` URL), with `env` for the AWS_* variables.
    /// Every problem names the key to change.
    pub fn from_config(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<S3Settings, SettingsError> {
        let url = config.archive.as_str();
        let rest = url.strip_prefix("s3://").ok_or_else(|| {
            bad(
                "archive",
                format!("'{url}' is not an s3:// URL (s3://bucket/prefix)"),
            )
        })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if !valid_bucket(bucket) {
            return Err(bad(
                "archive",
                format!(
                    "'{url}': '{bucket}' is not a bucket name (3 to 63 lower-case letters, digits, dots and hyphens): write s3://bucket/prefix"
                ),
            ));
        }
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty() {
            if let Err(e) = ObjectPath::parse(prefix) {
                return Err(bad(
                    "archive",
                    format!("'{url}': the prefix '{prefix}' cannot be used as an object key prefix ({e})"),
                ));
            }
        }
        let non_empty = |s: Option<String>| s.filter(|v| !v.trim().is_empty());

        let endpoint = non_empty(Some(config.archive_s3_endpoint.clone()))
            .map(|e| ("archive_s3_endpoint", e))
            .or_else(|| non_empty(env("AWS_ENDPOINT_URL_S3")).map(|e| ("AWS_ENDPOINT_URL_S3", e)))
            .or_else(|| non_empty(env("AWS_ENDPOINT_URL")).map(|e| ("AWS_ENDPOINT_URL", e)));
        let mut endpoint_url = None;
        if let Some((from, e)) = endpoint {
            let e = e.trim().trim_end_matches('/').to_string();
            let plain = e.starts_with("http://");
            if !(plain || e.starts_with("https://")) {
                return Err(bad(
                    "archive_s3_endpoint",
                    format!("'{e}' (from {from}) is not an http:// or https:// URL (e.g. https://minio.example.com:9000)"),
                ));
            }
            let Some(host) = host_of(&e) else {
                return Err(bad(
                    "archive_s3_endpoint",
                    format!("'{e}' (from {from}) names no host"),
                ));
            };
            if plain && !is_loopback(host) && !config.archive_s3_allow_http {
                return Err(bad(
                    "archive_s3_allow_http",
                    format!(
                        "the endpoint '{e}' (from {from}) is plain HTTP to {host}, which is not a loopback address: the archive's data would cross the network unencrypted. Use https://, or set archive_s3_allow_http = true if that network is trusted"
                    ),
                ));
            }
            endpoint_url = Some(e);
        }
        let allow_http = endpoint_url
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"));

        let region = non_empty(Some(config.archive_s3_region.clone()))
            .or_else(|| non_empty(env("AWS_REGION")))
            .or_else(|| non_empty(env("AWS_DEFAULT_REGION")))
            .unwrap_or_else(|| "us-east-1".to_string());

        // The credentials: the keys, then the file, then AWS_*.
        let key_id = non_empty(Some(config.archive_s3_access_key_id.clone()));
        let secret = config.archive_s3_secret_access_key.clone();
        let (key_id, secret, token, from) = match (key_id, secret) {
            (Some(k), Some(s)) => (k, s, None, "archive_s3_access_key_id and archive_s3_secret_access_key".to_string()),
            (Some(_), None) => {
                return Err(bad(
                    "archive_s3_secret_access_key",
                    format!("archive {url}: archive_s3_access_key_id is set but archive_s3_secret_access_key is not: set both (or neither, to use archive_s3_credentials_file or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"),
                ))
            }
            (None, Some(_)) => {
                return Err(bad(
                    "archive_s3_access_key_id",
                    format!("archive {url}: archive_s3_secret_access_key is set but archive_s3_access_key_id is not: set both"),
                ))
            }
            (None, None) => match &config.archive_s3_credentials_file {
                Some(path) => {
                    let c = read_credentials_file(path, env)?;
                    (c.0, c.1, c.2, format!("archive_s3_credentials_file {}", path.display()))
                }
                None => match (non_empty(env("AWS_ACCESS_KEY_ID")), non_empty(env("AWS_SECRET_ACCESS_KEY"))) {
                    (Some(k), Some(s)) => (
                        k,
                        Hidden(s),
                        non_empty(env("AWS_SESSION_TOKEN")).map(Hidden),
                        "the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)".to_string(),
                    ),
                    (Some(_), None) | (None, Some(_)) => {
                        return Err(bad(
                            "archive_s3_access_key_id",
                            format!("archive {url}: only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set in the environment: set both, or archive_s3_access_key_id and archive_s3_secret_access_key, or archive_s3_credentials_file"),
                        ))
                    }
                    (None, None) => {
                        return Err(bad(
                            "archive_s3_access_key_id",
                            format!("archive {url} has no credentials: set archive_s3_access_key_id and archive_s3_secret_access_key, or archive_s3_credentials_file, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"),
                        ))
                    }
                },
            },
        };
        Ok(S3Settings {
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            endpoint: endpoint_url,
            region,
            access_key_id: key_id,
            secret_access_key: secret,
            session_token: token,
            allow_http,
            credentials_from: from,
        })
    }

    /// The archive as its URL says, with the endpoint when it is not AWS (no secrets).
    pub fn describe(&self) -> String {
        let mut d = format!("s3://{}", self.bucket);
        if !self.prefix.is_empty() {
            d.push('/');
            d.push_str(&self.prefix);
        }
        if let Some(e) = &self.endpoint {
            d.push_str(&format!(" at {e}"));
        }
        d
    }
}

/// (key id, secret, session token) from `archive_s3_credentials_file`.
fn read_credentials_file(
    path: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(String, Hidden, Option<Hidden>), SettingsError> {
    let key = "archive_s3_credentials_file";
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad(
            key,
            format!("{}: cannot read the credentials file: {e}", path.display()),
        )
    })?;
    let profile = env("AWS_PROFILE")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let c = parse_credentials(&text, &profile);
    let missing = |what: &str| {
        bad(
            key,
            format!(
                "{}: no {what} in it (write `aws_access_key_id = …` and `aws_secret_access_key = …`, at the top or under [{profile}])",
                path.display()
            ),
        )
    };
    let key_id = c
        .key_id
        .filter(|v| !v.is_empty())
        .ok_or_else(|| missing("aws_access_key_id"))?;
    let secret = c
        .secret
        .filter(|v| !v.is_empty())
        .ok_or_else(|| missing("aws_secret_access_key"))?;
    Ok((
        key_id,
        Hidden(secret),
        c.token.filter(|t| !t.is_empty()).map(Hidden),
    ))
}

/// An archive in an S3 bucket (or an S3-compatible server's), under a key prefix.
pub struct S3Target {
    store: AmazonS3,
    /// Runs the requests; `None` only while the target is dropped.
    rt: Option<tokio::runtime::Runtime>,
    describe: String,
    prefix: String,
    multipart_over: usize,
    part_bytes: usize,
}

impl Drop for S3Target {
    fn drop(&mut self) {
        // A runtime may not be dropped (waiting for its tasks) inside another one.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl S3Target {
    pub fn new(s: &S3Settings) -> Result<S3Target, SettingsError> {
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            max_retries: RETRIES,
            retry_timeout: RETRY_TIMEOUT,
        };
        let options = ClientOptions::new()
            .with_allow_http(s.allow_http)
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT);
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(&s.bucket)
            .with_region(&s.region)
            .with_access_key_id(&s.access_key_id)
            .with_secret_access_key(&s.secret_access_key.0)
            .with_retry(retry)
            .with_client_options(options);
        if let Some(t) = &s.session_token {
            b = b.with_token(&t.0);
        }
        if let Some(e) = &s.endpoint {
            // S3-compatible servers are addressed by path (endpoint/bucket/key).
            b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
        }
        let describe = s.describe();
        let store = b.build().map_err(|e| {
            bad(
                "archive",
                format!("archive {describe}: cannot use these S3 settings: {e}"),
            )
        })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("linden-archive-s3")
            .build()
            .map_err(|e| {
                bad(
                    "archive",
                    format!("archive {describe}: cannot start the runtime of its client: {e}"),
                )
            })?;
        Ok(S3Target {
            store,
            rt: Some(rt),
            describe,
            prefix: s.prefix.clone(),
            multipart_over: MULTIPART_OVER,
            part_bytes: PART_BYTES,
        })
    }

    /// Sends files larger than `over` bytes in parts of `part` bytes (tests use small ones;
    /// S3 itself wants parts of at least 5 MiB).
    pub fn with_multipart(mut self, over: usize, part: usize) -> S3Target {
        self.multipart_over = over;
        self.part_bytes = part.max(1);
        self
    }

    fn path(&self, name: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(name)
        } else {
            ObjectPath::from(format!("{}/{name}", self.prefix))
        }
    }

    /// Runs `f` to completion on the target's runtime.
    fn run<T: Send>(
        &self,
        f: impl Future<Output = object_store::Result<T>> + Send,
    ) -> object_store::Result<T> {
        let Some(rt) = self.rt.as_ref() else {
            // The runtime is taken in `drop` only.
            return Err(object_store::Error::Generic {
                store: "S3",
                source: "the archive's client is shutting down".into(),
            });
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Blocking inside a runtime's worker is not allowed: use a thread of our own.
            std::thread::scope(|scope| {
                scope
                    .spawn(|| rt.block_on(f))
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        } else {
            rt.block_on(f)
        }
    }

    fn err(&self, file: &str, e: object_store::Error) -> ArchiveError {
        let kind = match e {
            object_store::Error::NotFound { .. } => std::io::ErrorKind::NotFound,
            _ => std::io::ErrorKind::Other,
        };
        let text = e.to_string().replace('\n', " ");
        let hint = if text.contains("403") || text.contains("SignatureDoesNotMatch") {
            " (access denied: check the credentials — archive_s3_access_key_id, archive_s3_credentials_file or AWS_ACCESS_KEY_ID — and that they may write the bucket)"
        } else if text.contains("NoSuchBucket") {
            " (the bucket does not exist: create it, or correct the bucket in archive)"
        } else if text.contains("error sending request")
            || text.contains("onnect")
            || text.contains("timed out")
        {
            " (the endpoint does not answer: check archive_s3_endpoint, archive_s3_region and the network)"
        } else {
            ""
        };
        ArchiveError::Io {
            archive: self.describe.clone(),
            file: file.to_string(),
            source: std::io::Error::new(kind, format!("{text}{hint}")),
        }
    }

    async fn put_parts(&self, path: &ObjectPath, data: &[u8]) -> object_store::Result<()> {
        let mut upload = self.store.put_multipart(path).await?;
        let bytes = bytes::Bytes::copy_from_slice(data);
        let mut at = 0;
        while at < bytes.len() {
            let end = (at + self.part_bytes).min(bytes.len());
            if let Err(e) = upload
                .put_part(PutPayload::from(bytes.slice(at..end)))
                .await
            {
                let _ = upload.abort().await;
                return Err(e);
            }
            at = end;
        }
        match upload.complete().await {
            Ok(_) => Ok(()),
            Err(e) => {
                let _ = upload.abort().await;
                Err(e)
            }
        }
    }
}

impl ArchiveTarget for S3Target {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn list(&self) -> Result<Vec<ArchivedFile>, ArchiveError> {
        let prefix = (!self.prefix.is_empty()).then(|| ObjectPath::from(self.prefix.as_str()));
        let under = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        // The listing comes in pages (1,000 keys each on S3), streamed.
        let listed = self.run(async {
            let mut stream = self.store.list(prefix.as_ref());
            let mut out = Vec::new();
            while let Some(meta) = stream.next().await {
                let meta = meta?;
                let Some(name) = meta.location.as_ref().strip_prefix(under.as_str()) else {
                    continue;
                };
                if name.contains('/') || !is_data_file(name) {
                    continue;
                }
                out.push(ArchivedFile {
                    name: name.to_string(),
                    size: meta.size,
                    modified: SystemTime::from(meta.last_modified),
                });
            }
            Ok::<_, object_store::Error>(out)
        });
        let mut out = listed.map_err(|e| self.err(".", e))?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn put(&self, name: &str, data: &[u8]) -> Result<(), ArchiveError> {
        let path = self.path(name);
        let r = self.run(async {
            if data.len() > self.multipart_over {
                self.put_parts(&path, data).await
            } else {
                let payload = PutPayload::from(bytes::Bytes::copy_from_slice(data));
                self.store.put(&path, payload).await.map(|_| ())
            }
        });
        r.map_err(|e| self.err(name, e))
    }

    fn get(&self, name: &str) -> Result<Vec<u8>, ArchiveError> {
        let path = self.path(name);
        let r = self.run(async {
            let got = self.store.get(&path).await?;
            got.bytes().await
        });
        r.map(|b| b.to_vec()).map_err(|e| self.err(name, e))
    }

    fn delete(&self, name: &str) -> Result<(), ArchiveError> {
        let path = self.path(name);
        match self.run(self.store.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(name, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn config(url: &str) -> Config {
        Config {
            archive: url.to_string(),
            ..Config::default()
        }
    }

    #[test]
    fn urls_buckets_and_prefixes() {
        let env = env_of(&[("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")]);
        let s = S3Settings::from_config(&config("s3://my-bucket/a/b/"), &env).expect("valid");
        assert_eq!((s.bucket.as_str(), s.prefix.as_str()), ("my-bucket", "a/b"));
        assert_eq!(s.region, "us-east-1");
        assert_eq!(s.describe(), "s3://my-bucket/a/b");
        let s = S3Settings::from_config(&config("s3://my-bucket"), &env).expect("valid");
        assert_eq!(s.prefix, "");
        for url in ["s3://", "s3://B/x", "s3://a/x", "s3://-ab/x"] {
            let e = S3Settings::from_config(&config(url), &env).expect_err(url);
            assert_eq!(e.key, "archive", "{url}: {e}");
            assert!(e.to_string().contains("not a bucket name"), "{e}");
        }
        let e = S3Settings::from_config(&config("s3://bucket/a/../b"), &env).expect_err("dots");
        assert!(e.to_string().contains("prefix"), "{e}");
    }

    #[test]
    fn plain_http_only_to_loopback_or_when_allowed() {
        let env = env_of(&[("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")]);
        let mut c = config("s3://bucket/p");
        for ok in [
            "http://127.0.0.1:9000",
            "http://localhost:9000/",
            "http://[::1]:9000",
            "https://minio.example.com",
        ] {
            c.archive_s3_endpoint = ok.into();
            let s = S3Settings::from_config(&c, &env).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert_eq!(s.allow_http, ok.starts_with("http:"), "{ok}");
        }
        c.archive_s3_endpoint = "http://minio.example.com:9000".into();
        let e = S3Settings::from_config(&c, &env).expect_err("plain http");
        assert_eq!(e.key, "archive_s3_allow_http");
        assert!(e.to_string().starts_with("archive_s3_allow_http: "), "{e}");
        c.archive_s3_allow_http = true;
        S3Settings::from_config(&c, &env).expect("allowed");
        c.archive_s3_endpoint = "minio:9000".into();
        let e = S3Settings::from_config(&c, &env).expect_err("no scheme");
        assert_eq!(e.key, "archive_s3_endpoint");
        // The endpoint and region also come from the environment.
        let c = config("s3://bucket/p");
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "k"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:1"),
            ("AWS_DEFAULT_REGION", "eu-west-3"),
        ]);
        let s = S3Settings::from_config(&c, &env).expect("valid");
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:1"));
        assert_eq!(s.region, "eu-west-3");
    }

    #[test]
    fn credentials_precedence_and_messages() {
        let tmp = tempfile::tempdir().expect("tmp");
        let file = tmp.path().join("credentials");
        std::fs::write(
            &file,
            "# AWS style\n[other]\naws_access_key_id = nope\n[default]\naws_access_key_id = FROMFILE\naws_secret_access_key = \"file-secret\"\n",
        )
        .expect("write");
        let env = env_of(&[
            ("AWS_ACCESS_KEY_ID", "FROMENV"),
            ("AWS_SECRET_ACCESS_KEY", "env-secret"),
        ]);
        let mut c = config("s3://bucket/p");
        // The environment alone.
        let s = S3Settings::from_config(&c, &env).expect("env");
        assert_eq!(s.access_key_id, "FROMENV");
        // The file before the environment.
        c.archive_s3_credentials_file = Some(file.clone());
        let s = S3Settings::from_config(&c, &env).expect("file");
        assert_eq!(s.access_key_id, "FROMFILE");
        assert_eq!(s.secret_access_key.0, "file-secret");
        // The keys before both.
        c.archive_s3_access_key_id = "FROMKEYS".into();
        c.archive_s3_secret_access_key = Some(Hidden("key-secret".into()));
        let s = S3Settings::from_config(&c, &env).expect("keys");
        assert_eq!(s.access_key_id, "FROMKEYS");
        assert!(!format!("{s:?}").contains("key-secret"), "{s:?}");
        // Half of a pair names the other half.
        c.archive_s3_secret_access_key = None;
        let e = S3Settings::from_config(&c, &env).expect_err("half");
        assert_eq!(e.key, "archive_s3_secret_access_key");
        // A plain key = value file, with a section named by AWS_PROFILE elsewhere.
        std::fs::write(
            &file,
            "aws_access_key_id=PLAIN\naws_secret_access_key=plain\n",
        )
        .expect("write");
        let c2 = Config {
            archive_s3_credentials_file: Some(file.clone()),
            ..config("s3://bucket/p")
        };
        let s = S3Settings::from_config(&c2, &env_of(&[])).expect("plain file");
        assert_eq!(s.access_key_id, "PLAIN");
        std::fs::write(&file, "[default]\naws_access_key_id = X\n").expect("write");
        let e = S3Settings::from_config(&c2, &env_of(&[])).expect_err("no secret");
        assert_eq!(e.key, "archive_s3_credentials_file");
        assert!(e.to_string().contains("no aws_secret_access_key"), "{e}");
        let c3 = Config {
            archive_s3_credentials_file: Some(tmp.path().join("absent")),
            ..config("s3://bucket/p")
        };
        let e = S3Settings::from_config(&c3, &env_of(&[])).expect_err("absent");
        assert!(
            e.to_string().contains("cannot read the credentials file"),
            "{e}"
        );
        // None at all.
        let e = S3Settings::from_config(&config("s3://bucket/p"), &env_of(&[])).expect_err("none");
        assert_eq!(e.key, "archive_s3_access_key_id");
        assert!(e.to_string().contains("has no credentials"), "{e}");
    }

    #[test]
    fn a_target_used_inside_a_runtime_does_not_panic() {
        // Nothing listens on port 1: the call fails (quickly), it does not panic.
        let env = env_of(&[("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")]);
        let c = Config {
            archive_s3_endpoint: "http://127.0.0.1:1".into(),
            ..config("s3://bucket/p")
        };
        let s = S3Settings::from_config(&c, &env).expect("valid");
        let t = S3Target::new(&s).expect("target");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        let e = rt
            .block_on(async { t.list() })
            .expect_err("nothing listens");
        assert!(
            e.to_string()
                .contains("s3://bucket/p at http://127.0.0.1:1"),
            "{e}"
        );
        drop(rt);
        drop(t);
    }
}
