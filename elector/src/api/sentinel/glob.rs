//! Redis-style glob patterns for `PSUBSCRIBE`.

/// Redis-style glob (`*`, `?`, `[abc]`, `[a-z]`, `[^x]`, `\x`), linear-time
/// backtracking so a hostile pattern cannot make matching explode.
pub(super) fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    enum Tok {
        Star,
        Any,
        Lit(u8),
        Class(Vec<(u8, u8)>, bool),
    }
    let mut toks = Vec::new();
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'*' => {
                if !matches!(toks.last(), Some(Tok::Star)) {
                    toks.push(Tok::Star);
                }
            }
            b'?' => toks.push(Tok::Any),
            b'\\' if i + 1 < pattern.len() => {
                i += 1;
                toks.push(Tok::Lit(pattern[i]));
            }
            b'[' => {
                let mut j = i + 1;
                let negate = pattern.get(j) == Some(&b'^');
                if negate {
                    j += 1;
                }
                let mut ranges = Vec::new();
                while j < pattern.len() && pattern[j] != b']' {
                    let mut c = pattern[j];
                    if c == b'\\' && j + 1 < pattern.len() {
                        j += 1;
                        c = pattern[j];
                    }
                    if pattern.get(j + 1) == Some(&b'-')
                        && j + 2 < pattern.len()
                        && pattern[j + 2] != b']'
                    {
                        let (a, b) = (c, pattern[j + 2]);
                        ranges.push((a.min(b), a.max(b)));
                        j += 3;
                    } else {
                        ranges.push((c, c));
                        j += 1;
                    }
                }
                toks.push(Tok::Class(ranges, negate));
                i = j; // at ']' or end
            }
            c => toks.push(Tok::Lit(c)),
        }
        i += 1;
    }
    let single = |t: &Tok, c: u8| match t {
        Tok::Any => true,
        Tok::Lit(l) => *l == c,
        Tok::Class(r, neg) => r.iter().any(|(a, b)| (*a..=*b).contains(&c)) != *neg,
        Tok::Star => false,
    };
    let (mut p, mut k) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while k < s.len() {
        if p < toks.len() && matches!(toks[p], Tok::Star) {
            star = Some((p, k));
            p += 1;
        } else if p < toks.len() && single(&toks[p], s[k]) {
            p += 1;
            k += 1;
        } else if let Some((sp, sk)) = star {
            p = sp + 1;
            k = sk + 1;
            star = Some((sp, sk + 1));
        } else {
            return false;
        }
    }
    while p < toks.len() && matches!(toks[p], Tok::Star) {
        p += 1;
    }
    p == toks.len()
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn glob_patterns_match_like_redis() {
        assert!(glob_match(b"*", b"+switch-master"));
        assert!(glob_match(b"+switch-*", b"+switch-master"));
        assert!(glob_match(b"+s?itch-master", b"+switch-master"));
        assert!(glob_match(b"+[rs]witch-*", b"+switch-master"));
        assert!(glob_match(b"+[a-z]witch-*", b"+switch-master"));
        assert!(!glob_match(b"+[^s]witch-*", b"+switch-master"));
        assert!(glob_match(b"\\*", b"*"));
        assert!(!glob_match(b"\\*", b"x"));
        assert!(!glob_match(b"+sdown", b"+switch-master"));
        assert!(!glob_match(b"a*b*c*d*e*f*g*h*i*j*k", &[b'a'; 4000]));
    }
}
