//! Library error type.

use thiserror::Error;

/// Everything the conformance library can fail with.
#[derive(Debug, Error)]
pub enum Error {
    #[error("scenario {file}: {message}")]
    Scenario { file: String, message: String },
    #[error("invalid duration {0:?} (use e.g. 500ms, 2s, 1.5s or a number of milliseconds)")]
    Duration(String),
    #[error("invalid target {0:?}")]
    Target(String),
    #[error("docker: {0}")]
    Docker(String),
    #[error("testcontainers: {0}")]
    Testcontainers(String),
    #[error("cluster: {0}")]
    Cluster(String),
    #[error("step {step} failed: {message}")]
    Step { step: String, message: String },
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("yaml: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

impl From<testcontainers::bollard::errors::Error> for Error {
    fn from(e: testcontainers::bollard::errors::Error) -> Self {
        Error::Docker(e.to_string())
    }
}

impl From<testcontainers::TestcontainersError> for Error {
    fn from(e: testcontainers::TestcontainersError) -> Self {
        Error::Testcontainers(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
