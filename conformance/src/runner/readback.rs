//! Reading every acknowledged write back from every node at the end of a run.

use std::collections::BTreeMap;
use std::time::Duration;

use super::control::Run;
use crate::history::Outcome;
use crate::probe::DataConn;

impl Run<'_> {
    pub(super) async fn final_reads(
        &self,
    ) -> (
        BTreeMap<String, BTreeMap<String, Option<String>>>,
        BTreeMap<String, String>,
    ) {
        let acked: Vec<(String, String)> = self
            .rec
            .writes
            .lock()
            .expect("lock")
            .iter()
            .filter(|w| w.outcome == Outcome::Ok)
            .map(|w| (w.key.clone(), w.value.clone()))
            .collect();
        let mut reads = BTreeMap::new();
        let mut errors = BTreeMap::new();
        for n in &self.cluster.nodes {
            let mut attempt = 0;
            loop {
                attempt += 1;
                match read_back(&n.data_addr(), &acked).await {
                    Ok(got) => {
                        reads.insert(n.id.clone(), got);
                        break;
                    }
                    Err(e) if attempt >= 3 => {
                        errors.insert(n.id.clone(), e);
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_secs(2)).await,
                }
            }
        }
        (reads, errors)
    }
}

/// Reads every acknowledged key from one data node (MGET in chunks, GET if no MGET).
async fn read_back(
    addr: &str,
    acked: &[(String, String)],
) -> std::result::Result<BTreeMap<String, Option<String>>, String> {
    {
        {
            let mut conn = DataConn::new(addr, Duration::from_secs(5));
            let mut got = BTreeMap::new();
            let mut failed = None;
            for chunk in acked.chunks(200) {
                let mut cmd = redis::cmd("MGET");
                for (k, _) in chunk {
                    cmd.arg(k);
                }
                match conn.query::<Vec<Option<String>>>(&cmd).await {
                    Ok(vals) if vals.len() == chunk.len() => {
                        for ((k, _), v) in chunk.iter().zip(vals) {
                            got.insert(k.clone(), v);
                        }
                    }
                    Ok(vals) => {
                        failed = Some(format!(
                            "MGET returned {} values for {}",
                            vals.len(),
                            chunk.len()
                        ));
                        break;
                    }
                    Err(_) => {
                        // MGET refused or stuck (seen on a freshly promoted kevy): one GET
                        // per key on a fresh connection.
                        conn = DataConn::new(addr, Duration::from_secs(5));
                        for (k, _) in chunk {
                            let mut get = redis::cmd("GET");
                            get.arg(k);
                            match conn.query::<Option<String>>(&get).await {
                                Ok(v) => {
                                    got.insert(k.clone(), v);
                                }
                                Err(e) => {
                                    failed = Some(e.to_string());
                                    break;
                                }
                            }
                        }
                        if failed.is_some() {
                            break;
                        }
                    }
                }
            }
            match failed {
                Some(e) => Err(e),
                None => Ok(got),
            }
        }
    }
}
