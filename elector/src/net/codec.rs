//! RESP2 framing for the election transport (protocol §Wire format).
//!
//! Every election message is a RESP2 array of bulk strings. The decoder is
//! *bounded*: it refuses arrays longer than [`Limits::max_array_len`] and bulk
//! strings longer than [`Limits::max_bulk_len`] before allocating anything, so a
//! hostile or corrupted length prefix can never make us allocate gigabytes or
//! wait forever for bytes that will not come. It never panics on any input
//! (a property test feeds it arbitrary bytes).

use thiserror::Error;

/// Caps applied while decoding. Election frames are tiny (a handful of short
/// fields), so the defaults are generous yet still small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) max_array_len: usize,
    pub(crate) max_bulk_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_array_len: 64,
            max_bulk_len: 4096,
        }
    }
}

/// Why a byte stream is not a valid frame. Any of these ends the connection it
/// came from; nothing else is affected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum DecodeError {
    #[error("expected '{expected}' but found byte 0x{found:02x}")]
    UnexpectedByte { expected: char, found: u8 },
    #[error("length prefix is not a decimal number")]
    BadLength,
    #[error("array of {0} elements exceeds the limit")]
    ArrayTooLong(i64),
    #[error("bulk string of {0} bytes exceeds the limit")]
    BulkTooLong(i64),
    #[error("negative or null length {0} is not allowed in an election frame")]
    NegativeLength(i64),
    #[error("bulk string is not terminated by CRLF")]
    MissingCrlf,
    #[error("length line longer than 20 bytes")]
    LengthLineTooLong,
}

/// Short name of the error, for metrics labels (`messages_rejected{reason}`).
impl DecodeError {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            DecodeError::UnexpectedByte { .. } => "bad_type",
            DecodeError::BadLength | DecodeError::LengthLineTooLong => "bad_length",
            DecodeError::ArrayTooLong(_) => "array_too_long",
            DecodeError::BulkTooLong(_) => "bulk_too_long",
            DecodeError::NegativeLength(_) => "negative_length",
            DecodeError::MissingCrlf => "missing_crlf",
        }
    }
}

/// One decoded frame (its fields) and how many bytes of input it used.
pub(crate) type Frame = (Vec<Vec<u8>>, usize);

/// Decodes one frame from the front of `buf`.
///
/// Returns `Ok(None)` when `buf` holds only a prefix of a valid frame (read
/// more bytes and call again), or `Ok(Some((fields, consumed)))`.
pub(crate) fn decode(buf: &[u8], limits: &Limits) -> Result<Option<Frame>, DecodeError> {
    let mut pos = 0;
    let Some(count) = read_length_line(buf, &mut pos, b'*')? else {
        return Ok(None);
    };
    if count < 0 {
        return Err(DecodeError::NegativeLength(count));
    }
    if count as u64 > limits.max_array_len as u64 {
        return Err(DecodeError::ArrayTooLong(count));
    }
    let mut fields = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let Some(len) = read_length_line(buf, &mut pos, b'$')? else {
            return Ok(None);
        };
        if len < 0 {
            return Err(DecodeError::NegativeLength(len));
        }
        if len as u64 > limits.max_bulk_len as u64 {
            return Err(DecodeError::BulkTooLong(len));
        }
        let len = len as usize;
        if buf.len() < pos + len + 2 {
            return Ok(None);
        }
        if &buf[pos + len..pos + len + 2] != b"\r\n" {
            return Err(DecodeError::MissingCrlf);
        }
        fields.push(buf[pos..pos + len].to_vec());
        pos += len + 2;
    }
    Ok(Some((fields, pos)))
}

