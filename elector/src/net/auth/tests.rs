use super::replay::REPLAY_WINDOW;
use super::*;
use proptest::prelude::*;

const NOW: u64 = 1_760_000_000_000;

/// A config whose key is `key` padded to the minimum length (distinct
/// `key`s stay distinct keys).
fn cfg(key: &str) -> AuthConfig {
    AuthConfig {
        mode: AuthMode::SharedKey,
        key: Some(Secret::new(format!("{key}:padded-to-16-bytes"))),
        key_file: None,
        max_skew_ms: DEFAULT_MAX_SKEW_MS,
    }
}

fn pair(key: &str) -> (Authenticator, Authenticator) {
    (
        Authenticator::new(&cfg(key), "n1", NOW - 5_000).expect("n1"),
        Authenticator::new(&cfg(key), "n2", NOW - 9_000).expect("n2"),
    )
}

fn msg() -> Vec<Vec<u8>> {
    vec![
        b"HB".to_vec(),
        b"n1".to_vec(),
        b"3".to_vec(),
        b"1234".to_vec(),
    ]
}

#[test]
fn a_sealed_frame_opens_to_the_original_fields() {
    let (mut a, mut b) = pair("k3y-k3y-k3y-k3y-k3y");
    let sealed = a.seal_at("n2", msg(), NOW);
    assert_eq!(sealed[0], b"AUTH");
    assert_eq!(sealed.len(), HEADER_FIELDS + msg().len());
    let opened = b.open_verified(sealed, NOW + 10).expect("opens");
    assert_eq!(opened.fields, msg());
    assert_eq!(opened.sender.as_deref(), Some("n1"));
}

#[test]
fn any_flipped_byte_fails_the_tag() {
    let (mut a, _) = pair("secret");
    let sealed = a.seal_at("n2", msg(), NOW);
    // Every byte of every authenticated field (sender and beyond).
    for i in 1..sealed.len() {
        for j in 0..sealed[i].len() {
            let mut b = Authenticator::new(&cfg("secret"), "n2", NOW).expect("n2");
            let mut bad = sealed.clone();
            bad[i][j] ^= 0x01;
            let err = b.open(bad, NOW).expect_err("tampered frame must not open");
            assert!(
                matches!(err, AuthError::BadTag | AuthError::Malformed),
                "field {i} byte {j}: {err:?}"
            );
        }
    }
}

#[test]
fn a_replayed_frame_is_rejected_as_replay() {
    let (mut a, mut b) = pair("secret");
    let first = a.seal_at("n2", msg(), NOW);
    b.open(first.clone(), NOW).expect("first delivery opens");
    assert_eq!(b.open(first, NOW), Err(AuthError::Replay));
}

#[test]
fn a_frame_overtaken_by_a_newer_one_still_opens_once() {
    let (mut a, mut b) = pair("secret");
    let older = a.seal_at("n2", msg(), NOW);
    let newer = a.seal_at("n2", msg(), NOW);
    b.open(newer, NOW).expect("newer opens");
    b.open(older.clone(), NOW)
        .expect("reordered older frame opens");
    assert_eq!(b.open(older, NOW), Err(AuthError::Replay));
}

#[test]
fn a_frame_older_than_the_window_is_rejected_as_replay() {
    let (mut a, mut b) = pair("secret");
    let ancient = a.seal_at("n2", msg(), NOW);
    let mut last = Vec::new();
    for _ in 0..REPLAY_WINDOW {
        last = a.seal_at("n2", msg(), NOW);
    }
    b.open(last, NOW).expect("opens");
    assert_eq!(b.open(ancient, NOW), Err(AuthError::Replay));
}

#[test]
fn a_restarted_sender_is_heard_again_but_its_old_boot_is_not() {
    let (mut a, mut b) = pair("secret");
    let old_boot = a.seal_at("n2", msg(), NOW);
    let mut old_boot_later = a.clone_for_test();
    b.open(a.seal_at("n2", msg(), NOW), NOW).expect("opens");
    let mut restarted = Authenticator::new(&cfg("secret"), "n1", NOW + 1).expect("restart");
    b.open(restarted.seal_at("n2", msg(), NOW + 2), NOW + 2)
        .expect("new boot id starts a new sequence");
    assert_eq!(b.open(old_boot, NOW + 2), Err(AuthError::Replay));
    let stale = old_boot_later.seal_at("n2", msg(), NOW + 3);
    assert_eq!(b.open(stale, NOW + 3), Err(AuthError::Replay));
}

