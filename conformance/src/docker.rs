//! Docker access.
//!
//! * [`connect`]: our own bollard client (the one testcontainers re-exports), pinned to
//!   API 1.41 so it talks to Docker Engine 20.10 as well as to newer engines.
//! * [`install_api_proxy`]: testcontainers builds its own bollard client with bollard's
//!   newest API version in every URL (`/v1.53/...`) and never negotiates; an engine
//!   older than that refuses every call ("client version is too new"). When the engine
//!   is older, we start a tiny Unix-socket proxy that rewrites the version prefix of each
//!   request line to the engine's version and point `DOCKER_HOST` at it. Nothing else
//!   in the traffic is touched.
//! * [`cleanup_label`]: removes every container and network carrying a label.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;

use futures::StreamExt;
use testcontainers::bollard::{self, Docker};

use crate::error::{Error, Result};

/// Label on everything the suite creates (value `1`).
pub const LABEL_SUITE: &str = "io.elector.conformance";
/// Label naming the run a container or network belongs to.
pub const LABEL_RUN: &str = "io.elector.conformance.run";
/// Label naming the process (suite invocation) that created it.
pub const LABEL_SESSION: &str = "io.elector.conformance.session";

const PINNED: bollard::ClientVersion = bollard::ClientVersion {
    major_version: 1,
    minor_version: 41,
};

/// Path of the engine's Unix socket (`DOCKER_HOST=unix://...` or the default).
pub fn engine_socket() -> String {
    match std::env::var("CONFORMANCE_ENGINE_SOCKET") {
        Ok(p) => p,
        Err(_) => match std::env::var("DOCKER_HOST") {
            Ok(h) if h.starts_with("unix://") => h.trim_start_matches("unix://").to_string(),
            _ => "/var/run/docker.sock".to_string(),
        },
    }
}

/// Our bollard client, pinned to API 1.41.
pub fn connect() -> Result<Docker> {
    Ok(Docker::connect_with_unix(&engine_socket(), 120, &PINNED)?)
}

/// Asks the engine for its API version with a plain HTTP request (no runtime needed).
pub fn engine_api_version(socket: &str) -> Result<(usize, usize)> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    s.write_all(b"GET /version HTTP/1.0\r\nHost: docker\r\n\r\n")?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .ok_or_else(|| Error::Docker("bad /version reply".into()))?;
    let v: serde_json::Value = serde_json::from_str(body.trim())?;
    let api = v["ApiVersion"]
        .as_str()
        .ok_or_else(|| Error::Docker("no ApiVersion in /version".into()))?;
    parse_version(api).ok_or_else(|| Error::Docker(format!("bad ApiVersion {api}")))
}

fn parse_version(v: &str) -> Option<(usize, usize)> {
    let (a, b) = v.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Streaming byte replacer that keeps a partial match across reads.
#[derive(Debug)]
pub struct Rewriter {
    from: Vec<u8>,
    to: Vec<u8>,
    carry: Vec<u8>,
}

impl Rewriter {
    pub fn new(from: &[u8], to: &[u8]) -> Self {
        Rewriter {
            from: from.to_vec(),
            to: to.to_vec(),
            carry: Vec::new(),
        }
    }

    /// Feeds input; returns what can be forwarded now.
    pub fn feed(&mut self, input: &[u8]) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(input);
        let mut out = Vec::with_capacity(buf.len());
        let mut i = 0;
        while i < buf.len() {
            if buf[i..].starts_with(&self.from) {
                out.extend_from_slice(&self.to);
                i += self.from.len();
            } else if self.from.starts_with(&buf[i..]) {
                // Possible start of a match cut by the read boundary: hold it back.
                self.carry = buf[i..].to_vec();
                return out;
            } else {
                out.push(buf[i]);
                i += 1;
            }
        }
        out
    }

    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.carry)
    }
}

fn pipe(mut from: UnixStream, mut to: UnixStream, mut rw: Option<Rewriter>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let data = match rw.as_mut() {
                    Some(r) => r.feed(&buf[..n]),
                    None => buf[..n].to_vec(),
                };
                if to.write_all(&data).is_err() {
                    break;
                }
            }
        }
    }
    if let Some(r) = rw.as_mut() {
        let _ = to.write_all(&r.finish());
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

/// Starts the version-rewriting proxy when the engine is older than the API version
/// testcontainers' bollard speaks, and points `DOCKER_HOST` at it. Call once, early in
/// `main`, before any thread or runtime starts.
pub fn install_api_proxy() -> Result<Option<PathBuf>> {
    let engine = engine_socket();
    let (maj, min) = engine_api_version(&engine)?;
    let want = bollard::API_DEFAULT_VERSION;
    if (maj, min) >= (want.major_version, want.minor_version) {
        return Ok(None);
    }
    let from = format!(" /v{}.{}/", want.major_version, want.minor_version);
    let to = format!(" /v{maj}.{min}/");
    let path = std::env::temp_dir().join(format!("conformance-docker-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)?;
    let engine_path = engine.clone();
    std::thread::Builder::new()
        .name("docker-api-proxy".into())
        .spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(upstream) = UnixStream::connect(&engine_path) else {
                    continue;
                };
                let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
                    continue;
                };
                let rw = Rewriter::new(from.as_bytes(), to.as_bytes());
                std::thread::spawn(move || pipe(client, upstream, Some(rw)));
                std::thread::spawn(move || pipe(u2, c2, None));
            }
        })?;
    // Safe in edition 2021; called before any other thread reads the environment.
    std::env::set_var("DOCKER_HOST", format!("unix://{}", path.display()));
    std::env::set_var("CONFORMANCE_ENGINE_SOCKET", &engine);
    tracing::debug!(proxy = %path.display(), engine = %format!("{maj}.{min}"), "docker API proxy for testcontainers");
    Ok(Some(path))
}

