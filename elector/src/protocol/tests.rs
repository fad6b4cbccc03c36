use super::*;
use proptest::prelude::*;

fn hb() -> Heartbeat {
    Heartbeat {
        epoch: 4,
        node_id: "n2".into(),
        role: Role::Replica,
        offset: 99,
        max_epoch: 6,
        primary: Some("n1".into()),
        eligible: true,
        fenced: false,
        lease_lost: false,
        data_epoch: 3,
        stamp: 1234,
        echo: 1200,
        priority: 100,
        floor: None,
        unled: false,
    }
}

#[test]
fn a_huge_epoch_on_the_wire_is_rejected_as_out_of_range() {
    // §3.6 (finding 8): `max_epoch = 2^64-1` would wrap `epoch + 1`.
    let mut fields = Message::Hb(hb()).to_fields();
    fields[5] = u64::MAX.to_string().into_bytes();
    assert_eq!(Message::from_fields(&fields), Err(MessageError::OutOfRange));
    let mut fields = Message::Hb(hb()).to_fields();
    fields[1] = (MAX_EPOCH + 1).to_string().into_bytes();
    assert_eq!(Message::from_fields(&fields), Err(MessageError::OutOfRange));
    let mut fields = Message::Hb(hb()).to_fields();
    fields[10] = (MAX_WIRE_NUMBER + 1).to_string().into_bytes();
    assert_eq!(Message::from_fields(&fields), Err(MessageError::OutOfRange));
}

#[test]
fn a_heartbeat_without_priority_is_the_ten_field_frame_older_electors_decode() {
    // §8.1: a node without preemption announces priority 0, which is the
    // absent field, so a cluster that does not preempt upgrades node by node.
    let plain = Heartbeat {
        priority: 0,
        ..hb()
    };
    let fields = Message::Hb(plain.clone()).to_fields();
    assert_eq!(fields.len(), 11, "HB plus ten arguments");
    assert_eq!(Message::from_fields(&fields), Ok(Message::Hb(plain)));
    assert_eq!(Message::Hb(hb()).to_fields().len(), 12);
}

#[test]
fn the_lease_lost_flag_round_trips() {
    let lost = Heartbeat {
        lease_lost: true,
        fenced: true,
        ..hb()
    };
    assert_eq!(
        Message::from_fields(&Message::Hb(lost.clone()).to_fields()),
        Ok(Message::Hb(lost))
    );
}

#[test]
fn every_message_round_trips_through_fields() {
    let messages = vec![
        Message::Hello {
            node_id: "n1".into(),
            fingerprint: None,
        },
        Message::Hello {
            node_id: "n1".into(),
            fingerprint: Some("m0123456789abcdef/200/3000/600".into()),
        },
        Message::Hb(hb()),
        Message::Offer {
            epoch: 5,
            candidate: "n2".into(),
            offset: 10,
            data_epoch: 4,
            forced: false,
            led: Some(3),
        },
        Message::Accept {
            epoch: 5,
            voter: "n3".into(),
        },
        Message::Reject {
            epoch: 5,
            voter: "n3".into(),
            reason: RejectReason::PrimaryAlive,
            max_epoch: 7,
        },
        Message::Announce {
            epoch: 5,
            primary: "n2".into(),
            primary_addr: "10.0.0.2:6379".into(),
            stamp: 9,
        },
        Message::Handover {
            epoch: 5,
            from: "n2".into(),
            to: "n1".into(),
        },
    ];
    for m in messages {
        assert_eq!(Message::from_fields(&m.to_fields()), Ok(m.clone()), "{m:?}");
    }
}

#[test]
fn a_seed_format_heartbeat_with_five_fields_still_decodes() {
    // protocol §3.1: `HB <epoch> <node_id> <role> <repl_offset>`.
    let fields: Vec<Vec<u8>> = ["HB", "3", "n1", "primary", "42"]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let Message::Hb(hb) = Message::from_fields(&fields).unwrap() else {
        panic!()
    };
    assert_eq!(
        (hb.epoch, hb.max_epoch, hb.offset, hb.role),
        (3, 3, 42, Role::Primary)
    );
    assert!(hb.eligible && hb.primary.is_none());
}