#[test]
fn a_wrong_key_fails_the_tag() {
    let mut a = Authenticator::new(&cfg("one key"), "n1", NOW).expect("n1");
    let mut b = Authenticator::new(&cfg("another"), "n2", NOW).expect("n2");
    assert_eq!(
        b.open(a.seal_at("n2", msg(), NOW), NOW),
        Err(AuthError::BadTag)
    );
}

#[test]
fn a_frame_for_another_receiver_fails_the_tag() {
    let mut a = Authenticator::new(&cfg("k"), "n1", NOW).expect("n1");
    let mut c = Authenticator::new(&cfg("k"), "n3", NOW).expect("n3");
    assert_eq!(
        c.open(a.seal_at("n2", msg(), NOW), NOW),
        Err(AuthError::BadTag)
    );
}

#[test]
fn a_frame_outside_the_skew_window_is_expired() {
    let (mut a, mut b) = pair("k");
    let sealed = a.seal_at("n2", msg(), NOW);
    assert_eq!(
        b.open(sealed.clone(), NOW + 30_001),
        Err(AuthError::Expired(-30_001))
    );
    let early = a.seal_at("n2", msg(), NOW + 31_000);
    assert_eq!(b.open(early, NOW), Err(AuthError::Expired(31_000)));
    // An expired frame does not advance the high-water mark.
    b.open(sealed, NOW + 1)
        .expect("still opens within the window");
}

#[test]
fn truncated_frames_are_malformed() {
    let (mut a, _) = pair("k");
    let sealed = a.seal_at("n2", msg(), NOW);
    for len in 1..=HEADER_FIELDS {
        let mut b = Authenticator::new(&cfg("k"), "n2", NOW).expect("n2");
        assert_eq!(
            b.open(sealed[..len].to_vec(), NOW),
            Err(AuthError::Malformed),
            "len {len}"
        );
    }
    let mut b = Authenticator::new(&cfg("k"), "n2", NOW).expect("n2");
    let mut short_tag = sealed.clone();
    short_tag[5].truncate(63);
    assert_eq!(b.open(short_tag, NOW), Err(AuthError::Malformed));
}

#[test]
fn an_unauthenticated_frame_is_missing_its_tag() {
    let (_, mut b) = pair("k");
    assert_eq!(b.open(msg(), NOW), Err(AuthError::MissingTag));
    assert_eq!(b.open(Vec::new(), NOW), Err(AuthError::MissingTag));
}

#[test]
fn mode_none_passes_frames_through_and_flags_auth_headers() {
    let none = AuthConfig::default();
    let mut a = Authenticator::new(&none, "n1", NOW).expect("n1");
    let mut b = Authenticator::new(&none, "n2", NOW).expect("n2");
    let sealed = a.seal_at("n2", msg(), NOW);
    assert_eq!(sealed, msg());
    assert_eq!(b.open(sealed, NOW).expect("passes"), msg());
    let mut keyed = Authenticator::new(&cfg("k"), "n1", NOW).expect("keyed");
    assert_eq!(
        b.open(keyed.seal_at("n2", msg(), NOW), NOW),
        Err(AuthError::UnexpectedTag)
    );
}

#[test]
fn the_key_never_appears_in_debug_output() {
    let c = cfg("super-secret-key-material");
    let a = Authenticator::new(&c, "n1", NOW).expect("n1");
    let printed = format!("{c:?} {a:?}");
    assert!(!printed.contains("super-secret"), "{printed}");
    assert!(printed.contains("redacted"));
}

