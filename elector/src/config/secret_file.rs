//! Secrets kept in files (`auth.key_file`, `data_node.password_file`): read
//! only when nobody but their owner can read them, as ssh treats a private
//! key. A secret the group or the world can read has leaked already on a
//! shared host, and refusing it at start is the one moment an operator is
//! sure to see it.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Permission bits a secret file must not have: any access by its group or
/// by others.
const OPEN_BITS: u32 = 0o077;

/// Why a secret file was refused. Messages name the key and the file, never
/// the secret.
#[derive(Debug, Error)]
pub enum SecretFileError {
    #[error("{key} {path}: cannot read it: {source}")]
    Read {
        key: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{key} {path} is not a regular file")]
    NotAFile { key: &'static str, path: PathBuf },
    #[error(
        "{key} {path} has mode {mode:04o}: its group or others may read it; give it to the elector's user alone (chown elector {path}; chmod 600 {path})"
    )]
    TooOpen {
        key: &'static str,
        path: PathBuf,
        mode: u32,
    },
    #[error("{key} {path} is empty")]
    Empty { key: &'static str, path: PathBuf },
}

/// The secret in `path` (named `key` in errors), without the trailing
/// newline editors and `echo` add. Symbolic links are followed (Kubernetes
/// mounts secrets through them): the mode checked is the target's.
pub fn read_secret_file(key: &'static str, path: &Path) -> Result<String, SecretFileError> {
    let read = |source| SecretFileError::Read {
        key,
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read)?;
    if !meta.is_file() {
        return Err(SecretFileError::NotAFile {
            key,
            path: path.to_path_buf(),
        });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & OPEN_BITS != 0 {
        return Err(SecretFileError::TooOpen {
            key,
            path: path.to_path_buf(),
            mode,
        });
    }
    let text = std::fs::read_to_string(path).map_err(read)?;
    let secret = text.trim_end_matches(['\n', '\r']);
    if secret.is_empty() {
        return Err(SecretFileError::Empty {
            key,
            path: path.to_path_buf(),
        });
    }
    Ok(secret.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_file_only_its_owner_reads_gives_its_secret_without_the_trailing_newline() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [0o600, 0o400] {
            let path = write(dir.path(), "k", "s3cret value\n", mode);
            assert_eq!(
                read_secret_file("auth.key_file", &path).unwrap(),
                "s3cret value"
            );
        }
    }

    #[test]
    fn a_group_or_world_readable_file_is_refused_naming_the_key_the_path_and_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        for mode in [0o640, 0o604, 0o644, 0o660, 0o620] {
            let path = write(dir.path(), "k", "s3cret", mode);
            let e = read_secret_file("data_node.password_file", &path).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, SecretFileError::TooOpen { .. }), "{msg}");
            assert!(
                msg.contains("data_node.password_file")
                    && msg.contains(&path.display().to_string())
                    && msg.contains(&format!("{mode:04o}"))
                    && !msg.contains("s3cret"),
                "{msg}"
            );
        }
    }

    #[test]
    fn a_missing_file_an_empty_file_and_a_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = read_secret_file("auth.key_file", &missing).unwrap_err();
        assert!(
            matches!(e, SecretFileError::Read { .. }) && e.to_string().contains("auth.key_file"),
            "{e}"
        );
        let empty = write(dir.path(), "empty", "\n", 0o600);
        assert!(matches!(
            read_secret_file("auth.key_file", &empty),
            Err(SecretFileError::Empty { .. })
        ));
        let sub = dir.path().join("d");
        std::fs::create_dir(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(matches!(
            read_secret_file("auth.key_file", &sub),
            Err(SecretFileError::NotAFile { .. })
        ));
    }

    #[test]
    fn a_symbolic_link_is_judged_by_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = write(dir.path(), "target", "s3cret", 0o600);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(read_secret_file("auth.key_file", &link).unwrap(), "s3cret");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            read_secret_file("auth.key_file", &link),
            Err(SecretFileError::TooOpen { .. })
        ));
    }
}
