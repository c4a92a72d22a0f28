//! Tokens of the expression language (C-like, with `::` paths, `$registers` and `@`).
//! Every token keeps its byte offset so errors can point at it.

use super::EvalError;

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// An identifier or `a::b::c` path (C++ namespaces, Rust modules).
    Ident(String),
    /// An integer literal; `unsigned`/`long` from its suffix.
    Int { value: u64, unsigned: bool, long: bool },
    Float(f64),
    Char(u32),
    Str(String),
    /// `$rax`, `$pc`, `$sp`.
    Register(String),
    /// Punctuation and operators, as written: `->`, `==`, `(`, ...
    Punct(&'static str),
    End,
}

#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    /// Byte offset in the expression.
    pub pos: usize,
}

/// Longest first, so `->` wins over `-`.
const PUNCT: [&str; 38] = [
    "<<=", ">>=", "->", "::", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "+=", "-=", "*=", "/=", "++", "--", "(", ")",
    "[", "]", ".", ",", "+", "-", "*", "/", "%", "&", "|", "^", "~", "!", "<", ">", "?", ":",
];
const PUNCT_MORE: [&str; 2] = ["=", "@"];

pub fn tokenize(src: &str) -> Result<Vec<Token>, EvalError> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_alphabetic() || c == b'_' {
            // Identifiers join across `::` into one path token (`ns::Type::member`, `crate::m::X`).
            let mut s = String::new();
            loop {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    s.push(bytes[i] as char);
                    i += 1;
                }
                let more = bytes.get(i..i + 2) == Some(b"::")
                    && bytes.get(i + 2).is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_');
                if !more {
                    break;
                }
                s.push_str("::");
                i += 2;
            }
            out.push(Token { tok: Tok::Ident(s), pos: start });
            continue;
        }
        if c == b'$' {
            i += 1;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            if i == start + 1 {
                return Err(EvalError::at(start, "'$' must be followed by a register name, e.g. $rax, $pc, $sp"));
            }
            out.push(Token { tok: Tok::Register(src[start + 1..i].to_ascii_lowercase()), pos: start });
            continue;
        }
        // `.5` is a number, but `pair.0` is a tuple field.
        let after_value = matches!(out.last().map(|t: &Token| &t.tok), Some(Tok::Ident(_) | Tok::Punct(")") | Tok::Punct("]")));
        if c.is_ascii_digit() || (c == b'.' && !after_value && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let (tok, len) = number(&src[i..]).map_err(|m| EvalError::at(start, &m))?;
            out.push(Token { tok, pos: start });
            i += len;
            continue;
        }
        if c == b'\'' || c == b'"' {
            let (text, len) = quoted(&src[i..]).map_err(|m| EvalError::at(start, &m))?;
            let tok = if c == b'"' {
                Tok::Str(text)
            } else {
                let mut chars = text.chars();
                match (chars.next(), chars.next()) {
                    (Some(ch), None) => Tok::Char(ch as u32),
                    _ => return Err(EvalError::at(start, "a character literal holds exactly one character, e.g. 'a' or '\\n'")),
                }
            };
            out.push(Token { tok, pos: start });
            i += len;
            continue;
        }
        let rest = &src[i..];
        match PUNCT.iter().chain(PUNCT_MORE.iter()).find(|p| rest.starts_with(**p)) {
            Some(p) => {
                out.push(Token { tok: Tok::Punct(p), pos: start });
                i += p.len();
            }
            None => {
                let ch = rest.chars().next().unwrap_or('?');
                return Err(EvalError::at(start, &format!("unexpected character '{ch}'")));
            }
        }
    }
    out.push(Token { tok: Tok::End, pos: src.len() });
    Ok(out)
}

