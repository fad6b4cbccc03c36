//! A cheap pass over the config text before the YAML parser sees it.
//!
//! The YAML parser recurses (and backtracks) on nesting: a file of 100 000
//! nested `[` kept `elector check-config` busy for more than 10 s. An elector
//! config is small and shallow (the deepest key, `peers[].id`, is three levels
//! down), so a bound far above any real config costs nothing and turns hostile
//! or mangled input into one precise error in microseconds. The scan is
//! linear, allocation free, and understands just enough YAML to not count
//! brackets inside quoted strings and comments.

use thiserror::Error;

/// The largest config file accepted: real ones are a few kilobytes.
pub const MAX_BYTES: u64 = 1024 * 1024;
/// The deepest flow nesting (`[`/`{`) accepted.
pub const MAX_FLOW_DEPTH: usize = 32;
/// The deepest block nesting (distinct indentation levels) accepted.
pub const MAX_INDENT_DEPTH: usize = 32;

/// Which limit the text broke; each message names the limit and its value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PrescanError {
    #[error("the file is larger than {MAX_BYTES} bytes, the limit for a config file")]
    TooLarge,
    #[error(
        "line {line}: brackets ([ or {{) nest {MAX_FLOW_DEPTH} deep, the limit for a config file"
    )]
    FlowTooDeep { line: usize },
    #[error("line {line}: indentation nests {MAX_INDENT_DEPTH} levels deep, the limit for a config file")]
    IndentTooDeep { line: usize },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
}

/// Checks the size and both nestings; the first limit broken is the error.
pub fn prescan(text: &str) -> Result<(), PrescanError> {
    if text.len() as u64 > MAX_BYTES {
        return Err(PrescanError::TooLarge);
    }
    let mut flow = 0usize;
    let mut quote = Quote::None;
    // Indentation columns of the enclosing block levels, innermost last.
    let mut indents = [0usize; MAX_INDENT_DEPTH];
    let mut levels = 0usize;
    for (index, line) in text.split('\n').enumerate() {
        let line_no = index + 1;
        if quote == Quote::None && flow == 0 {
            let mut content = line.trim_start_matches(' ');
            if !content.trim().is_empty() && !content.starts_with('#') {
                let mut col = line.len() - content.len();
                while levels > 0 && indents[levels - 1] >= col {
                    levels -= 1;
                }
                // Each `- ` opens a level too: `- - - x` nests three deep.
                loop {
                    if levels == MAX_INDENT_DEPTH {
                        return Err(PrescanError::IndentTooDeep { line: line_no });
                    }
                    indents[levels] = col;
                    levels += 1;
                    let Some(rest) = content.strip_prefix("- ") else {
                        break;
                    };
                    let item = rest.trim_start_matches(' ');
                    col += content.len() - item.len();
                    content = item;
                }
            }
        }
        let mut prev_blank = true;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match (quote, c) {
                (Quote::None, '#') if prev_blank => break,
                (Quote::None, '\'') => quote = Quote::Single,
                (Quote::None, '"') => quote = Quote::Double,
                (Quote::None, '[' | '{') => {
                    flow += 1;
                    if flow >= MAX_FLOW_DEPTH {
                        return Err(PrescanError::FlowTooDeep { line: line_no });
                    }
                }
                (Quote::None, ']' | '}') => flow = flow.saturating_sub(1),
                (Quote::Single, '\'') if chars.peek() == Some(&'\'') => {
                    chars.next();
                }
                (Quote::Single, '\'') | (Quote::Double, '"') => quote = Quote::None,
                (Quote::Double, '\\') => {
                    chars.next();
                }
                _ => {}
            }
            prev_blank = c == ' ' || c == '\t';
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_hundred_thousand_nested_brackets_fail_at_once_naming_the_limit() {
        let text = format!("node_id: {}", "[".repeat(100_000));
        let started = Instant::now();
        let err = prescan(&text).unwrap_err();
        assert!(started.elapsed() < Duration::from_millis(100));
        assert_eq!(err, PrescanError::FlowTooDeep { line: 1 });
        assert!(err.to_string().contains("brackets ([ or {) nest 32 deep"));
    }

    #[test]
    fn deep_indentation_fails_naming_the_line() {
        let text: String = (0..40)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect();
        assert_eq!(
            prescan(&text),
            Err(PrescanError::IndentTooDeep { line: 33 })
        );
    }

    #[test]
    fn sequences_nested_on_one_line_count_as_indentation() {
        let text = format!("a:\n{}x\n", "- ".repeat(100_000));
        assert_eq!(prescan(&text), Err(PrescanError::IndentTooDeep { line: 2 }));
    }

    #[test]
    fn a_file_above_a_mebibyte_is_too_large() {
        let text = format!("# {}\n", "x".repeat(MAX_BYTES as usize));
        assert!(matches!(prescan(&text), Err(PrescanError::TooLarge)));
    }

    #[test]
    fn brackets_in_quotes_and_comments_do_not_count() {
        let deep = "[".repeat(40);
        let text = format!(
            "a: \"{deep}\\\"{deep}\"\nb: '{deep}''{deep}'\nc: 1 # {deep}\n#{deep}\nd: [[1], {{e: [2]}}]\n"
        );
        assert_eq!(prescan(&text), Ok(()));
    }

    #[test]
    fn a_real_config_with_lists_and_maps_passes() {
        let text = "node_id: n1\nlisten:\n  election: \"0.0.0.0:7400\"\npeers:\n  - id: n1\n    election: \"h:1\"\n  - { id: n2, election: \"h:2\" }\ntimings: {}\n";
        assert_eq!(prescan(text), Ok(()));
    }
}
