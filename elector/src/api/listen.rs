//! IPv6-first TCP listeners.
//!
//! Listeners must not be IPv4-only by default (seed 003): a spec without an IP
//! (`":9300"`) binds `[::]` with `IPV6_V6ONLY` off, so one socket serves both
//! families; on a host without IPv6 it falls back to `0.0.0.0`. An explicit IP
//! binds exactly that family (`"0.0.0.0:9300"` is IPv4 only, `"[::1]:9300"`
//! IPv6 only), because an operator who names an address means it. The one
//! exception is `"[::]:PORT"`, the conventional spelling of "all addresses":
//! it is dual-stack too, but never falls back, since IPv6 was asked for.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use socket2::{Domain, Protocol, Socket, Type};

/// What a listen spec asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListenSpec {
    /// `":PORT"`: dual-stack `[::]`, IPv4 `0.0.0.0` if IPv6 is unavailable.
    Any(u16),
    /// `"[::]:PORT"`: dual-stack `[::]`, no fallback.
    AnyV6(u16),
    /// Any other address: exactly that address and family.
    Exact(SocketAddr),
}

fn invalid(spec: &str, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("listen address {spec:?}: {why}"),
    )
}

/// Parses `":PORT"`, `"IP:PORT"`, `"[IPv6]:PORT"` or `"name:PORT"` (resolved
/// now, first address wins).
pub(crate) fn parse_listen_spec(spec: &str) -> io::Result<ListenSpec> {
    let spec = spec.trim();
    if let Some(port) = spec.strip_prefix(':') {
        let port = port.parse().map_err(|_| invalid(spec, "bad port"))?;
        return Ok(ListenSpec::Any(port));
    }
    if let Ok(addr) = spec.parse::<SocketAddr>() {
        if addr.ip() == IpAddr::V6(Ipv6Addr::UNSPECIFIED) {
            return Ok(ListenSpec::AnyV6(addr.port()));
        }
        return Ok(ListenSpec::Exact(addr));
    }
    if !spec.contains(':') {
        return Err(invalid(spec, "expected HOST:PORT or :PORT"));
    }
    let addr = spec
        .to_socket_addrs()
        .map_err(|e| invalid(spec, &e.to_string()))?
        .next()
        .ok_or_else(|| invalid(spec, "name resolves to no address"))?;
    Ok(ListenSpec::Exact(addr))
}

/// Binds a non-blocking listening socket. `dual_stack` applies to IPv6 only.
fn bind_std(addr: SocketAddr, dual_stack: bool) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(!dual_stack)?;
    }
    // Lets a restarted elector rebind at once despite connections in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Errors that mean "this host has no usable IPv6", as opposed to "the port is
/// taken" or "not allowed", which must not be papered over by a fallback.
fn ipv6_unavailable(e: &io::Error) -> bool {
    !matches!(
        e.kind(),
        io::ErrorKind::AddrInUse | io::ErrorKind::PermissionDenied
    )
}

/// Binds a std listener for `spec` (see the module docs for the rules).
pub(crate) fn bind_tcp_std(spec: &str) -> io::Result<std::net::TcpListener> {
    match parse_listen_spec(spec)? {
        ListenSpec::Any(port) => {
            let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port);
            match bind_std(v6, true) {
                Ok(l) => Ok(l),
                Err(e) if ipv6_unavailable(&e) => {
                    tracing::info!(spec, error = %e, "dual-stack IPv6 listener unavailable, falling back to IPv4");
                    bind_std(
                        SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
                        false,
                    )
                }
                Err(e) => Err(e),
            }
        }
        ListenSpec::AnyV6(port) => bind_std(
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
            true,
        ),
        ListenSpec::Exact(addr) => bind_std(addr, false),
    }
}

/// Binds a tokio listener for `spec`. Must be called inside a tokio runtime.
pub(crate) fn bind_tcp(spec: &str) -> io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::from_std(bind_tcp_std(spec)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_has_ipv6() -> bool {
        std::net::TcpListener::bind("[::1]:0").is_ok()
    }

    async fn accepts_from(listener: &tokio::net::TcpListener, target: SocketAddr) -> bool {
        let connect = tokio::net::TcpStream::connect(target);
        let accept = listener.accept();
        let both = async { tokio::join!(connect, accept) };
        matches!(
            tokio::time::timeout(std::time::Duration::from_secs(5), both).await,
            Ok((Ok(_), Ok(_)))
        )
    }

    #[test]
    fn specs_parse_into_the_expected_kinds() {
        assert_eq!(parse_listen_spec(":9300").ok(), Some(ListenSpec::Any(9300)));
        assert_eq!(
            parse_listen_spec("[::]:9300").ok(),
            Some(ListenSpec::AnyV6(9300))
        );
        assert_eq!(
            parse_listen_spec("0.0.0.0:1").ok(),
            Some(ListenSpec::Exact("0.0.0.0:1".parse().expect("addr")))
        );
        assert_eq!(
            parse_listen_spec("[::1]:2").ok(),
            Some(ListenSpec::Exact("[::1]:2".parse().expect("addr")))
        );
        assert!(parse_listen_spec("9300").is_err());
        assert!(parse_listen_spec(":http").is_err());
        assert!(parse_listen_spec(":70000").is_err());
    }

    #[tokio::test]
    async fn a_port_only_spec_accepts_both_ipv4_and_ipv6_clients() {
        let listener = bind_tcp(":0").expect("bind :0");
        let port = listener.local_addr().expect("local addr").port();
        assert!(accepts_from(&listener, SocketAddr::from(([127, 0, 0, 1], port))).await);
        if host_has_ipv6() {
            assert!(listener.local_addr().expect("addr").is_ipv6());
            let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port);
            assert!(accepts_from(&listener, v6).await);
        }
    }

    #[tokio::test]
    async fn an_explicit_ipv4_address_binds_ipv4_only() {
        let listener = bind_tcp("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        assert!(addr.is_ipv4());
        assert!(accepts_from(&listener, addr).await);
        if host_has_ipv6() {
            let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), addr.port());
            assert!(tokio::net::TcpStream::connect(v6).await.is_err());
        }
    }

    #[tokio::test]
    async fn an_explicit_ipv6_address_binds_ipv6_only() {
        if !host_has_ipv6() {
            return;
        }
        let listener = bind_tcp("[::1]:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        assert!(addr.is_ipv6());
        assert!(accepts_from(&listener, addr).await);
        let v4 = SocketAddr::from(([127, 0, 0, 1], addr.port()));
        assert!(tokio::net::TcpStream::connect(v4).await.is_err());
    }

    #[tokio::test]
    async fn a_taken_port_is_an_error_not_a_silent_fallback() {
        let first = bind_tcp(":0").expect("bind");
        let port = first.local_addr().expect("addr").port();
        let err = bind_tcp(&format!(":{port}")).expect_err("port is taken");
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    }
}