/// Reads `<prefix><decimal>\r\n` at `*pos`. `Ok(None)` means incomplete.
fn read_length_line(buf: &[u8], pos: &mut usize, prefix: u8) -> Result<Option<i64>, DecodeError> {
    let Some(&first) = buf.get(*pos) else {
        return Ok(None);
    };
    if first != prefix {
        return Err(DecodeError::UnexpectedByte {
            expected: prefix as char,
            found: first,
        });
    }
    let start = *pos + 1;
    // A valid i64 has at most 20 characters; anything longer is garbage.
    let window = &buf[start..buf.len().min(start + 22)];
    let Some(cr) = window.iter().position(|&b| b == b'\r') else {
        if window.len() >= 22 {
            return Err(DecodeError::LengthLineTooLong);
        }
        return Ok(None);
    };
    if cr > 20 {
        return Err(DecodeError::LengthLineTooLong);
    }
    match window.get(cr + 1) {
        None => return Ok(None),
        Some(b'\n') => {}
        Some(_) => return Err(DecodeError::MissingCrlf),
    }
    let digits = std::str::from_utf8(&window[..cr]).map_err(|_| DecodeError::BadLength)?;
    let value: i64 = digits.parse().map_err(|_| DecodeError::BadLength)?;
    *pos = start + cr + 2;
    Ok(Some(value))
}

/// Appends one frame (array of bulk strings) to `out`.
pub(crate) fn encode(fields: &[&[u8]], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("*{}\r\n", fields.len()).as_bytes());
    for field in fields {
        out.extend_from_slice(format!("${}\r\n", field.len()).as_bytes());
        out.extend_from_slice(field);
        out.extend_from_slice(b"\r\n");
    }
}

/// Convenience over [`encode`] for owned fields.
pub fn encode_owned(fields: &[Vec<u8>]) -> Vec<u8> {
    let refs: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
    let mut out = Vec::new();
    encode(&refs, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn a_complete_frame_decodes_and_reports_bytes_consumed() {
        let bytes = b"*2\r\n$2\r\nHB\r\n$1\r\n7\r\nrest";
        let (fields, used) = decode(bytes, &limits()).unwrap().unwrap();
        assert_eq!(fields, vec![b"HB".to_vec(), b"7".to_vec()]);
        assert_eq!(used, bytes.len() - 4);
    }

    #[test]
    fn every_strict_prefix_of_a_frame_asks_for_more_bytes() {
        let bytes = encode_owned(&[b"OFFER".to_vec(), b"12".to_vec(), b"n1".to_vec()]);
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut], &limits()), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn a_huge_bulk_length_is_refused_before_any_allocation() {
        let bytes = b"*1\r\n$999999999999\r\n";
        assert_eq!(
            decode(bytes, &limits()),
            Err(DecodeError::BulkTooLong(999_999_999_999))
        );
    }

    #[test]
    fn a_huge_array_length_is_refused() {
        assert_eq!(
            decode(b"*100000\r\n", &limits()),
            Err(DecodeError::ArrayTooLong(100_000))
        );
    }

    #[test]
    fn a_length_line_without_end_is_refused_once_it_cannot_be_a_number() {
        let bytes = b"*1111111111111111111111111111";
        assert_eq!(
            decode(bytes, &limits()),
            Err(DecodeError::LengthLineTooLong)
        );
    }

    #[test]
    fn null_and_negative_lengths_are_refused() {
        assert_eq!(
            decode(b"*-1\r\n", &limits()),
            Err(DecodeError::NegativeLength(-1))
        );
        assert_eq!(
            decode(b"*1\r\n$-1\r\n", &limits()),
            Err(DecodeError::NegativeLength(-1))
        );
    }

    #[test]
    fn an_inline_command_is_not_a_frame() {
        assert!(matches!(
            decode(b"PING\r\n", &limits()),
            Err(DecodeError::UnexpectedByte { expected: '*', .. })
        ));
    }

    proptest! {
        #[test]
        fn any_frame_round_trips(fields in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..64), 0..16)) {
            let bytes = encode_owned(&fields);
            let (decoded, used) = decode(&bytes, &limits()).unwrap().unwrap();
            prop_assert_eq!(decoded, fields);
            prop_assert_eq!(used, bytes.len());
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_never_overconsume(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(Some((_, used))) = decode(&bytes, &limits()) {
                prop_assert!(used <= bytes.len());
            }
        }

        #[test]
        fn arbitrary_bytes_after_a_valid_header_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..128)) {
            let mut bytes = b"*3\r\n$2\r\nHB\r\n".to_vec();
            bytes.extend_from_slice(&tail);
            let _ = decode(&bytes, &limits());
        }
    }
}
