//! The lexer: module source text to tokens with positions.
//!
//! Keywords are case-sensitive and lower case; identifiers are ASCII letters,
//! digits and `_`. Comments are `// ...` to the end of the line and
//! `/* ... */` (not nested). Anything else is an error naming line and column.

use crate::ast::Pos;
use crate::error::{CompileError, CompileErrorKind};

/// The longest source the front end accepts; modules are meant to be small
/// (the paper's NIC had 2 MB of memory for everything).
pub const MAX_SOURCE_LEN: usize = 1 << 20;

/// A token kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// Identifier (including built-in names and constants).
    Ident(String),
    /// Unsigned integer literal; the parser applies the sign.
    Int(u64),
    /// Float literal.
    Float(f64),
    /// A keyword.
    Kw(Kw),
    /// Punctuation or operator.
    Sym(&'static str),
    /// End of input.
    Eof,
}

/// Keywords of the language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kw {
    /// `func`
    Func,
    /// `end`
    End,
    /// `var`
    Var,
    /// `const`
    Const,
    /// `if`
    If,
    /// `then`
    Then,
    /// `elsif`
    Elsif,
    /// `else`
    Else,
    /// `while`
    While,
    /// `do`
    Do,
    /// `return`
    Return,
    /// `and`
    And,
    /// `or`
    Or,
    /// `not`
    Not,
    /// `int`
    Int,
    /// `float`
    Float,
}

impl Kw {
    fn from_word(w: &str) -> Option<Kw> {
        Some(match w {
            "func" => Kw::Func,
            "end" => Kw::End,
            "var" => Kw::Var,
            "const" => Kw::Const,
            "if" => Kw::If,
            "then" => Kw::Then,
            "elsif" => Kw::Elsif,
            "else" => Kw::Else,
            "while" => Kw::While,
            "do" => Kw::Do,
            "return" => Kw::Return,
            "and" => Kw::And,
            "or" => Kw::Or,
            "not" => Kw::Not,
            "int" => Kw::Int,
            "float" => Kw::Float,
            _ => return None,
        })
    }

    /// The keyword as written.
    pub fn as_str(self) -> &'static str {
        match self {
            Kw::Func => "func",
            Kw::End => "end",
            Kw::Var => "var",
            Kw::Const => "const",
            Kw::If => "if",
            Kw::Then => "then",
            Kw::Elsif => "elsif",
            Kw::Else => "else",
            Kw::While => "while",
            Kw::Do => "do",
            Kw::Return => "return",
            Kw::And => "and",
            Kw::Or => "or",
            Kw::Not => "not",
            Kw::Int => "int",
            Kw::Float => "float",
        }
    }
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "`{s}`"),
            Tok::Int(v) => write!(f, "`{v}`"),
            Tok::Float(v) => write!(f, "`{v:?}`"),
            Tok::Kw(k) => write!(f, "`{}`", k.as_str()),
            Tok::Sym(s) => write!(f, "`{s}`"),
            Tok::Eof => f.write_str("end of input"),
        }
    }
}

/// A token and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Its first character's position.
    pub pos: Pos,
}

/// Operators, longest first so that `<=` wins over `<`.
const SYMBOLS: &[&str] = &[
    "==", "!=", "<=", ">=", "<<", ">>", "<", ">", "=", "+", "-", "*", "/", "%", "&", "|", "^", "(",
    ")", "[", "]", ",", ";", ":",
];

struct Cursor<'a> {
    src: &'a str,
    off: usize,
    line: u32,
    col: u32,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        self.src.get(self.off..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.off += c.len_utf8();
        if c == '\n' {
            self.line = self.line.saturating_add(1);
            self.col = 1;
        } else {
            self.col = self.col.saturating_add(1);
        }
        Some(c)
    }

    /// Advances over an ASCII prefix of `n` bytes (no newlines in it).
    fn bump_ascii(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }
}

/// Splits `src` into tokens, ending with [`Tok::Eof`].
pub fn lex(src: &str) -> Result<Vec<Token>, CompileError> {
    if src.len() > MAX_SOURCE_LEN {
        return Err(CompileError::new(
            Pos { line: 1, col: 1 },
            CompileErrorKind::TooLong(MAX_SOURCE_LEN),
        ));
    }
    let mut c = Cursor {
        src,
        off: 0,
        line: 1,
        col: 1,
    };
    let mut out = Vec::new();
    loop {
        skip_space_and_comments(&mut c)?;
        let pos = c.pos();
        let Some(ch) = c.peek() else {
            out.push(Token { tok: Tok::Eof, pos });
            return Ok(out);
        };
        let tok = if ch.is_ascii_alphabetic() || ch == '_' {
            let word = take_while(&mut c, |ch| ch.is_ascii_alphanumeric() || ch == '_');
            match Kw::from_word(word) {
                Some(k) => Tok::Kw(k),
                None => Tok::Ident(word.to_string()),
            }
        } else if ch.is_ascii_digit() {
            lex_number(&mut c, pos)?
        } else if let Some(sym) = SYMBOLS.iter().find(|s| c.rest().starts_with(**s)) {
            c.bump_ascii(sym.len());
            Tok::Sym(sym)
        } else {
            return Err(CompileError::new(pos, CompileErrorKind::UnexpectedChar(ch)));
        };
        out.push(Token { tok, pos });
    }
}

