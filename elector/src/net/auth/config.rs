//! The `auth:` section of the configuration and the key it names.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::{read_secret_file, SecretFileError};

/// The shortest shared key accepted: an HMAC key shorter than this can be
/// guessed offline from one captured frame.
pub const MIN_KEY_BYTES: usize = 16;

/// Default tolerated clock difference between nodes.
pub const DEFAULT_MAX_SKEW_MS: u64 = 30_000;

/// `auth.mode`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// No authentication (lab use only; `check-config` warns).
    #[default]
    None,
    /// Every election message and API write carries an HMAC-SHA256 with
    /// the cluster's shared key.
    SharedKey,
}

/// A secret string that never prints.
#[derive(Clone, Deserialize, Serialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    #[cfg(test)]
    pub(crate) fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// A secret read from a file (`data_node.password_file`).
    pub(crate) fn from_string(s: String) -> Self {
        Secret(s)
    }

    pub(crate) fn expose(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

/// The `auth:` section of the config.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// `none` or `shared_key`.
    #[serde(default)]
    pub mode: AuthMode,
    /// The shared key itself (`shared_key`), at least 16 bytes; inline, it
    /// is for labs (a warning says so): prefer `key_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub key: Option<Secret>,
    /// A file holding the shared key (at least 16 bytes; its trailing
    /// newline is not part of it), readable by the elector's user alone
    /// (mode 0600 or 0400): a file its group or others can read is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// Largest accepted difference between a frame's timestamp and ours.
    #[serde(default = "default_skew")]
    pub(crate) max_skew_ms: u64,
}

fn default_skew() -> u64 {
    DEFAULT_MAX_SKEW_MS
}

/// As an absent `auth:` section reads: no authentication, the default skew
/// (a derived `Default` would give a skew of 0, which `render-config` would
/// then write out).
impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            mode: AuthMode::None,
            key: None,
            key_file: None,
            max_skew_ms: DEFAULT_MAX_SKEW_MS,
        }
    }
}

/// Why an `auth:` section cannot be used. Messages name the problem, never
/// the key.
#[derive(Debug, Error)]
pub enum AuthConfigError {
    #[error("auth.mode shared_key needs auth.key or auth.key_file")]
    MissingKey,
    #[error("auth.key and auth.key_file are both set; use one")]
    KeyAndKeyFile,
    #[error("auth key is empty")]
    EmptyKey,
    #[error("auth key is {0} bytes: at least {MIN_KEY_BYTES} are needed (for example `openssl rand -hex 32`)")]
    TooShort(usize),
    #[error(transparent)]
    KeyFile(#[from] SecretFileError),
}

impl AuthConfig {
    /// The key bytes for `shared_key`, `None` for mode `none`. A key file's
    /// trailing newline is not part of the key (editors and `echo` add one);
    /// the file must be readable by its owner alone ([`read_secret_file`]).
    pub fn load_key(&self) -> Result<Option<Secret>, AuthConfigError> {
        if self.mode == AuthMode::None {
            return Ok(None);
        }
        let key = match (&self.key, &self.key_file) {
            (Some(_), Some(_)) => return Err(AuthConfigError::KeyAndKeyFile),
            (None, None) => return Err(AuthConfigError::MissingKey),
            (Some(k), None) => k.clone(),
            (None, Some(path)) => Secret(read_secret_file("auth.key_file", path)?),
        };
        if key.0.is_empty() {
            return Err(AuthConfigError::EmptyKey);
        }
        if key.0.len() < MIN_KEY_BYTES {
            return Err(AuthConfigError::TooShort(key.0.len()));
        }
        Ok(Some(key))
    }

    /// Non-fatal advice for `elector check-config`.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        match self.mode {
            AuthMode::None => {
                w.push(
                    "auth.mode is none: election messages are not authenticated (lab use only)"
                        .into(),
                );
                if self.key.is_some() || self.key_file.is_some() {
                    w.push("auth.key/key_file is set but ignored because auth.mode is none".into());
                }
            }
            AuthMode::SharedKey => {
                if self.key.is_some() {
                    w.push(
                        "auth.key is inline in the config file (lab use only): put it in auth.key_file, mode 0600, owned by the elector's user"
                            .into(),
                    );
                }
            }
        }
        w
    }
}
