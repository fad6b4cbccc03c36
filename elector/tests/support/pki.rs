//! A throw-away certificate authority for the TLS tests (rcgen): a CA in a
//! directory and the certificates it issues, as files an elector's `tls`
//! section and a client's flags name.

use std::path::{Path, PathBuf};

/// A throw-away CA in a directory and the certificates it issues.
pub struct Pki {
    dir: PathBuf,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    pub fn new(dir: &Path) -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "elector test CA");
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&ca_key).unwrap();
        std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();
        Pki {
            dir: dir.to_path_buf(),
            ca,
            ca_key,
        }
    }

    /// Issues `name.crt`/`name.key` (mode 0600) for `sans`, with common
    /// name `cn`; an existing pair is replaced (a renewal).
    pub fn issue(&self, name: &str, sans: &[&str], cn: &str) {
        use std::os::unix::fs::PermissionsExt as _;
        let mut params =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        // Written aside and renamed over, as a renewal tool does.
        let (crt, pem) = (
            self.file(&format!("{name}.crt")),
            self.file(&format!("{name}.key")),
        );
        std::fs::write(format!("{crt}.new"), cert.pem()).unwrap();
        std::fs::write(format!("{pem}.new"), key.serialize_pem()).unwrap();
        std::fs::set_permissions(format!("{pem}.new"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::rename(format!("{pem}.new"), &pem).unwrap();
        std::fs::rename(format!("{crt}.new"), &crt).unwrap();
    }

    pub fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

pub fn election_tls(pki: &Pki, id: &str) -> String {
    format!(
        "  election: {{ ca_file: {}, cert_file: {}, key_file: {} }}\n",
        pki.file("ca.crt"),
        pki.file(&format!("{id}.crt")),
        pki.file(&format!("{id}.key")),
    )
}
