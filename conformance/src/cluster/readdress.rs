//! A node that comes back under the same name with another IP address, as a
//! Kubernetes pod does when it is rescheduled (issue 24, item 3): the peers
//! know it by name only (`PEERS=n1=cf-RUN-n1,...`), so they must resolve the
//! name again when they redial, or they keep dialling the old address.

use std::net::Ipv4Addr;

use testcontainers::bollard::models::{
    EndpointIpamConfig, EndpointSettings, NetworkConnectRequest, NetworkDisconnectRequest,
};

use super::Cluster;
use crate::error::{Error, Result};

/// The last host numbers of the /24 tried for a new address: far above the
/// ones Docker hands out in order from .2, so they are free in a small run.
const NEW_HOSTS: std::ops::RangeInclusive<u8> = 200..=250;

impl Cluster {
    /// Moves a stopped node to an address of the cluster network that no node
    /// has held in this run (`taken`: addresses seen so far), by taking it off
    /// the network and joining it again with that address; Docker's DNS keeps
    /// answering its name with the new one. Returns the new address; the
    /// caller starts the node.
    pub async fn readdress_stopped(&self, id: &str, taken: &[String]) -> Result<String> {
        let (running, _) = self.state(id).await?;
        if running {
            return Err(Error::Cluster(format!(
                "{id} is running: only a stopped node moves to a new address"
            )));
        }
        let new_ip = pick_new_address(&self.subnet, taken)?;
        let container = self.node(id)?.container_name.clone();
        self.docker
            .disconnect_network(
                &self.network,
                NetworkDisconnectRequest {
                    container: container.clone(),
                    force: Some(true),
                },
            )
            .await?;
        self.docker
            .connect_network(
                &self.network,
                NetworkConnectRequest {
                    container,
                    endpoint_config: Some(EndpointSettings {
                        ipam_config: Some(EndpointIpamConfig {
                            ipv4_address: Some(new_ip.clone()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                },
            )
            .await?;
        Ok(new_ip)
    }
}

/// The first of `NEW_HOSTS` in `subnet` (an IPv4 `/24` such as
/// `10.213.4.0/24`) that is not in `taken`.
pub fn pick_new_address(subnet: &str, taken: &[String]) -> Result<String> {
    let bad = || Error::Cluster(format!("cluster subnet {subnet:?} is not an IPv4 /24"));
    let (net, len) = subnet.split_once('/').ok_or_else(bad)?;
    let net: Ipv4Addr = net.parse().map_err(|_| bad())?;
    if len != "24" {
        return Err(bad());
    }
    let [a, b, c, _] = net.octets();
    NEW_HOSTS
        .map(|d| Ipv4Addr::new(a, b, c, d).to_string())
        .find(|ip| !taken.contains(ip))
        .ok_or_else(|| Error::Cluster(format!("no free address left in {subnet}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_address_is_in_the_subnet_and_not_one_already_taken() {
        let taken = vec!["10.213.4.200".to_string(), "10.213.4.201".to_string()];
        assert_eq!(
            pick_new_address("10.213.4.0/24", &taken).unwrap(),
            "10.213.4.202"
        );
    }

    #[test]
    fn a_subnet_that_is_not_an_ipv4_slash_24_is_refused() {
        assert!(pick_new_address("10.213.0.0/16", &[]).is_err());
        assert!(pick_new_address("fd00::/64", &[]).is_err());
        assert!(pick_new_address("nonsense", &[]).is_err());
    }
}
