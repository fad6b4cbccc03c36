//! The listener over TCP: raw RESP bytes and the `redis` crate's clients.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::reply::{Protocol, Reply};
use super::{run_id, serve, ClusterView, NodeAddr};

fn addr(id: &str, port: u16) -> NodeAddr {
    NodeAddr {
        id: id.into(),
        host: "127.0.0.1".into(),
        port,
    }
}

fn view(primary: Option<NodeAddr>, replicas: Vec<(NodeAddr, bool)>) -> ClusterView {
    ClusterView {
        master_name: "mymaster".into(),
        epoch: 3,
        primary,
        replicas,
        sentinels: vec![addr("n2", 26402), addr("n3", 26403)],
        quorum: 2,
        down_after_ms: 5000,
    }
}

struct Running {
    addr: SocketAddr,
    view: watch::Sender<ClusterView>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start(initial: ClusterView) -> Running {
    let listener = crate::api::listen::bind_tcp("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = watch::channel(initial);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, None, "n1".into(), rx, async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        view: tx,
        _stop: stop,
    }
}

/// A stand-in data node: answers `ROLE` as a master (what the `redis`
/// crate checks after asking the sentinel), `INFO` with its id, and OK to
/// anything else.
async fn fake_data_node(id: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    while let Ok(Some((fields, used))) =
                        crate::net::codec::decode(&buf, &crate::net::codec::Limits::default())
                    {
                        buf.drain(..used);
                        let reply = match String::from_utf8_lossy(&fields[0])
                            .to_ascii_lowercase()
                            .as_str()
                        {
                            "role" => Reply::Array(vec![
                                Reply::bulk("master"),
                                Reply::Int(0),
                                Reply::Array(vec![]),
                            ]),
                            "info" => Reply::bulk(format!("node:{id}")),
                            _ => Reply::ok(),
                        };
                        let mut out = Vec::new();
                        reply.encode(&mut out, Protocol::Resp2);
                        if s.write_all(&out).await.is_err() {
                            return;
                        }
                    }
                    match s.read_buf(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    port
}

/// Sends one command as RESP and reads the raw reply bytes until `done`
/// says the reply is complete.
async fn raw(stream: &mut TcpStream, cmd: &[&str]) -> Vec<u8> {
    let fields: Vec<&[u8]> = cmd.iter().map(|s| s.as_bytes()).collect();
    let mut out = Vec::new();
    crate::net::codec::encode(&fields, &mut out);
    stream.write_all(&out).await.expect("write");
    read_some(stream).await
}

async fn read_some(stream: &mut TcpStream) -> Vec<u8> {
    let mut buf = vec![0u8; 65536];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .expect("reply in time")
        .expect("read");
    buf.truncate(n);
    buf
}

#[tokio::test]
async fn raw_resp_ping_and_get_master_addr_by_name() {
    let r = start(view(Some(addr("n1", 6001)), vec![])).await;
    let mut s = TcpStream::connect(r.addr).await.expect("connect");
    assert_eq!(raw(&mut s, &["PING"]).await, b"+PONG\r\n");
    assert_eq!(
        raw(&mut s, &["SENTINEL", "get-master-addr-by-name", "mymaster"]).await,
        b"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6001\r\n"
    );
    assert_eq!(
        raw(&mut s, &["sentinel", "GET-MASTER-ADDR-BY-NAME", "other"]).await,
        b"*-1\r\n"
    );
    r.view.send_modify(|v| v.primary = None);
    assert_eq!(
        raw(&mut s, &["SENTINEL", "get-master-addr-by-name", "mymaster"]).await,
        b"*-1\r\n",
        "no primary during an election"
    );
    let unknown = raw(&mut s, &["FLUSHALL"]).await;
    assert!(
        unknown.starts_with(b"-ERR unknown command 'FLUSHALL'"),
        "{unknown:?}"
    );
    let refused = raw(&mut s, &["SENTINEL", "failover", "mymaster"]).await;
    assert!(refused.starts_with(b"-ERR SENTINEL failover is not supported"));
    let myid = raw(&mut s, &["SENTINEL", "myid"]).await;
    assert_eq!(myid, format!("$40\r\n{}\r\n", run_id("n1")).into_bytes());
}

#[tokio::test]
async fn a_bad_frame_closes_only_its_own_connection() {
    let r = start(view(Some(addr("n1", 6001)), vec![])).await;
    let mut good = TcpStream::connect(r.addr).await.expect("connect");
    let mut bad = TcpStream::connect(r.addr).await.expect("connect");
    bad.write_all(b"*1\r\n$999999999\r\n").await.expect("write");
    let reply = read_some(&mut bad).await;
    assert!(reply.starts_with(b"-ERR Protocol error"), "{reply:?}");
    assert_eq!(read_some(&mut bad).await, b"", "connection closed");
    assert_eq!(raw(&mut good, &["PING"]).await, b"+PONG\r\n");
}

#[tokio::test]
async fn pipelined_requests_are_all_answered_in_order() {
    let r = start(view(Some(addr("n1", 6001)), vec![])).await;
    let mut s = TcpStream::connect(r.addr).await.expect("connect");
    let mut out = Vec::new();
    crate::net::codec::encode(&[b"PING"], &mut out);
    crate::net::codec::encode(&[b"ECHO", b"hi"], &mut out);
    crate::net::codec::encode(&[b"CLIENT", b"SETINFO", b"LIB-NAME", b"x"], &mut out);
    s.write_all(&out).await.expect("write");
    let mut got = Vec::new();
    while got.len() < b"+PONG\r\n$2\r\nhi\r\n+OK\r\n".len() {
        got.extend(read_some(&mut s).await);
    }
    assert_eq!(got, b"+PONG\r\n$2\r\nhi\r\n+OK\r\n");
}

#[tokio::test]
async fn the_redis_crate_sentinel_client_finds_the_primary_and_follows_a_failover() {
    use redis::sentinel::{SentinelClient, SentinelServerType};
    let p1 = fake_data_node("n1").await;
    let p2 = fake_data_node("n2").await;
    let r = start(view(Some(addr("n1", p1)), vec![(addr("n2", p2), true)])).await;
    let url = format!("redis://{}", r.addr);

    let mut client = SentinelClient::build(
        vec![url.clone()],
        "mymaster".into(),
        None,
        SentinelServerType::Master,
    )
    .expect("sentinel client");
    let mut con = client
        .get_async_connection()
        .await
        .expect("resolves the primary");
    let who: String = redis::cmd("INFO")
        .query_async(&mut con)
        .await
        .expect("info");
    assert_eq!(who, "node:n1");

    // Failover: the elector now reports n2 as primary.
    r.view.send_modify(|v| {
        v.epoch = 4;
        v.primary = Some(addr("n2", p2));
        v.replicas = vec![(addr("n1", p1), false)];
    });
    let mut client = SentinelClient::build(
        vec![url],
        "mymaster".into(),
        None,
        SentinelServerType::Master,
    )
    .expect("sentinel client");
    let mut con = client
        .get_async_connection()
        .await
        .expect("resolves the new primary");
    let who: String = redis::cmd("INFO")
        .query_async(&mut con)
        .await
        .expect("info");
    assert_eq!(who, "node:n2");

    // The raw get-master-addr-by-name answer agrees.
    let mut s = TcpStream::connect(r.addr).await.expect("connect");
    let reply = raw(&mut s, &["SENTINEL", "get-master-addr-by-name", "mymaster"]).await;
    assert_eq!(
        reply,
        format!(
            "*2\r\n$9\r\n127.0.0.1\r\n${}\r\n{p2}\r\n",
            p2.to_string().len()
        )
        .into_bytes()
    );
}

#[tokio::test]
async fn masters_and_replicas_entries_carry_the_fields_clients_parse() {
    let r = start(view(
        Some(addr("n1", 6001)),
        vec![(addr("n2", 6002), true), (addr("n3", 6003), false)],
    ))
    .await;
    let client = redis::Client::open(format!("redis://{}", r.addr)).expect("client");
    let mut con = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let masters: Vec<std::collections::HashMap<String, String>> = redis::cmd("SENTINEL")
        .arg("MASTERS")
        .query_async(&mut con)
        .await
        .expect("masters");
    assert_eq!(masters.len(), 1);
    let m = &masters[0];
    assert_eq!(m["name"], "mymaster");
    assert_eq!(m["ip"], "127.0.0.1");
    assert_eq!(m["port"], "6001");
    assert_eq!(m["flags"], "master");
    assert_eq!(m["config-epoch"], "3");
    assert_eq!(m["num-slaves"], "2");
    assert_eq!(m["num-other-sentinels"], "2");
    assert_eq!(m["quorum"], "2");

    let replicas: Vec<std::collections::HashMap<String, String>> = redis::cmd("SENTINEL")
        .arg("SLAVES")
        .arg("mymaster")
        .query_async(&mut con)
        .await
        .expect("slaves");
    assert_eq!(replicas.len(), 2);
    assert_eq!(replicas[0]["flags"], "slave");
    assert_eq!(replicas[0]["master-link-status"], "ok");
    assert_eq!(replicas[1]["flags"], "slave,s_down");
    assert_eq!(replicas[1]["port"], "6003");

    let sentinels: Vec<std::collections::HashMap<String, String>> = redis::cmd("SENTINEL")
        .arg("sentinels")
        .arg("mymaster")
        .query_async(&mut con)
        .await
        .expect("sentinels");
    assert_eq!(sentinels.len(), 2);
    assert_eq!(sentinels[0]["flags"], "sentinel");

    let err = redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg("nope")
        .query_async::<redis::Value>(&mut con)
        .await
        .expect_err("unknown master");
    assert!(err.to_string().contains("No such master"), "{err}");

    // During an election the entry stays, flagged down, at the last address.
    r.view.send_modify(|v| v.primary = None);
    let m: std::collections::HashMap<String, String> = redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg("mymaster")
        .query_async(&mut con)
        .await
        .expect("master");
    assert_eq!(m["flags"], "master,s_down,o_down");
    assert_eq!(m["port"], "6001");

    let info: String = redis::cmd("INFO")
        .query_async(&mut con)
        .await
        .expect("info");
    assert!(info.contains("redis_mode:sentinel"));
    assert!(info.contains("master0:name=mymaster,status=odown,address=127.0.0.1:6001"));
}

#[tokio::test]
async fn switch_master_is_delivered_to_a_subscriber() {
    let r = start(view(Some(addr("n1", 6001)), vec![])).await;
    let addr_ = r.addr;
    // A real client: the redis crate's blocking pub/sub.
    let (subscribed_tx, subscribed) = tokio::sync::oneshot::channel::<()>();
    let subscriber = tokio::task::spawn_blocking(move || {
        let client = redis::Client::open(format!("redis://{addr_}")).expect("client");
        let mut con = client.get_connection().expect("connect");
        let mut ps = con.as_pubsub();
        ps.subscribe("+switch-master").expect("subscribe");
        // subscribe() returns once the server acknowledged it.
        let _ = subscribed_tx.send(());
        ps.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let msg = ps.get_message().expect("message");
        (
            msg.get_channel_name().to_string(),
            msg.get_payload::<String>().expect("payload"),
        )
    });
    // And a raw pattern subscriber.
    let mut raw_sub = TcpStream::connect(r.addr).await.expect("connect");
    let ack = raw(&mut raw_sub, &["PSUBSCRIBE", "+switch-*"]).await;
    assert_eq!(ack, b"*3\r\n$10\r\npsubscribe\r\n$9\r\n+switch-*\r\n:1\r\n");

    tokio::time::timeout(Duration::from_secs(10), subscribed)
        .await
        .expect("subscribed in time")
        .expect("subscriber alive");
    // Going through "no primary" first must not lose the old address.
    r.view.send_modify(|v| v.primary = None);
    tokio::time::sleep(Duration::from_millis(50)).await;
    r.view.send_modify(|v| {
        v.epoch = 4;
        v.primary = Some(addr("n2", 6002));
    });

    let (channel, payload) = subscriber.await.expect("join");
    assert_eq!(channel, "+switch-master");
    assert_eq!(payload, "mymaster 127.0.0.1 6001 127.0.0.1 6002");

    let mut lines = BufReader::new(&mut raw_sub);
    let mut got = String::new();
    // *4 pmessage <pattern> <channel> <payload>: 9 lines.
    for _ in 0..9 {
        tokio::time::timeout(Duration::from_secs(5), lines.read_line(&mut got))
            .await
            .expect("in time")
            .expect("read");
    }
    assert_eq!(
        got,
        "*4\r\n$8\r\npmessage\r\n$9\r\n+switch-*\r\n$14\r\n+switch-master\r\n$38\r\nmymaster 127.0.0.1 6001 127.0.0.1 6002\r\n"
    );
}

#[tokio::test]
async fn subscribed_connections_refuse_other_commands() {
    let r = start(view(None, vec![])).await;
    let mut s = TcpStream::connect(r.addr).await.expect("connect");
    raw(&mut s, &["SUBSCRIBE", "+switch-master"]).await;
    let reply = raw(&mut s, &["SENTINEL", "masters"]).await;
    assert!(
        reply.starts_with(b"-ERR Can't execute 'sentinel'"),
        "{reply:?}"
    );
    assert_eq!(
        raw(&mut s, &["PING"]).await,
        b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"
    );
    assert_eq!(
        raw(&mut s, &["UNSUBSCRIBE"]).await,
        b"*3\r\n$11\r\nunsubscribe\r\n$14\r\n+switch-master\r\n:0\r\n"
    );
    assert_eq!(raw(&mut s, &["PING"]).await, b"+PONG\r\n");
}

#[tokio::test]
async fn hello_2_and_hello_3_switch_the_reply_protocol() {
    let r = start(view(Some(addr("n1", 6001)), vec![])).await;
    let mut s = TcpStream::connect(r.addr).await.expect("connect");
    let reply = raw(&mut s, &["HELLO", "4"]).await;
    assert!(reply.starts_with(b"-NOPROTO"), "{reply:?}");
    let reply = raw(&mut s, &["HELLO", "2", "SETNAME", "app"]).await;
    assert!(reply.starts_with(b"*14\r\n$6\r\nserver\r\n"), "{reply:?}");
    assert_eq!(raw(&mut s, &["CLIENT", "GETNAME"]).await, b"$3\r\napp\r\n");

    let reply = raw(&mut s, &["HELLO", "3"]).await;
    assert!(reply.starts_with(b"%7\r\n$6\r\nserver\r\n"), "{reply:?}");
    assert!(
        reply.windows(11).any(|w| w == b"proto\r\n:3\r\n"),
        "{reply:?}"
    );
    let master = raw(&mut s, &["SENTINEL", "master", "mymaster"]).await;
    assert!(
        master.starts_with(b"%20\r\n$4\r\nname\r\n$8\r\nmymaster\r\n"),
        "{master:?}"
    );
    assert_eq!(
        raw(&mut s, &["SENTINEL", "get-master-addr-by-name", "x"]).await,
        b"_\r\n"
    );
    assert_eq!(raw(&mut s, &["CLIENT", "GETNAME"]).await, b"$3\r\napp\r\n");
    let ack = raw(&mut s, &["SUBSCRIBE", "+switch-master"]).await;
    assert!(ack.starts_with(b">3\r\n$9\r\nsubscribe\r\n"), "{ack:?}");
    // RESP3 allows ordinary commands while subscribed.
    assert_eq!(raw(&mut s, &["PING"]).await, b"+PONG\r\n");
    r.view.send_modify(|v| v.primary = Some(addr("n2", 6002)));
    let push = read_some(&mut s).await;
    assert!(
        push.starts_with(b">3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n"),
        "{push:?}"
    );
}
