//! Errors of the source front end (lexer, parser, compiler).
//!
//! All of them carry a line and column so that `outboard nicvm check` can
//! print `file:line:col: message` the way compilers do.

use crate::ast::{Pos, Type};

/// A rejected module source, with the position of the problem.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{pos}: {kind}")]
pub struct CompileError {
    /// Where the problem is.
    pub pos: Pos,
    /// What it is.
    pub kind: CompileErrorKind,
}

impl CompileError {
    pub(crate) fn new(pos: Pos, kind: CompileErrorKind) -> Self {
        CompileError { pos, kind }
    }
}

/// Why a module source was rejected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileErrorKind {
    /// The lexer met a character that starts no token.
    #[error("unexpected character {0:?}")]
    UnexpectedChar(char),
    /// A `/* ...` comment that never ends.
    #[error("unterminated block comment")]
    UnterminatedComment,
    /// A malformed number literal.
    #[error("malformed number {0:?}")]
    BadNumber(String),
    /// An integer literal that does not fit in 64 bits.
    #[error("integer literal {0} does not fit in a 64-bit integer")]
    IntTooLarge(String),
    /// The parser expected something else.
    #[error("expected {expected}, found {found}")]
    Expected {
        /// What the grammar allows here.
        expected: String,
        /// What the source has.
        found: String,
    },
    /// Expressions or statements nested deeper than the front end allows.
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
    /// The source is longer than the front end accepts.
    #[error("module source longer than {0} bytes")]
    TooLong(usize),
    /// A name used but never declared.
    #[error("unknown variable or constant `{0}`")]
    UnknownName(String),
    /// A call of a function that does not exist.
    #[error("unknown function `{0}`")]
    UnknownFunction(String),
    /// A name declared twice in the same scope, or shadowing a reserved one.
    #[error("`{0}` is already declared")]
    Duplicate(String),
    /// A reserved name (built-in function or constant) used as a declaration.
    #[error("`{0}` is a reserved name")]
    Reserved(String),
    /// An operand of the wrong type.
    #[error("type mismatch: expected {expected}, found {found}{hint}")]
    TypeMismatch {
        /// Type the context requires.
        expected: Type,
        /// Type the expression has.
        found: Type,
        /// A suggestion, possibly empty.
        hint: &'static str,
    },
    /// An operator applied to a type it does not support.
    #[error("operator `{op}` does not apply to {ty}")]
    BadOperand {
        /// The operator.
        op: &'static str,
        /// The operand type.
        ty: Type,
    },
    /// A call with the wrong number of arguments.
    #[error("`{name}` takes {expected} argument(s), {found} given")]
    Arity {
        /// Function called.
        name: String,
        /// Parameters it has.
        expected: usize,
        /// Arguments given.
        found: usize,
    },
    /// Indexing a scalar, or using an array without an index.
    #[error("`{0}` is {1}")]
    Shape(String, &'static str),
    /// Assigning to a named constant.
    #[error("`{0}` is a constant and cannot be assigned")]
    AssignToConst(String),
    /// A `const`, array length or global initializer that is not constant.
    #[error("not a constant expression")]
    NotConstant,
    /// An array length outside 1..=limit.
    #[error("array length {0} is outside 1..={1}")]
    BadArrayLen(i64, usize),
    /// An array declared with an initializer.
    #[error("arrays cannot have an initializer")]
    ArrayInit,
    /// A constant expression that divides by zero.
    #[error("division by zero in a constant expression")]
    ConstDivByZero,
    /// The module has no `main`.
    #[error("module has no `func main()`")]
    NoMain,
    /// `main` declared with parameters or a float result.
    #[error("`main` must take no parameters and return int")]
    BadMain,
    /// A per-function or per-module limit of the VM was exceeded.
    #[error("too many {what} (limit {limit})")]
    Limit {
        /// Which resource.
        what: &'static str,
        /// Its limit.
        limit: usize,
    },
    /// The compiler produced code its own verifier rejects (a bug).
    #[error("internal compiler error: {0}")]
    Internal(String),
}