#[test]
fn config_parses_from_yaml_and_validates_the_key_source() {
    let c: AuthConfig =
        serde_yaml::from_str("mode: shared_key\nkey: abcdefghijklmnop\n").expect("yaml");
    assert_eq!(c.mode, AuthMode::SharedKey);
    assert_eq!(c.max_skew_ms, DEFAULT_MAX_SKEW_MS);
    assert!(c.load_key().expect("key").is_some());

    let none: AuthConfig = serde_yaml::from_str("mode: none\n").expect("yaml");
    assert!(none.load_key().expect("ok").is_none());

    let missing: AuthConfig = serde_yaml::from_str("mode: shared_key\n").expect("yaml");
    assert!(matches!(
        missing.load_key(),
        Err(AuthConfigError::MissingKey)
    ));

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("key");
    std::fs::write(&path, "from-file:padded-to-16-bytes\n").expect("write");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let from_file: AuthConfig =
        serde_yaml::from_str(&format!("mode: shared_key\nkey_file: {}\n", path.display()))
            .expect("yaml");
    let mut a = Authenticator::new(&from_file, "n1", NOW).expect("n1");
    let mut b = Authenticator::new(&cfg("from-file"), "n2", NOW).expect("n2");
    b.open(a.seal_at("n2", msg(), NOW), NOW)
        .expect("trailing newline is not part of the key");

    assert!(serde_yaml::from_str::<AuthConfig>("mode: hmac\n").is_err());
}

#[test]
fn a_key_shorter_than_16_bytes_is_refused_inline_or_from_a_file() {
    let short: AuthConfig =
        serde_yaml::from_str("mode: shared_key\nkey: fifteen-bytes!!\n").expect("yaml");
    let e = short.load_key().unwrap_err();
    assert!(matches!(e, AuthConfigError::TooShort(15)), "{e}");
    assert!(e.to_string().contains("at least 16"), "{e}");
    assert!(Authenticator::new(&short, "n1", NOW).is_err());

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("key");
    std::fs::write(&path, "short\n").expect("write");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let from_file: AuthConfig =
        serde_yaml::from_str(&format!("mode: shared_key\nkey_file: {}\n", path.display()))
            .expect("yaml");
    assert!(matches!(
        from_file.load_key(),
        Err(AuthConfigError::TooShort(5))
    ));
}

#[test]
fn a_key_file_others_can_read_is_refused_and_an_inline_key_warns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("key");
    std::fs::write(&path, "a-long-enough-shared-key\n").expect("write");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o640))
        .expect("chmod");
    let c: AuthConfig =
        serde_yaml::from_str(&format!("mode: shared_key\nkey_file: {}\n", path.display()))
            .expect("yaml");
    let e = c.load_key().unwrap_err();
    assert!(
        e.to_string().contains("auth.key_file") && e.to_string().contains("0640"),
        "{e}"
    );
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());

    let inline: AuthConfig =
        serde_yaml::from_str("mode: shared_key\nkey: a-long-enough-shared-key\n").expect("yaml");
    assert!(
        inline
            .warnings()
            .iter()
            .any(|w| w.contains("auth.key is inline")),
        "{:?}",
        inline.warnings()
    );
    assert!(serde_yaml::from_str::<AuthConfig>("mode: none\nkeys: x\n").is_err());
}

impl Authenticator {
    fn clone_for_test(&self) -> Authenticator {
        Authenticator {
            node_id: self.node_id.clone(),
            boot_id: self.boot_id,
            seq: self.seq,
            mac: self.mac.clone(),
            max_skew_ms: self.max_skew_ms,
            high_water: self.high_water.clone(),
        }
    }
}

proptest! {
    #[test]
    fn opening_arbitrary_frames_never_panics(
        fields in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..10),
        with_marker in any::<bool>(),
        now in any::<u64>(),
    ) {
        let mut fields = fields;
        if with_marker {
            fields.insert(0, AUTH_MARKER.to_vec());
        }
        let mut b = Authenticator::new(&cfg("k"), "n2", NOW).expect("n2");
        let _ = b.open(fields.clone(), now);
        let mut n = Authenticator::new(&AuthConfig::default(), "n2", NOW).expect("n2");
        let _ = n.open(fields, now);
    }

    #[test]
    fn any_inner_message_round_trips(
        fields in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..8),
    ) {
        let (mut a, mut b) = pair("prop-key");
        let sealed = a.seal_at("n2", fields.clone(), NOW);
        prop_assert_eq!(b.open(sealed, NOW).expect("opens"), fields);
    }

    #[test]
    fn a_mutated_header_number_never_opens(delta in 1u64..1000, which in 2usize..5) {
        let (mut a, mut b) = pair("prop-key");
        let mut sealed = a.seal_at("n2", msg(), NOW);
        let v: u64 = std::str::from_utf8(&sealed[which]).expect("utf8").parse().expect("num");
        sealed[which] = (v + delta).to_string().into_bytes();
        prop_assert!(b.open(sealed, NOW).is_err());
    }
}