fn label_filter(label: &str) -> HashMap<String, Vec<String>> {
    HashMap::from([("label".to_string(), vec![label.to_string()])])
}

/// Removes every container (forced) and network that carries `label` (`key` or
/// `key=value`). Returns how many of each were removed.
pub async fn cleanup_label(docker: &Docker, label: &str) -> Result<(usize, usize)> {
    use bollard::query_parameters::{
        ListContainersOptions, ListNetworksOptions, RemoveContainerOptions,
    };
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(label_filter(label)),
            ..Default::default()
        }))
        .await?;
    let mut nc = 0;
    let removals = containers.iter().filter_map(|c| c.id.clone()).map(|id| {
        let docker = docker.clone();
        async move {
            docker
                .remove_container(
                    &id,
                    Some(RemoveContainerOptions {
                        force: true,
                        v: true,
                        ..Default::default()
                    }),
                )
                .await
        }
    });
    for r in futures::stream::iter(removals)
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await
    {
        match r {
            Ok(()) => nc += 1,
            Err(e) => tracing::warn!("container removal: {e}"),
        }
    }
    let networks = docker
        .list_networks(Some(ListNetworksOptions {
            filters: Some(label_filter(label)),
        }))
        .await?;
    let mut nn = 0;
    for n in networks {
        if let Some(id) = n.id.or(n.name) {
            match docker.remove_network(&id).await {
                Ok(()) => nn += 1,
                Err(e) => tracing::warn!("network removal: {e}"),
            }
        }
    }
    Ok((nc, nn))
}

/// Blocking cleanup usable from `Drop` (and from a panic): runs on its own thread with
/// its own small runtime.
pub fn cleanup_label_blocking(label: String) {
    let r = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Io)?;
        rt.block_on(async {
            let docker = connect()?;
            cleanup_label(&docker, &label).await
        })
    })
    .join();
    match r {
        Ok(Ok((c, n))) if c + n > 0 => {
            tracing::info!("cleanup removed {c} containers and {n} networks")
        }
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!("cleanup failed: {e}"),
        Err(_) => tracing::warn!("cleanup thread panicked"),
    }
}

/// A container's whole log (stdout and stderr, with Docker's timestamps).
/// Kept beside a run's report so a failed run can be explained from the
/// elector's own lines (role changes carry their reason), not guessed at.
pub async fn logs(docker: &Docker, container: &str) -> Result<String> {
    use bollard::query_parameters::LogsOptions;
    let mut stream = docker.logs(
        container,
        Some(LogsOptions {
            stdout: true,
            stderr: true,
            timestamps: true,
            ..Default::default()
        }),
    );
    let mut out = String::new();
    while let Some(chunk) = stream.next().await {
        out.push_str(&chunk?.to_string());
    }
    Ok(out)
}

/// Runs a command in a container; returns (exit code, stdout+stderr).
pub async fn exec(docker: &Docker, container: &str, cmd: &[&str]) -> Result<(i64, String)> {
    use bollard::exec::StartExecResults;
    use bollard::models::ExecConfig;
    let created = docker
        .create_exec(
            container,
            ExecConfig {
                cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            },
        )
        .await?;
    let mut out = String::new();
    if let StartExecResults::Attached { mut output, .. } =
        docker.start_exec(&created.id, None).await?
    {
        while let Some(chunk) = output.next().await {
            match chunk {
                Ok(c) => out.push_str(&c.to_string()),
                Err(e) => return Err(e.into()),
            }
        }
    }
    let code = docker
        .inspect_exec(&created.id)
        .await?
        .exit_code
        .unwrap_or(-1);
    Ok((code, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rewriter_replaces_the_version_prefix_even_across_reads() {
        let mut r = Rewriter::new(b" /v1.53/", b" /v1.41/");
        let req = b"GET /v1.53/containers/json HTTP/1.1\r\n\r\nPOST /v1.53/x HTTP/1.1\r\n\r\n";
        for cut in 0..req.len() {
            let mut r2 = Rewriter::new(b" /v1.53/", b" /v1.41/");
            let mut out = r2.feed(&req[..cut]);
            out.extend(r2.feed(&req[cut..]));
            out.extend(r2.finish());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "GET /v1.41/containers/json HTTP/1.1\r\n\r\nPOST /v1.41/x HTTP/1.1\r\n\r\n",
                "cut at {cut}"
            );
        }
        // A request that ends the read is forwarded at once, not held back.
        assert_eq!(r.feed(b"GET /v1.53/_ping HTTP/1.1\r\n\r\n").len(), 29);
        assert!(r.finish().is_empty());
    }

    #[test]
    fn api_versions_parse() {
        assert_eq!(parse_version("1.41"), Some((1, 41)));
        assert_eq!(parse_version("x"), None);
    }
}
