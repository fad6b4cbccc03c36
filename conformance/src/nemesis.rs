//! Nemeses: what each fault means, and the pure parts (partition rules, minority sides).
//!
//! | step | what happens |
//! |---|---|
//! | `kill` | `docker kill -s KILL`: the whole node (data node + elector) dies at once, like a host crash. The container stays stopped until `restart`. |
//! | `kill_elector` | SIGKILL to the elector's main process only (`pkill -9 -f '^/usr/local/bin/elector(-faulty)? run'`), not the watchdog beside it (the same binary, `elector watchdog`). The image's entrypoint exits when the elector dies, so the data node is stopped right after: an elector crash that also takes the node down. The runner marks the node down; `restart` brings it back with the persisted elector state. |
//! | `restart_elector` | the elector alone SIGTERMed (or SIGKILLed, `kill: true`) after the runner wrote `/tmp/elector-restart-gap-ms`; the entrypoint, finding that request when the elector exits, starts it again after the gap instead of stopping the node, the data node and the watchdog left running (a host supervisor restarting the elector's unit alone). |
//! | `kill_data` | `pkill -9 -x kevy` / `redis-server`: the data node dies first; the elector sees it go away before the entrypoint stops the container. |
//! | `restart` | a stopped node is started; a running node is stopped (SIGTERM, 5 s grace) and started. |
//! | `pause` / `unpause` | `docker pause` freezes every process (cgroup freezer), like a long GC or VM stall; sockets stay open. |
//! | `isolate`, `split`, `bridge` | iptables DROP in both directions between the listed nodes, applied inside each node's network namespace. Clients on the host keep reaching every node (their traffic comes from the gateway), so an isolated old primary must fence itself. |
//! | `one_way` | on each `to` node: DROP packets from `from` that belong to connections `from` opened (`-m conntrack --ctdir ORIGINAL`). `from` can no longer deliver anything on its own connections; connections opened by `to` still work both ways. |
//! | `netem` | `tc qdisc replace dev eth0 root netem delay D jitter J loss L%` on the target nodes (affects peers and clients alike). On kernels without `sch_netem` the runner falls back to iptables random loss (`-m statistic`, on `eth0` only) and notes that delay and jitter were not applied. |
//! | `heal` | flushes the iptables chains and removes netem on every node. |

use std::collections::BTreeSet;

/// One blocked direction: packets from `from` do not reach `to`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Block {
    pub from: String,
    pub to: String,
    /// Only packets of connections `from` opened (one-way); otherwise all packets.
    pub originated_only: bool,
}

