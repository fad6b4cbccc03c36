//! What moving the virtual IP takes, as data (docs/vip.md): the commands to
//! add it (address, announcement, port map) and to remove it (port map,
//! address, the clients connected through it). Pure, so the order is tested
//! without a network; `vip::exec` carries the commands out.

use std::net::IpAddr;
use thiserror::Error;

/// `vip: { address, interface, port }` (docs/interfaces.md).
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct VipConfig {
    /// `10.77.0.100/24` or `fd00::100/64`: the address and its prefix.
    pub address: String,
    /// The interface the address goes on (`eth0`).
    pub interface: String,
    /// The port clients use on the VIP. When it differs from the data
    /// node's port, the holder maps it there (DNAT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum VipConfigError {
    #[error("vip.address {0:?} is not ADDRESS/PREFIX (10.77.0.100/24, fd00::100/64)")]
    Address(String),
    #[error("vip.interface {0:?} is not an interface name")]
    Interface(String),
}

/// A checked VIP: the address, its prefix, the interface, and the port map
/// (`Some((vip_port, data_port))` when they differ).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vip {
    pub ip: IpAddr,
    pub prefix: u8,
    pub interface: String,
    pub port_map: Option<(u16, u16)>,
}

impl Vip {
    /// Checks the config; `data_port` is the local data node's client port.
    pub fn new(cfg: &VipConfig, data_port: Option<u16>) -> Result<Vip, VipConfigError> {
        let bad = || VipConfigError::Address(cfg.address.clone());
        let (ip, prefix) = cfg.address.split_once('/').ok_or_else(bad)?;
        let ip: IpAddr = ip.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(bad());
        }
        let iface_ok = !cfg.interface.is_empty()
            && cfg.interface.len() < 16
            && cfg
                .interface
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
        if !iface_ok {
            return Err(VipConfigError::Interface(cfg.interface.clone()));
        }
        let port_map = match (cfg.port, data_port) {
            (Some(v), Some(d)) if v != d => Some((v, d)),
            _ => None,
        };
        Ok(Vip {
            ip,
            prefix,
            interface: cfg.interface.clone(),
            port_map,
        })
    }

    fn cidr(&self) -> String {
        format!("{}/{}", self.ip, self.prefix)
    }

    fn iptables(&self) -> &'static str {
        if self.ip.is_ipv4() {
            "iptables"
        } else {
            "ip6tables"
        }
    }

    /// The DNAT rule, as `-A`/`-D`/`-C` arguments take it. PREROUTING maps
    /// clients from other hosts, OUTPUT those on this host.
    fn dnat(&self, op: &str, chain: &str, (vip_port, data_port): (u16, u16)) -> Step {
        let to = match self.ip {
            IpAddr::V4(ip) => format!("{ip}:{data_port}"),
            IpAddr::V6(ip) => format!("[{ip}]:{data_port}"),
        };
        Step::required(&[
            self.iptables(),
            "-w",
            "-t",
            "nat",
            op,
            chain,
            "-d",
            &self.ip.to_string(),
            "-p",
            "tcp",
            "--dport",
            &vip_port.to_string(),
            "-j",
            "DNAT",
            "--to-destination",
            &to,
        ])
    }

    /// Taking the VIP: the port map first (so the first client through the
    /// address reaches the data node), then the address, then the
    /// announcement so neighbours stop sending to the old holder.
    pub fn add(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        if let Some(map) = self.port_map {
            for chain in ["PREROUTING", "OUTPUT"] {
                steps.push(self.dnat("-C", chain, map).or(self.dnat("-A", chain, map)));
            }
        }
        let add = Step::required(&["ip", "addr", "add", &self.cidr(), "dev", &self.interface])
            .tolerating("File exists");
        match self.ip {
            // Gratuitous ARP after the address: three unsolicited replies,
            // one second apart (iputils' `-i` takes whole seconds), so it
            // lasts about three seconds and runs beside the next moves.
            IpAddr::V4(ip) => {
                steps.push(add);
                steps.push(Step::lasting_announce(&[
                    "arping",
                    "-U",
                    "-c",
                    "3",
                    "-I",
                    &self.interface,
                    &ip.to_string(),
                ]));
            }
            // Linux sends unsolicited neighbour advertisements for a new
            // address itself when `ndisc_notify` is on: set it first.
            IpAddr::V6(_) => {
                steps.push(Step::announce(&[
                    "sysctl",
                    "-w",
                    &format!("net.ipv6.conf.{}.ndisc_notify=1", self.interface),
                ]));
                steps.push(add);
            }
        }
        steps
    }

    /// Giving the VIP up: the address first (no new connection reaches
    /// us), then the port map, then the connections clients still hold
    /// through the address are destroyed (`ss -K`, kernel SOCK_DESTROY) so
    /// they reconnect to the new holder instead of looping on READONLY.
    /// Works the same for kevy and Redis: the kernel closes the sockets.
    pub fn remove(&self) -> Vec<Step> {
        let mut steps = vec![
            // Already gone: older kernels say the first, newer ones
            // (the lab's Debian bookworm) "Error: ipv4: Address not found."
            Step::required(&["ip", "addr", "del", &self.cidr(), "dev", &self.interface])
                .tolerating("Cannot assign requested address")
                .tolerating("Address not found"),
        ];
        if let Some(map) = self.port_map {
            for chain in ["PREROUTING", "OUTPUT"] {
                steps.push(
                    self.dnat("-D", chain, map)
                        .tolerating("does a matching rule exist")
                        .tolerating("Bad rule"),
                );
            }
        }
        steps.push(Step::announce(&[
            "ss",
            "-K",
            "-t",
            "src",
            &self.ip.to_string(),
        ]));
        steps
    }
}