fn take_while<'a>(c: &mut Cursor<'a>, f: impl Fn(char) -> bool) -> &'a str {
    let start = c.off;
    while let Some(ch) = c.peek() {
        if !f(ch) {
            break;
        }
        c.bump();
    }
    c.src.get(start..c.off).unwrap_or("")
}

fn skip_space_and_comments(c: &mut Cursor<'_>) -> Result<(), CompileError> {
    loop {
        let rest = c.rest();
        if rest.starts_with("//") {
            while let Some(ch) = c.peek() {
                if ch == '\n' {
                    break;
                }
                c.bump();
            }
        } else if rest.starts_with("/*") {
            let pos = c.pos();
            c.bump_ascii(2);
            loop {
                if c.rest().starts_with("*/") {
                    c.bump_ascii(2);
                    break;
                }
                if c.bump().is_none() {
                    return Err(CompileError::new(
                        pos,
                        CompileErrorKind::UnterminatedComment,
                    ));
                }
            }
        } else if c.peek().is_some_and(char::is_whitespace) {
            c.bump();
        } else {
            return Ok(());
        }
    }
}

fn lex_number(c: &mut Cursor<'_>, pos: Pos) -> Result<Tok, CompileError> {
    let rest = c.rest();
    if rest.starts_with("0x") || rest.starts_with("0X") {
        c.bump_ascii(2);
        let digits = take_while(c, |ch| ch.is_ascii_alphanumeric() || ch == '_');
        let clean: String = digits.chars().filter(|&ch| ch != '_').collect();
        if clean.is_empty() || !clean.chars().all(|ch| ch.is_ascii_hexdigit()) {
            return Err(CompileError::new(
                pos,
                CompileErrorKind::BadNumber(format!("0x{digits}")),
            ));
        }
        return u64::from_str_radix(&clean, 16).map(Tok::Int).map_err(|_| {
            CompileError::new(pos, CompileErrorKind::IntTooLarge(format!("0x{digits}")))
        });
    }
    let start = c.off;
    take_while(c, |ch| ch.is_ascii_digit() || ch == '_');
    let mut is_float = false;
    // A fraction needs a digit after the dot.
    let r = c.rest();
    if r.starts_with('.') && r.chars().nth(1).is_some_and(|d| d.is_ascii_digit()) {
        is_float = true;
        c.bump();
        take_while(c, |ch| ch.is_ascii_digit() || ch == '_');
    }
    let r = c.rest();
    if r.starts_with('e') || r.starts_with('E') {
        let mut it = r.chars().skip(1);
        let next = it.next();
        let ok = match next {
            Some(d) if d.is_ascii_digit() => true,
            Some('+') | Some('-') => it.next().is_some_and(|d| d.is_ascii_digit()),
            _ => false,
        };
        if ok {
            is_float = true;
            c.bump();
            if matches!(c.peek(), Some('+') | Some('-')) {
                c.bump();
            }
            take_while(c, |ch| ch.is_ascii_digit());
        }
    }
    let text = c.src.get(start..c.off).unwrap_or("");
    // A letter glued to a number (`12abc`) is a typo, not two tokens.
    if c.peek()
        .is_some_and(|ch| ch.is_ascii_alphabetic() || ch == '_')
    {
        let tail = take_while(c, |ch| ch.is_ascii_alphanumeric() || ch == '_');
        return Err(CompileError::new(
            pos,
            CompileErrorKind::BadNumber(format!("{text}{tail}")),
        ));
    }
    let clean: String = text.chars().filter(|&ch| ch != '_').collect();
    if is_float {
        clean
            .parse::<f64>()
            .map(Tok::Float)
            .map_err(|_| CompileError::new(pos, CompileErrorKind::BadNumber(text.to_string())))
    } else {
        clean
            .parse::<u64>()
            .map(Tok::Int)
            .map_err(|_| CompileError::new(pos, CompileErrorKind::IntTooLarge(text.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        lex(src).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn lexes_keywords_symbols_and_numbers() {
        assert_eq!(
            toks("if a<=0x1F then x = 1.5e3; end if; // c\n/* b */ y"),
            vec![
                Tok::Kw(Kw::If),
                Tok::Ident("a".into()),
                Tok::Sym("<="),
                Tok::Int(31),
                Tok::Kw(Kw::Then),
                Tok::Ident("x".into()),
                Tok::Sym("="),
                Tok::Float(1500.0),
                Tok::Sym(";"),
                Tok::Kw(Kw::End),
                Tok::Kw(Kw::If),
                Tok::Sym(";"),
                Tok::Ident("y".into()),
                Tok::Eof,
            ]
        );
    }

    #[test]
    fn positions_count_lines_and_columns() {
        let t = lex("a\n  bb").unwrap();
        assert_eq!(t[1].pos, Pos { line: 2, col: 3 });
    }

    #[test]
    fn errors_name_the_position() {
        let e = lex("x = 1;\n  y = $;").unwrap_err();
        assert_eq!(e.pos, Pos { line: 2, col: 7 });
        assert_eq!(e.kind, CompileErrorKind::UnexpectedChar('$'));
        let e = lex("/* open").unwrap_err();
        assert_eq!(e.kind, CompileErrorKind::UnterminatedComment);
        let e = lex("99999999999999999999").unwrap_err();
        assert!(matches!(e.kind, CompileErrorKind::IntTooLarge(_)));
        let e = lex("12ab").unwrap_err();
        assert!(matches!(e.kind, CompileErrorKind::BadNumber(_)));
    }
}