/// Blocks cutting every pair of nodes on different sides, in both directions.
pub fn split_blocks(sides: &[Vec<String>]) -> Vec<Block> {
    let mut out = vec![];
    for (i, a) in sides.iter().enumerate() {
        for (j, b) in sides.iter().enumerate() {
            if i == j {
                continue;
            }
            for x in a {
                for y in b {
                    out.push(Block {
                        from: x.clone(),
                        to: y.clone(),
                        originated_only: false,
                    });
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

pub fn one_way_blocks(from: &[String], to: &[String]) -> Vec<Block> {
    let mut out = vec![];
    for x in from {
        for y in to {
            if x != y {
                out.push(Block {
                    from: x.clone(),
                    to: y.clone(),
                    originated_only: true,
                });
            }
        }
    }
    out
}

/// Nodes that cannot exchange messages both ways with enough peers to form a quorum
/// (counting themselves). Any blocked direction counts as a cut link.
pub fn minority(nodes: &[String], blocks: &[Block], quorum: usize) -> Vec<String> {
    let cut: BTreeSet<(&str, &str)> = blocks
        .iter()
        .flat_map(|b| {
            [
                (b.from.as_str(), b.to.as_str()),
                (b.to.as_str(), b.from.as_str()),
            ]
        })
        .collect();
    nodes
        .iter()
        .filter(|n| {
            let linked = nodes
                .iter()
                .filter(|m| m != n && !cut.contains(&(n.as_str(), m.as_str())))
                .count();
            linked + 1 < quorum
        })
        .cloned()
        .collect()
}

/// iptables commands to run on node `on` for the given blocks, given each node's IP.
pub fn iptables_script(
    on: &str,
    blocks: &[Block],
    ip_of: &dyn Fn(&str) -> Option<String>,
) -> String {
    let mut cmds = vec![];
    for b in blocks {
        if b.to == on {
            if let Some(ip) = ip_of(&b.from) {
                if b.originated_only {
                    cmds.push(format!(
                        "iptables -w -A INPUT -s {ip} -m conntrack --ctdir ORIGINAL -j DROP"
                    ));
                } else {
                    cmds.push(format!("iptables -w -A INPUT -s {ip} -j DROP"));
                }
            }
        }
        if b.from == on && !b.originated_only {
            if let Some(ip) = ip_of(&b.to) {
                cmds.push(format!("iptables -w -A OUTPUT -d {ip} -j DROP"));
            }
        }
    }
    cmds.join(" && ")
}

pub const HEAL_SCRIPT: &str =
    "iptables -w -F INPUT; iptables -w -F OUTPUT; tc qdisc del dev eth0 root 2>/dev/null; true";

/// Loss without netem (kernels without `sch_netem`): random DROP with iptables'
/// `statistic` match, both directions, on `eth0` only, as netem would be. Loopback
/// stays clean: on a real host a lossy network does not drop the packets between
/// the elector, its data node and its watchdog, and dropping them here made the
/// watchdog fence a healthy primary (a 2 % loss soak "failed over" because every
/// lost loopback SYN cost a 1 s retransmission). Removed by `heal` (and replaced by
/// any later partition step, which flushes the chains).
pub fn iptables_loss_script(loss_pct: f64) -> String {
    let p = (loss_pct / 100.0).clamp(0.0, 1.0);
    format!(
        "iptables -w -A INPUT -i eth0 -m statistic --mode random --probability {p} -j DROP && \
         iptables -w -A OUTPUT -o eth0 -m statistic --mode random --probability {p} -j DROP"
    )
}

/// Removes netem and the iptables loss rules, leaving partition rules in place.
pub const CLEAR_NETEM_SCRIPT: &str = "tc qdisc del dev eth0 root 2>/dev/null; \
    for c in INPUT OUTPUT; do iptables -w -S $c | grep -- '--mode random' | sed 's/^-A /-D /' | \
    while read -r r; do iptables -w $r; done; done; true";

pub fn netem_script(delay_ms: u64, jitter_ms: u64, loss_pct: f64) -> String {
    let mut s = String::from("tc qdisc replace dev eth0 root netem");
    if delay_ms > 0 || jitter_ms > 0 {
        s.push_str(&format!(" delay {delay_ms}ms"));
        if jitter_ms > 0 {
            s.push_str(&format!(" {jitter_ms}ms"));
        }
    }
    if loss_pct > 0.0 {
        s.push_str(&format!(" loss {loss_pct}%"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: &[&str]) -> Vec<String> {
        x.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_split_cuts_both_directions_between_sides_only() {
        let b = split_blocks(&[v(&["n1"]), v(&["n2", "n3"])]);
        assert_eq!(b.len(), 4);
        assert!(b.iter().all(|x| !x.originated_only));
        assert!(!b.iter().any(|x| x.from == "n2" && x.to == "n3"));
    }

    #[test]
    fn minority_sides_are_the_nodes_without_a_quorum_of_links() {
        let nodes = v(&["n1", "n2", "n3"]);
        let b = split_blocks(&[v(&["n1"]), v(&["n2", "n3"])]);
        assert_eq!(minority(&nodes, &b, 2), v(&["n1"]));
        // Bridge: n1 and n3 cut, n2 sees both: nobody is in a minority.
        let b = split_blocks(&[v(&["n1"]), v(&["n3"])]);
        assert!(minority(&nodes, &b, 2).is_empty());
        // N=2 isolation: both sides are minorities.
        let two = v(&["n1", "n2"]);
        let b = split_blocks(&[v(&["n1"]), v(&["n2"])]);
        assert_eq!(minority(&two, &b, 2), two);
        // 5 nodes, 2|3.
        let five = v(&["n1", "n2", "n3", "n4", "n5"]);
        let b = split_blocks(&[v(&["n1", "n2"]), v(&["n3", "n4", "n5"])]);
        assert_eq!(minority(&five, &b, 3), v(&["n1", "n2"]));
        // One-way from n1 to everyone: n1 counts as cut off.
        let b = one_way_blocks(&v(&["n1"]), &v(&["n2", "n3"]));
        assert_eq!(minority(&nodes, &b, 2), v(&["n1"]));
    }

    #[test]
    fn iptables_rules_are_placed_on_the_right_node() {
        let ip = |n: &str| Some(format!("10.0.0.{}", &n[1..]));
        let b = split_blocks(&[v(&["n1"]), v(&["n2"])]);
        let s = iptables_script("n1", &b, &ip);
        assert!(s.contains("-A INPUT -s 10.0.0.2 -j DROP"), "{s}");
        assert!(s.contains("-A OUTPUT -d 10.0.0.2 -j DROP"), "{s}");
        let b = one_way_blocks(&v(&["n1"]), &v(&["n2"]));
        assert_eq!(iptables_script("n1", &b, &ip), "");
        assert_eq!(
            iptables_script("n2", &b, &ip),
            "iptables -w -A INPUT -s 10.0.0.1 -m conntrack --ctdir ORIGINAL -j DROP"
        );
    }

    #[test]
    fn iptables_loss_leaves_loopback_alone() {
        let s = iptables_loss_script(2.0);
        assert!(s.contains("-A INPUT -i eth0 "), "{s}");
        assert!(s.contains("-A OUTPUT -o eth0 "), "{s}");
        assert!(s.contains("--probability 0.02"), "{s}");
        // The clear script finds the rules by their match, interface or not.
        assert_eq!(s.matches("--mode random").count(), 2);
    }

    #[test]
    fn netem_commands_include_only_what_is_set() {
        assert_eq!(
            netem_script(20, 10, 2.5),
            "tc qdisc replace dev eth0 root netem delay 20ms 10ms loss 2.5%"
        );
        assert_eq!(
            netem_script(0, 0, 1.0),
            "tc qdisc replace dev eth0 root netem loss 1%"
        );
    }
}
