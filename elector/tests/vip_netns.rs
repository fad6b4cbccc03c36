//! The virtual IP on a real interface (docs/vip.md): in a private network
//! namespace (`support::netns`, root), a veth interface gets the VIP, the
//! port map (iptables DNAT, vip port 16379 -> data port 16381) reaches a
//! real kevy 7.0.0 or redis-server through it, a client connected through
//! the VIP is disconnected when the VIP leaves, and nothing is left behind;
//! the neighbour counts the gratuitous ARPs, and none follows a release.

mod support;

use elector::vip::{Vip, VipConfig, VipHandle};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::netns::{inside_private_netns, sh};
use support::Backend;

const VIP: &str = "10.99.0.100";
const DATA_PORT: u16 = 16381;
const VIP_PORT: u16 = 16379;

fn out(script: &str) -> String {
    let o = Command::new("sh")
        .args(["-c", script])
        .output()
        .expect("sh");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A data node listening on every address of the namespace, as a primary.
fn data_node(backend: Backend, dir: &std::path::Path) -> Child {
    match backend {
        Backend::Kevy => {
            let path = dir.join("kevy.toml");
            let toml = format!(
                "[server]\nbind = \"0.0.0.0\"\nport = {DATA_PORT}\nthreads = 1\ndata_dir = \"{}\"\n",
                dir.display()
            );
            std::fs::write(&path, toml).unwrap();
            Command::new("kevy").arg("--config").arg(&path).stdout(Stdio::null()).stderr(Stdio::null()).spawn()
        }
        Backend::Redis => Command::new("redis-server")
            .args(["--port", &DATA_PORT.to_string(), "--bind", "0.0.0.0", "--save", "", "--protected-mode", "no", "--dir"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn(),
    }
    .expect("data node starts")
}

fn through_vip(cmd: &str) -> String {
    out(&format!("redis-cli -h {VIP} -p {VIP_PORT} {cmd} 2>&1"))
        .trim()
        .to_string()
}

/// Packets the VIP interface's neighbour (the veth's other end) received,
/// from this namespace's `/proc/net/dev` (`/sys` is the host's).
fn received_by_neighbour() -> u64 {
    let dev = std::fs::read_to_string("/proc/net/dev").expect("/proc/net/dev");
    dev.lines()
        .find_map(|l| l.trim_start().strip_prefix("vip1:"))
        .and_then(|counters| counters.split_whitespace().nth(1)?.parse().ok())
        .expect("vip1's received packets")
}

fn established_through_vip() -> usize {
    out(&format!("ss -Htn state established src {VIP}"))
        .lines()
        .count()
}

fn vip_moves_the_address_the_port_map_and_the_clients(backend: Backend) {
    support::require(match backend {
        Backend::Kevy => "kevy",
        Backend::Redis => "redis-server",
    });
    support::require("redis-cli");
    // No IPv6 on the pair: what vip1 receives is then the ARPs we send.
    sh("ip link add vip0 type veth peer name vip1 && \
        (sysctl -qw net.ipv6.conf.vip0.disable_ipv6=1 net.ipv6.conf.vip1.disable_ipv6=1 || true) && \
        ip link set vip0 up && ip link set vip1 up");
    let dir = tempfile::tempdir().unwrap();
    let mut server = data_node(backend, dir.path());
    wait_for("the data node", || {
        out(&format!("redis-cli -p {DATA_PORT} PING")).contains("PONG")
    });
    let cfg = VipConfig {
        address: format!("{VIP}/24"),
        interface: "vip0".into(),
        port: Some(VIP_PORT),
    };
    let vip = Vip::new(&cfg, Some(DATA_PORT)).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let handle = rt.block_on(async { VipHandle::start(vip.clone()) });

    let arps_before = received_by_neighbour();
    handle.want(true, "writable_primary");
    wait_for("the vip held", || handle.status().held);
    // The announcement runs beside the move and to its end: three
    // gratuitous ARPs, counted by the neighbour, none failed.
    wait_for("the announcement", || handle.status().announcements == 1);
    assert!(
        received_by_neighbour() - arps_before >= 3,
        "the neighbour saw {} of three gratuitous ARPs",
        received_by_neighbour() - arps_before
    );
    assert_eq!(handle.status().announce_failures, 0);
    assert!(out("ip -o addr show dev vip0").contains(&format!("{VIP}/24")));
    assert_eq!(out("iptables -t nat -S").matches("DNAT").count(), 2);
    assert_eq!(through_vip("SET k v"), "OK");
    let status = handle.status();
    assert_eq!(status.reason.as_deref(), Some("writable_primary"));
    assert!(status.since_unix_ms.is_some());

    // A client that stays connected through the VIP.
    let mut client = Command::new("redis-cli")
        .args(["-h", VIP, "-p", &VIP_PORT.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the client connected", || established_through_vip() >= 2);

    handle.want(false, "quorum_lost");
    wait_for("the vip released", || !handle.status().held);
    assert!(
        !out("ip -o addr show dev vip0").contains(VIP),
        "address left behind"
    );
    assert_eq!(
        out("iptables -t nat -S").matches("DNAT").count(),
        0,
        "port map left behind"
    );
    assert_eq!(
        established_through_vip(),
        0,
        "a client connection through the VIP survived"
    );
    assert_ne!(through_vip("PING"), "PONG");
    assert_eq!(handle.status().reason.as_deref(), Some("quorum_lost"));
    assert_eq!(handle.status().failures, 0);

    // Taken and given up again at once: the announcement still running is
    // stopped, and nothing announces the address after it left.
    handle.want(true, "writable_primary");
    wait_for("the vip held again", || handle.status().held);
    handle.want(false, "quorum_lost");
    wait_for("the vip released again", || !handle.status().held);
    assert_eq!(handle.status().announcements_cut, 1);
    let after_release = received_by_neighbour();
    std::thread::sleep(Duration::from_millis(2_500));
    assert_eq!(
        received_by_neighbour(),
        after_release,
        "an ARP for the address after it was given up"
    );
    assert_eq!(handle.status().announcements, 1);
    assert_eq!(handle.status().announce_failures, 0);

    let _ = client.kill();
    let _ = client.wait();
    let _ = server.kill();
    let _ = server.wait();
    drop(rt);
}

#[test]
fn the_vip_and_its_port_map_move_and_old_clients_are_cut_on_kevy() {
    if inside_private_netns("the_vip_and_its_port_map_move_and_old_clients_are_cut_on_kevy") {
        vip_moves_the_address_the_port_map_and_the_clients(Backend::Kevy);
    }
}

#[test]
fn the_vip_and_its_port_map_move_and_old_clients_are_cut_on_redis() {
    if inside_private_netns("the_vip_and_its_port_map_move_and_old_clients_are_cut_on_redis") {
        vip_moves_the_address_the_port_map_and_the_clients(Backend::Redis);
    }
}
