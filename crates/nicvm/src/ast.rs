//! The syntax tree of a NICVM module, as the parser builds it.
//!
//! Every node carries its source position so that the compiler can name the
//! line and column of each semantic error. The tree is public so that tests
//! (the differential reference evaluator) and tools can walk it, and it prints
//! back to source with `Display`, which the property tests use to feed
//! generated programs through the whole front end.

use std::fmt;

/// A 1-based line and column in the module source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    /// Line, counting from 1.
    pub line: u32,
    /// Column in characters, counting from 1.
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// The two value types of the language. Both are 64 bits wide so that the
/// VM's slots are untyped words and type errors cannot break memory safety.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    /// Two's-complement 64-bit integer with wrapping arithmetic.
    Int,
    /// IEEE-754 binary64.
    Float,
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Type::Int => "int",
            Type::Float => "float",
        })
    }
}

/// A whole source module: constants, module-level variables and functions.
#[derive(Debug, Clone, PartialEq)]
pub struct Module {
    /// Items in source order.
    pub items: Vec<Item>,
}

/// One top-level declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `const NAME = expr;`
    Const(ConstDecl),
    /// `var name ...;` at module level: keeps its value between invocations.
    Var(VarDecl),
    /// `func name(...) ... end func;`
    Func(FuncDecl),
}

/// A named compile-time constant.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstDecl {
    /// Constant name.
    pub name: String,
    /// Its value; must fold to a literal at compile time.
    pub value: Expr,
    /// Where the declaration starts.
    pub pos: Pos,
}

/// A variable declaration, module-level or local.
#[derive(Debug, Clone, PartialEq)]
pub struct VarDecl {
    /// Variable name.
    pub name: String,
    /// For an array, its element count (a constant expression).
    pub len: Option<Expr>,
    /// Element type; `int` when the source gives none (as in the paper).
    pub ty: Type,
    /// Optional initial value (scalars only).
    pub init: Option<Expr>,
    /// Where the declaration starts.
    pub pos: Pos,
}

/// A function parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Parameter name.
    pub name: String,
    /// Its type; `int` unless given.
    pub ty: Type,
    /// Where it is written.
    pub pos: Pos,
}

/// A function definition.
#[derive(Debug, Clone, PartialEq)]
pub struct FuncDecl {
    /// Function name; `main` is the module's entry point.
    pub name: String,
    /// Parameters in order.
    pub params: Vec<Param>,
    /// Return type; `int` unless given.
    pub ret: Type,
    /// Statements of the body.
    pub body: Vec<Stmt>,
    /// Where the `func` keyword is.
    pub pos: Pos,
}

/// A statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// A local variable declaration.
    Var(VarDecl),
    /// `name = value;` or `name[index] = value;`
    Assign {
        /// Variable assigned to.
        name: String,
        /// Element index for an array.
        index: Option<Expr>,
        /// New value.
        value: Expr,
        /// Where the statement starts.
        pos: Pos,
    },
    /// A call whose result is discarded.
    Call(Expr),
    /// `if c then ... elsif c then ... else ... end if;`
    If {
        /// Condition and body of the `if` and of each `elsif`.
        arms: Vec<(Expr, Vec<Stmt>)>,
        /// The `else` body, if any.
        otherwise: Option<Vec<Stmt>>,
        /// Where the `if` keyword is.
        pos: Pos,
    },
    /// `while c do ... end while;`
    While {
        /// Loop condition, tested before each iteration.
        cond: Expr,
        /// Loop body.
        body: Vec<Stmt>,
        /// Where the `while` keyword is.
        pos: Pos,
    },
    /// `return;` or `return expr;`
    Return {
        /// Returned value; zero of the function's type if absent.
        value: Option<Expr>,
        /// Where the `return` keyword is.
        pos: Pos,
    },
}

/// Unary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// Arithmetic negation (`-`), wrapping for `int`.
    Neg,
    /// Logical negation (`not`): 1 if the operand is 0, else 0.
    Not,
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (traps on integer division by zero)
    Div,
    /// `%` (integers only; traps on zero)
    Rem,
    /// `&` (integers only)
    BitAnd,
    /// `|` (integers only)
    BitOr,
    /// `^` (integers only)
    BitXor,
    /// `<<` (integers only; shift count taken modulo 64)
    Shl,
    /// `>>` arithmetic (integers only; shift count taken modulo 64)
    Shr,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `and` (short-circuit, integers, result 0 or 1)
    And,
    /// `or` (short-circuit, integers, result 0 or 1)
    Or,
}

impl BinOp {
    /// The operator as written in source.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }

    /// True for the six comparisons, whose result is always `int`.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
        )
    }
}

/// An expression with its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    /// What the expression is.
    pub kind: ExprKind,
    /// Where it starts.
    pub pos: Pos,
}

/// The forms an expression takes.
#[derive(Debug, Clone, PartialEq)]
pub enum ExprKind {
    /// Integer literal.
    Int(i64),
    /// Float literal.
    Float(f64),
    /// A variable or a named constant.
    Name(String),
    /// `name[index]`
    Index(String, Box<Expr>),
    /// A call of a function, a built-in, or a conversion `int(x)` / `float(x)`.
    Call(String, Vec<Expr>),
    /// A unary operation.
    Unary(UnOp, Box<Expr>),
    /// A binary operation.
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Builds an expression at a position.
    pub fn new(kind: ExprKind, pos: Pos) -> Self {
        Expr { kind, pos }
    }
}

