//! `check-config`'s look at the process's capability bounding set when the
//! config names a virtual IP.
//!
//! The packaged units grant no `CAP_NET_RAW` to the elector and no
//! capability at all to the watchdog (least privilege: most nodes have no
//! VIP). A VIP needs `CAP_NET_ADMIN` (`ip addr`, `iptables`, `ss -K`) and
//! `CAP_NET_RAW` (`arping`'s gratuitous ARP) in both: the elector moves the
//! address, the watchdog removes it when it fences a frozen elector
//! (docs/vip.md). Without them every move fails at runtime, logged and
//! counted but easy to miss; the units run `check-config` first, so the
//! missing drop-in is named before the service starts.

/// `CAP_NET_ADMIN` and `CAP_NET_RAW` (linux/capability.h).
const NEEDED: [(u32, &str); 2] = [(12, "CAP_NET_ADMIN"), (13, "CAP_NET_RAW")];

/// The drop-ins the package ships for a node with a VIP, and where they go.
pub const VIP_DROP_IN_HINT: &str = "install the package's VIP drop-ins: \
    `install -D -m 0644 /usr/share/elector/systemd/elector.service.d/vip.conf /etc/systemd/system/elector.service.d/vip.conf; \
    install -D -m 0644 /usr/share/elector/systemd/elector-watchdog.service.d/vip.conf /etc/systemd/system/elector-watchdog.service.d/vip.conf; \
    systemctl daemon-reload` (docs/vip.md)";

/// The capabilities a VIP needs that `status` (the text of
/// `/proc/self/status`) says are outside the bounding set, by name. None
/// when the bounding set cannot be read (not Linux, `/proc` hidden): no
/// verdict rather than a false one.
pub fn missing_for_vip(status: &str) -> Option<Vec<&'static str>> {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))?
        .trim();
    let set = u64::from_str_radix(hex, 16).ok()?;
    Some(
        NEEDED
            .iter()
            .filter(|(bit, _)| set & (1u64 << bit) == 0)
            .map(|(_, name)| *name)
            .collect(),
    )
}

/// This process's missing VIP capabilities (see [`missing_for_vip`]).
pub fn missing_for_vip_here() -> Option<Vec<&'static str>> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    missing_for_vip(&status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(cap_bnd: &str) -> String {
        format!("Name:\telector\nCapInh:\t0000000000000000\nCapBnd:\t{cap_bnd}\nCapAmb:\t0000000000000000\n")
    }

    #[test]
    fn a_full_bounding_set_misses_nothing() {
        assert_eq!(missing_for_vip(&status("000001ffffffffff")), Some(vec![]));
    }

    #[test]
    fn the_packaged_elector_units_set_lacks_only_net_raw() {
        // CAP_NET_BIND_SERVICE (10) | CAP_NET_ADMIN (12).
        assert_eq!(
            missing_for_vip(&status("0000000000001400")),
            Some(vec!["CAP_NET_RAW"])
        );
    }

    #[test]
    fn an_empty_bounding_set_misses_both() {
        assert_eq!(
            missing_for_vip(&status("0000000000000000")),
            Some(vec!["CAP_NET_ADMIN", "CAP_NET_RAW"])
        );
    }

    #[test]
    fn an_unreadable_status_gives_no_verdict() {
        assert_eq!(missing_for_vip("Name:\telector\n"), None);
        assert_eq!(missing_for_vip(&status("zz")), None);
    }
}