/// A numeric literal at the start of `s`: decimal, `0x` hex, `0b` binary, octal, floats,
/// with C suffixes (`u`, `l`, `ul`, `f`) and Rust-style `_` separators.
fn number(s: &str) -> Result<(Tok, usize), String> {
    let b = s.as_bytes();
    let mut i = 0;
    let (radix, digits_start) = match (b.first(), b.get(1).map(|c| c.to_ascii_lowercase())) {
        (Some(b'0'), Some(b'x')) => (16, 2),
        (Some(b'0'), Some(b'b')) => (2, 2),
        _ => (10, 0),
    };
    i = i.max(digits_start);
    let mut is_float = false;
    while i < b.len() {
        let c = b[i];
        let ok = match radix {
            16 => c.is_ascii_hexdigit() || c == b'_',
            2 => c == b'0' || c == b'1' || c == b'_',
            _ => {
                if c == b'.' && !is_float && b.get(i + 1) != Some(&b'.') {
                    is_float = true;
                    true
                } else if (c == b'e' || c == b'E') && i > 0 {
                    is_float = true;
                    if matches!(b.get(i + 1), Some(b'+') | Some(b'-')) {
                        i += 1;
                    }
                    true
                } else {
                    c.is_ascii_digit() || c == b'_'
                }
            }
        };
        if !ok {
            break;
        }
        i += 1;
    }
    let text: String = s[digits_start..i].chars().filter(|c| *c != '_').collect();
    let (mut unsigned, mut long, mut float_suffix) = (false, false, false);
    while i < b.len() {
        match b[i].to_ascii_lowercase() {
            b'u' => unsigned = true,
            b'l' => long = true,
            b'f' if radix == 10 => float_suffix = true,
            c if c.is_ascii_alphanumeric() => return Err(format!("malformed number '{}'", &s[..=i])),
            _ => break,
        }
        i += 1;
    }
    if is_float || float_suffix {
        let v: f64 = text.parse().map_err(|_| format!("malformed number '{}'", &s[..i]))?;
        return Ok((Tok::Float(v), i));
    }
    if text.is_empty() {
        return Err(format!("malformed number '{}'", &s[..i]));
    }
    // C: a leading 0 means octal.
    let (radix, text) = if radix == 10 && text.len() > 1 && text.starts_with('0') { (8, &text[1..]) } else { (radix, &text[..]) };
    let value = u64::from_str_radix(text, radix).map_err(|_| format!("number '{}' does not fit in 64 bits", &s[..i]))?;
    Ok((Tok::Int { value, unsigned, long }, i))
}

/// A quoted literal with C escapes; returns its text and its length in the source.
fn quoted(s: &str) -> Result<(String, usize), String> {
    let quote = s.as_bytes()[0] as char;
    let mut out = String::new();
    let mut chars = s.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            c if c == quote => return Ok((out, i + 1)),
            '\\' => {
                let (_, e) = chars.next().ok_or("unterminated escape")?;
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    '\\' => '\\',
                    '\'' => '\'',
                    '"' => '"',
                    other => return Err(format!("unknown escape '\\{other}'")),
                });
            }
            c => out.push(c),
        }
    }
    Err(format!("unterminated {} literal", if quote == '"' { "string" } else { "character" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn paths_registers_and_operators() {
        assert_eq!(
            toks("ns::x->y[2] >= $RAX"),
            vec![
                Tok::Ident("ns::x".into()),
                Tok::Punct("->"),
                Tok::Ident("y".into()),
                Tok::Punct("["),
                Tok::Int { value: 2, unsigned: false, long: false },
                Tok::Punct("]"),
                Tok::Punct(">="),
                Tok::Register("rax".into()),
                Tok::End
            ]
        );
    }

    #[test]
    fn numbers_in_every_base_with_suffixes() {
        assert_eq!(toks("0x1F")[0], Tok::Int { value: 31, unsigned: false, long: false });
        assert_eq!(toks("0b101")[0], Tok::Int { value: 5, unsigned: false, long: false });
        assert_eq!(toks("010")[0], Tok::Int { value: 8, unsigned: false, long: false });
        assert_eq!(toks("10ul")[0], Tok::Int { value: 10, unsigned: true, long: true });
        assert_eq!(toks("1_000")[0], Tok::Int { value: 1000, unsigned: false, long: false });
        assert_eq!(toks("2.5")[0], Tok::Float(2.5));
        assert_eq!(toks("1e3")[0], Tok::Float(1000.0));
        assert_eq!(toks("'\\n'")[0], Tok::Char(10));
        assert_eq!(toks("\"a\\\"b\"")[0], Tok::Str("a\"b".into()));
    }

    #[test]
    fn errors_point_at_the_offending_character() {
        let e = tokenize("a # b").unwrap_err();
        assert_eq!(e.pos, Some(2));
        assert!(tokenize("99999999999999999999").unwrap_err().message.contains("64 bits"));
        assert!(tokenize("'ab'").is_err());
        assert!(tokenize("\"open").is_err());
    }
}