// ---- printing back to source -------------------------------------------

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Fully parenthesised so that printing never depends on precedence.
        match &self.kind {
            ExprKind::Int(v) => {
                if *v < 0 {
                    // `-9223372036854775808` does not lex as one literal, so
                    // negative values are printed as a negation.
                    write!(f, "(-{})", v.unsigned_abs())
                } else {
                    write!(f, "{v}")
                }
            }
            ExprKind::Float(v) => write_float(f, *v),
            ExprKind::Name(n) => f.write_str(n),
            ExprKind::Index(n, i) => write!(f, "{n}[{i}]"),
            ExprKind::Call(n, args) => {
                write!(f, "{n}(")?;
                for (k, a) in args.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
            // `-1` would reparse as the literal -1, so a negated literal keeps
            // its own parentheses. NaN and infinities print as a parenthesised
            // division already (`(0.0 / 0.0)`), which reparses as one, so they
            // take the general form.
            ExprKind::Unary(UnOp::Neg, e)
                if matches!(e.kind, ExprKind::Int(_)) || matches!(e.kind, ExprKind::Float(v) if v.is_finite()) =>
            {
                write!(f, "(-({e}))")
            }
            ExprKind::Unary(UnOp::Neg, e) => write!(f, "(-{e})"),
            ExprKind::Unary(UnOp::Not, e) => write!(f, "(not {e})"),
            ExprKind::Binary(op, a, b) => write!(f, "({a} {} {b})", op.symbol()),
        }
    }
}

fn write_float(f: &mut fmt::Formatter<'_>, v: f64) -> fmt::Result {
    if v.is_nan() {
        f.write_str("(0.0 / 0.0)")
    } else if v.is_infinite() {
        if v > 0.0 {
            f.write_str("(1.0 / 0.0)")
        } else {
            f.write_str("(-1.0 / 0.0)")
        }
    } else if v.is_sign_negative() {
        // Rust's `{:?}` for f64 round-trips exactly and always shows a `.` or exponent.
        write!(f, "(-{:?})", -v)
    } else {
        write!(f, "{v:?}")
    }
}

fn indent(f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
    for _ in 0..depth {
        f.write_str("    ")?;
    }
    Ok(())
}

fn write_var(f: &mut fmt::Formatter<'_>, v: &VarDecl, depth: usize) -> fmt::Result {
    indent(f, depth)?;
    write!(f, "var {}", v.name)?;
    if let Some(len) = &v.len {
        write!(f, "[{len}]")?;
    }
    if v.ty == Type::Float {
        f.write_str(": float")?;
    }
    if let Some(init) = &v.init {
        write!(f, " = {init}")?;
    }
    f.write_str(";\n")
}

fn write_block(f: &mut fmt::Formatter<'_>, body: &[Stmt], depth: usize) -> fmt::Result {
    for s in body {
        write_stmt(f, s, depth)?;
    }
    Ok(())
}

fn write_stmt(f: &mut fmt::Formatter<'_>, s: &Stmt, depth: usize) -> fmt::Result {
    match s {
        Stmt::Var(v) => write_var(f, v, depth),
        Stmt::Assign {
            name, index, value, ..
        } => {
            indent(f, depth)?;
            match index {
                Some(i) => writeln!(f, "{name}[{i}] = {value};"),
                None => writeln!(f, "{name} = {value};"),
            }
        }
        Stmt::Call(e) => {
            indent(f, depth)?;
            writeln!(f, "{e};")
        }
        Stmt::If {
            arms, otherwise, ..
        } => {
            for (k, (c, b)) in arms.iter().enumerate() {
                indent(f, depth)?;
                if k == 0 {
                    writeln!(f, "if {c} then")?;
                } else {
                    writeln!(f, "elsif {c} then")?;
                }
                write_block(f, b, depth + 1)?;
            }
            if let Some(b) = otherwise {
                indent(f, depth)?;
                f.write_str("else\n")?;
                write_block(f, b, depth + 1)?;
            }
            indent(f, depth)?;
            f.write_str("end if;\n")
        }
        Stmt::While { cond, body, .. } => {
            indent(f, depth)?;
            writeln!(f, "while {cond} do")?;
            write_block(f, body, depth + 1)?;
            indent(f, depth)?;
            f.write_str("end while;\n")
        }
        Stmt::Return { value, .. } => {
            indent(f, depth)?;
            match value {
                Some(v) => writeln!(f, "return {v};"),
                None => f.write_str("return;\n"),
            }
        }
    }
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for item in &self.items {
            match item {
                Item::Const(c) => writeln!(f, "const {} = {};", c.name, c.value)?,
                Item::Var(v) => write_var(f, v, 0)?,
                Item::Func(func) => {
                    write!(f, "func {}(", func.name)?;
                    for (k, p) in func.params.iter().enumerate() {
                        if k > 0 {
                            f.write_str(", ")?;
                        }
                        write!(f, "{}: {}", p.name, p.ty)?;
                    }
                    writeln!(f, "): {}", func.ret)?;
                    write_block(f, &func.body, 1)?;
                    f.write_str("end func;\n")?;
                }
            }
        }
        Ok(())
    }
}