/// One command of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub argv: Vec<String>,
    /// A failure here fails the move (the address, the port map); an
    /// announcement or a client kill that fails is counted and logged only.
    pub required: bool,
    /// stderr text meaning "already so" (an address already there, or
    /// already gone): success.
    pub tolerated: Vec<&'static str>,
    /// Run this instead when the command fails (`-C` then `-A`).
    pub otherwise: Option<Box<Step>>,
    /// An announcement that takes seconds by design (gratuitous ARPs a
    /// second apart): run once the move is done, beside it rather than in
    /// it, and stopped before the next move, so an old holder never
    /// announces an address it gave up (docs/vip.md).
    pub lasting: bool,
}

impl Step {
    fn required(argv: &[&str]) -> Step {
        Step {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            required: true,
            tolerated: Vec::new(),
            otherwise: None,
            lasting: false,
        }
    }

    fn announce(argv: &[&str]) -> Step {
        Step {
            required: false,
            ..Step::required(argv)
        }
    }

    fn lasting_announce(argv: &[&str]) -> Step {
        Step {
            lasting: true,
            ..Step::announce(argv)
        }
    }

    fn tolerating(mut self, text: &'static str) -> Step {
        self.tolerated.push(text);
        self
    }

    fn or(mut self, other: Step) -> Step {
        self.otherwise = Some(Box::new(other));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vip(address: &str, port: Option<u16>, data: u16) -> Vip {
        let cfg = VipConfig {
            address: address.into(),
            interface: "eth0".into(),
            port,
        };
        Vip::new(&cfg, Some(data)).expect("valid")
    }

    /// Each step as its program and its verb (`ip add`, `iptables -C`).
    fn programs(steps: &[Step]) -> Vec<String> {
        const VERBS: [&str; 7] = ["add", "del", "-C", "-A", "-D", "-U", "-K"];
        steps
            .iter()
            .map(|s| {
                let verb = s.argv.iter().find(|a| VERBS.contains(&a.as_str()));
                format!("{} {}", s.argv[0], verb.map_or("", |v| v.as_str()))
            })
            .collect()
    }

    #[test]
    fn a_bad_address_or_interface_is_refused_with_the_reason() {
        for bad in [
            "10.77.0.100",
            "10.77.0.300/24",
            "10.77.0.100/33",
            "fd00::1/129",
        ] {
            let cfg = VipConfig {
                address: bad.into(),
                interface: "eth0".into(),
                port: None,
            };
            assert_eq!(
                Vip::new(&cfg, None),
                Err(VipConfigError::Address(bad.into()))
            );
        }
        let cfg = VipConfig {
            address: "10.0.0.1/24".into(),
            interface: "eth0; rm -rf /".into(),
            port: None,
        };
        assert!(matches!(
            Vip::new(&cfg, None),
            Err(VipConfigError::Interface(_))
        ));
    }

    #[test]
    fn the_port_map_is_installed_before_the_address_and_removed_after_it() {
        let v = vip("10.77.0.100/24", Some(6379), 6381);
        assert_eq!(v.port_map, Some((6379, 6381)));
        let add = v.add();
        assert_eq!(
            programs(&add),
            ["iptables -C", "iptables -C", "ip add", "arping -U"]
        );
        assert!(add[0]
            .otherwise
            .as_ref()
            .is_some_and(|s| s.argv.contains(&"-A".to_string())));
        assert!(add[0].argv.iter().any(|a| a == "10.77.0.100:6381"));
        let remove = v.remove();
        assert_eq!(
            programs(&remove),
            ["ip del", "iptables -D", "iptables -D", "ss -K"]
        );
        assert!(remove[0].required && !remove[3].required);
        let lasting: Vec<bool> = add.iter().chain(&remove).map(|s| s.lasting).collect();
        assert_eq!(
            lasting,
            [false, false, false, true, false, false, false, false],
            "only the gratuitous ARPs (about 3 s) run beside the move"
        );
    }

    #[test]
    fn removing_an_address_that_is_already_gone_succeeds_in_both_kernel_wordings() {
        // Seen in the lab (Debian bookworm): "Error: ipv4: Address not found."
        // on every node that never held the VIP, retried each second.
        let del = &vip("10.77.0.100/32", None, 6379).remove()[0];
        for stderr in [
            "RTNETLINK answers: Cannot assign requested address",
            "Error: ipv4: Address not found.",
        ] {
            assert!(del.tolerated.iter().any(|t| stderr.contains(t)), "{stderr}");
        }
    }

    #[test]
    fn no_port_map_when_the_vip_port_is_the_data_port_and_ipv6_uses_ndisc_notify() {
        let v = vip("fd00::100/64", Some(6379), 6379);
        assert_eq!(v.port_map, None);
        let add = v.add();
        assert_eq!(programs(&add), ["sysctl ", "ip add"]);
        assert!(!add[0].required && add[1].required);
        assert!(
            !add[0].lasting,
            "ndisc_notify must be set before the address is added"
        );
    }
}