#[test]
fn node_ids_longer_than_32_bytes_are_refused() {
    let long = "x".repeat(33);
    let fields = vec![b"ACCEPT".to_vec(), b"1".to_vec(), long.into_bytes()];
    assert_eq!(Message::from_fields(&fields), Err(MessageError::BadNodeId));
}

#[test]
fn numbers_with_signs_or_overflow_are_refused() {
    for bad in ["-1", "+1", "18446744073709551616", "", "1 "] {
        let fields = vec![b"ACCEPT".to_vec(), bad.as_bytes().to_vec(), b"n1".to_vec()];
        assert_eq!(
            Message::from_fields(&fields),
            Err(MessageError::BadNumber),
            "{bad:?}"
        );
    }
}

proptest! {
    #[test]
    fn arbitrary_fields_never_panic(fields in proptest::collection::vec(
        proptest::collection::vec(any::<u8>(), 0..40), 0..10), kind in 0usize..8) {
        let names = ["HELLO", "HB", "OFFER", "ACCEPT", "REJECT", "ANNOUNCE", "HANDOVER", "X"];
        let mut all = vec![names[kind].as_bytes().to_vec()];
        all.extend(fields);
        let _ = Message::from_fields(&all);
    }
}

#[test]
fn a_heartbeat_with_a_floor_carries_it_after_the_priority_field() {
    // §6.10: the floor follows the priority, which is then written even at 0.
    let floored = Heartbeat {
        priority: 0,
        floor: Some((4, 1_200)),
        ..hb()
    };
    let fields = Message::Hb(floored.clone()).to_fields();
    assert_eq!(fields.len(), 14, "HB plus thirteen arguments");
    assert_eq!(Message::from_fields(&fields), Ok(Message::Hb(floored)));
    let mut half = fields.clone();
    half.pop();
    assert!(
        matches!(Message::from_fields(&half), Err(MessageError::Arity { .. })),
        "a floor needs both its epoch and its offset"
    );
}

#[test]
fn a_forced_offer_round_trips_and_an_unknown_flag_is_refused() {
    // §6.10: an operator's accept-data-loss marks the candidacy.
    let offer = Message::Offer {
        epoch: 9,
        candidate: "n2".into(),
        offset: 0,
        data_epoch: 3,
        forced: true,
        led: None,
    };
    let fields = offer.to_fields();
    assert_eq!(fields.last().map(Vec::as_slice), Some(&b"forced"[..]));
    assert_eq!(Message::from_fields(&fields), Ok(offer));
    let mut bad = fields;
    *bad.last_mut().unwrap() = b"please".to_vec();
    assert_eq!(Message::from_fields(&bad), Err(MessageError::BadFlag));
}

#[test]
fn the_short_form_for_an_elector_before_floors_fits_its_arity_and_keeps_the_priority() {
    // §3.8: an elector before floors accepts at most eleven HB arguments and
    // four OFFER arguments, and drops (and disconnects over) anything longer.
    let floored = Heartbeat {
        floor: Some((4, 1_200)),
        ..hb()
    };
    let short = Message::Hb(floored.clone()).to_fields_for(PeerForm::Legacy);
    assert!(short.len() - 1 <= 11, "{} arguments", short.len() - 1);
    assert_eq!(
        Message::from_fields(&short),
        Ok(Message::Hb(Heartbeat {
            floor: None,
            ..floored.clone()
        }))
    );
    assert_eq!(
        Message::from_fields(&Message::Hb(floored.clone()).to_fields_for(PeerForm::Full)),
        Ok(Message::Hb(floored))
    );
    let forced = Message::Offer {
        epoch: 9,
        candidate: "n2".into(),
        offset: 7,
        data_epoch: 3,
        forced: true,
        led: Some(2),
    };
    let short = forced.to_fields_for(PeerForm::Legacy);
    assert!(short.len() - 1 <= 4);
    assert_eq!(
        Message::from_fields(&short),
        Ok(Message::Offer {
            epoch: 9,
            candidate: "n2".into(),
            offset: 7,
            data_epoch: 3,
            forced: false,
            led: None,
        })
    );
}

#[test]
fn a_heartbeat_says_its_sender_never_led_its_epoch_by_a_flag_older_electors_ignore() {
    // §6.10, §3.8: a letter in the flags field, so no form changes.
    let unled = Heartbeat {
        unled: true,
        ..hb()
    };
    let fields = Message::Hb(unled.clone()).to_fields();
    assert_eq!(fields.len(), Message::Hb(hb()).to_fields().len());
    assert_eq!(Message::from_fields(&fields), Ok(Message::Hb(unled)));
    assert_eq!(
        Message::from_fields(&Message::Hb(hb()).to_fields()),
        Ok(Message::Hb(hb())),
        "absent, it says nothing"
    );
}

#[test]
fn an_offer_carries_the_epoch_its_candidate_last_led_only_to_a_peer_that_reads_it() {
    // §3.8, §6.10: `led` came after floors; an elector that reads floors but
    // not `led` accepts at most five OFFER arguments, the fifth `forced`.
    let offer = |forced, led| Message::Offer {
        epoch: 9,
        candidate: "n1".into(),
        offset: 155,
        data_epoch: 2,
        forced,
        led,
    };
    for (forced, led) in [
        (false, Some(2)),
        (true, Some(2)),
        (false, None),
        (true, None),
    ] {
        let full = offer(forced, led).to_fields_for(PeerForm::Full);
        assert_eq!(Message::from_fields(&full), Ok(offer(forced, led)));
        let floors = offer(forced, led).to_fields_for(PeerForm::Floors);
        assert!(floors.len() - 1 <= 5, "{} arguments", floors.len() - 1);
        let tail = floors.get(5).map(Vec::as_slice);
        assert!(tail.is_none() || tail == Some(&b"forced"[..]), "{tail:?}");
        assert_eq!(Message::from_fields(&floors), Ok(offer(forced, None)));
    }
    let unforced = offer(false, Some(2)).to_fields();
    assert_eq!(unforced[5], b"-".to_vec(), "the flag's place is kept");
    let mut huge = unforced;
    huge[6] = b"99999999999999999999".to_vec();
    assert!(
        Message::from_fields(&huge).is_err(),
        "an out-of-range led is refused"
    );
}

#[test]
fn a_heartbeat_says_which_of_the_added_fields_its_sender_reads() {
    // §3.8: the flag travels in the flags field, which older electors read
    // letter by letter, so they ignore it.
    let fields = Message::Hb(hb()).to_fields();
    assert_eq!(heartbeat_form(&fields), Some(PeerForm::Full));
    let fenced = Message::Hb(Heartbeat {
        eligible: false,
        fenced: true,
        ..hb()
    });
    assert_eq!(
        Message::from_fields(&fenced.to_fields()),
        Ok(fenced.clone()),
        "the flag does not disturb the others"
    );
    let mut old = Message::Hb(hb()).to_fields();
    old[7] = b"eF".to_vec();
    assert_eq!(heartbeat_form(&old), Some(PeerForm::Floors), "before led");
    old[7] = b"e".to_vec();
    assert_eq!(heartbeat_form(&old), Some(PeerForm::Legacy));
    old.truncate(5);
    assert_eq!(heartbeat_form(&old), Some(PeerForm::Legacy), "seed format");
    let accept = Message::Accept {
        epoch: 1,
        voter: "n1".into(),
    };
    assert_eq!(heartbeat_form(&accept.to_fields()), None);
}
