//! The parser: tokens to a syntax tree ([`crate::ast`]).
//!
//! Recursive descent for declarations and statements, precedence climbing for
//! expressions. Nesting of expressions and statements is bounded
//! ([`MAX_NESTING`]) so that hostile input cannot exhaust the host's stack in
//! the parser, the compiler or when the tree is dropped.

use crate::ast::*;
use crate::error::{CompileError, CompileErrorKind};
use crate::lexer::{lex, Kw, Tok, Token};

/// How deeply parentheses, unary operators and statements may nest.
pub const MAX_NESTING: usize = 64;

/// How deep an expression tree may be (counting every operator).
pub const MAX_EXPR_DEPTH: usize = 200;

/// Parses a whole module source.
pub fn parse(src: &str) -> Result<Module, CompileError> {
    let toks = lex(src)?;
    let mut p = Parser {
        toks,
        at: 0,
        depth: 0,
    };
    p.module()
}

struct Parser {
    toks: Vec<Token>,
    at: usize,
    depth: usize,
}

type PResult<T> = Result<T, CompileError>;

impl Parser {
    fn peek(&self) -> &Token {
        // The lexer always ends with Eof; stay on it once reached.
        static EOF: Token = Token {
            tok: Tok::Eof,
            pos: Pos { line: 0, col: 0 },
        };
        self.toks
            .get(self.at)
            .or_else(|| self.toks.last())
            .unwrap_or(&EOF)
    }

    fn peek2(&self) -> &Tok {
        self.toks
            .get(self.at + 1)
            .map(|t| &t.tok)
            .unwrap_or(&Tok::Eof)
    }

    fn pos(&self) -> Pos {
        self.peek().pos
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if self.at < self.toks.len() {
            self.at += 1;
        }
        t
    }

    fn err<T>(&self, expected: &str) -> PResult<T> {
        let t = self.peek();
        Err(CompileError::new(
            t.pos,
            CompileErrorKind::Expected {
                expected: expected.to_string(),
                found: t.tok.to_string(),
            },
        ))
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(&self.peek().tok, Tok::Sym(x) if *x == s)
    }

    fn is_kw(&self, k: Kw) -> bool {
        matches!(&self.peek().tok, Tok::Kw(x) if *x == k)
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        if self.is_sym(s) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect_sym(&mut self, s: &str) -> PResult<()> {
        if self.eat_sym(s) {
            Ok(())
        } else {
            self.err(&format!("`{s}`"))
        }
    }

    fn expect_kw(&mut self, k: Kw) -> PResult<()> {
        if self.is_kw(k) {
            self.at += 1;
            Ok(())
        } else {
            self.err(&format!("`{}`", k.as_str()))
        }
    }

    fn ident(&mut self) -> PResult<(String, Pos)> {
        let t = self.peek().clone();
        match t.tok {
            Tok::Ident(s) => {
                self.at += 1;
                Ok((s, t.pos))
            }
            _ => self.err("a name"),
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            Err(CompileError::new(
                self.pos(),
                CompileErrorKind::TooDeep(MAX_NESTING),
            ))
        } else {
            Ok(())
        }
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    // ---- declarations ----------------------------------------------------

    fn module(&mut self) -> PResult<Module> {
        let mut items = Vec::new();
        loop {
            match &self.peek().tok {
                Tok::Eof => return Ok(Module { items }),
                Tok::Kw(Kw::Const) => items.push(Item::Const(self.const_decl()?)),
                Tok::Kw(Kw::Var) => items.push(Item::Var(self.var_decl()?)),
                Tok::Kw(Kw::Func) => items.push(Item::Func(self.func_decl()?)),
                _ => return self.err("`func`, `var` or `const`"),
            }
        }
    }

    fn const_decl(&mut self) -> PResult<ConstDecl> {
        let pos = self.pos();
        self.expect_kw(Kw::Const)?;
        let (name, _) = self.ident()?;
        self.expect_sym("=")?;
        let value = self.expr()?;
        self.expect_sym(";")?;
        Ok(ConstDecl { name, value, pos })
    }

    fn ty(&mut self) -> PResult<Type> {
        if self.is_kw(Kw::Int) {
            self.at += 1;
            Ok(Type::Int)
        } else if self.is_kw(Kw::Float) {
            self.at += 1;
            Ok(Type::Float)
        } else {
            self.err("a type (`int` or `float`)")
        }
    }

    fn opt_ty(&mut self) -> PResult<Type> {
        if self.eat_sym(":") {
            self.ty()
        } else {
            Ok(Type::Int)
        }
    }

    fn var_decl(&mut self) -> PResult<VarDecl> {
        let pos = self.pos();
        self.expect_kw(Kw::Var)?;
        let (name, _) = self.ident()?;
        let len = if self.eat_sym("[") {
            let e = self.expr()?;
            self.expect_sym("]")?;
            Some(e)
        } else {
            None
        };
        let ty = self.opt_ty()?;
        let init = if self.eat_sym("=") {
            Some(self.expr()?)
        } else {
            None
        };
        self.expect_sym(";")?;
        Ok(VarDecl {
            name,
            len,
            ty,
            init,
            pos,
        })
    }

    fn func_decl(&mut self) -> PResult<FuncDecl> {
        let pos = self.pos();
        self.expect_kw(Kw::Func)?;
        let (name, _) = self.ident()?;
        self.expect_sym("(")?;
        let mut params = Vec::new();
        if !self.is_sym(")") {
            loop {
                let (pname, ppos) = self.ident()?;
                let ty = self.opt_ty()?;
                params.push(Param {
                    name: pname,
                    ty,
                    pos: ppos,
                });
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        self.expect_sym(")")?;
        let ret = self.opt_ty()?;
        let body = self.block()?;
        self.expect_kw(Kw::End)?;
        self.expect_kw(Kw::Func)?;
        self.expect_sym(";")?;
        Ok(FuncDecl {
            name,
            params,
            ret,
            body,
            pos,
        })
    }

    // ---- statements ------------------------------------------------------

    fn block(&mut self) -> PResult<Vec<Stmt>> {
        let mut out = Vec::new();
        while !(self.is_kw(Kw::End) || self.is_kw(Kw::Elsif) || self.is_kw(Kw::Else)) {
            if matches!(self.peek().tok, Tok::Eof) {
                return self.err("`end`");
            }
            out.push(self.stmt()?);
        }
        Ok(out)
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        self.enter()?;
        let r = self.stmt_inner();
        self.leave();
        r
    }

    fn stmt_inner(&mut self) -> PResult<Stmt> {
        let pos = self.pos();
        match self.peek().tok.clone() {
            Tok::Kw(Kw::Var) => Ok(Stmt::Var(self.var_decl()?)),
            Tok::Kw(Kw::If) => {
                self.at += 1;
                let mut arms = Vec::new();
                let cond = self.expr()?;
                self.expect_kw(Kw::Then)?;
                arms.push((cond, self.block()?));
                let mut otherwise = None;
                loop {
                    if self.is_kw(Kw::Elsif) {
                        self.at += 1;
                        let c = self.expr()?;
                        self.expect_kw(Kw::Then)?;
                        arms.push((c, self.block()?));
                    } else if self.is_kw(Kw::Else) {
                        self.at += 1;
                        otherwise = Some(self.block()?);
                        break;
                    } else {
                        break;
                    }
                }
                self.expect_kw(Kw::End)?;
                self.expect_kw(Kw::If)?;
                self.expect_sym(";")?;
                Ok(Stmt::If {
                    arms,
                    otherwise,
                    pos,
                })
            }
            Tok::Kw(Kw::While) => {
                self.at += 1;
                let cond = self.expr()?;
                self.expect_kw(Kw::Do)?;
                let body = self.block()?;
                self.expect_kw(Kw::End)?;
                self.expect_kw(Kw::While)?;
                self.expect_sym(";")?;
                Ok(Stmt::While { cond, body, pos })
            }
            Tok::Kw(Kw::Return) => {
                self.at += 1;
                let value = if self.is_sym(";") {
                    None
                } else {
                    Some(self.expr()?)
                };
                self.expect_sym(";")?;
                Ok(Stmt::Return { value, pos })
            }
            Tok::Ident(_) | Tok::Kw(Kw::Int) | Tok::Kw(Kw::Float)
                if matches!(self.peek2(), Tok::Sym("(")) =>
            {
                let e = self.expr()?;
                self.expect_sym(";")?;
                if !matches!(e.kind, ExprKind::Call(..)) {
                    return Err(CompileError::new(
                        pos,
                        CompileErrorKind::Expected {
                            expected: "a statement".into(),
                            found: "an expression".into(),
                        },
                    ));
                }
                Ok(Stmt::Call(e))
            }
            Tok::Ident(name) => {
                self.at += 1;
                let index = if self.eat_sym("[") {
                    let e = self.expr()?;
                    self.expect_sym("]")?;
                    Some(e)
                } else {
                    None
                };
                self.expect_sym("=")?;
                let value = self.expr()?;
                self.expect_sym(";")?;
                Ok(Stmt::Assign {
                    name,
                    index,
                    value,
                    pos,
                })
            }
            _ => self.err("a statement"),
        }
    }

    // ---- expressions -----------------------------------------------------

    fn expr(&mut self) -> PResult<Expr> {
        Ok(self.binary(0)?.0)
    }

    /// Builds a node of tree depth `d`, refusing trees deeper than
    /// [`MAX_EXPR_DEPTH`] (a long `a + a + ...` chain nests without recursion
    /// in the parser, but later passes recurse over it).
    fn node(&self, kind: ExprKind, pos: Pos, d: usize) -> PResult<(Expr, usize)> {
        if d > MAX_EXPR_DEPTH {
            return Err(CompileError::new(
                pos,
                CompileErrorKind::TooDeep(MAX_EXPR_DEPTH),
            ));
        }
        Ok((Expr::new(kind, pos), d))
    }

    fn sub(&mut self) -> PResult<(Expr, usize)> {
        self.binary(0)
    }

    fn binop(&self) -> Option<(BinOp, u8)> {
        let op = match &self.peek().tok {
            Tok::Kw(Kw::Or) => BinOp::Or,
            Tok::Kw(Kw::And) => BinOp::And,
            Tok::Sym(s) => match *s {
                "==" => BinOp::Eq,
                "!=" => BinOp::Ne,
                "<" => BinOp::Lt,
                "<=" => BinOp::Le,
                ">" => BinOp::Gt,
                ">=" => BinOp::Ge,
                "|" => BinOp::BitOr,
                "^" => BinOp::BitXor,
                "&" => BinOp::BitAnd,
                "<<" => BinOp::Shl,
                ">>" => BinOp::Shr,
                "+" => BinOp::Add,
                "-" => BinOp::Sub,
                "*" => BinOp::Mul,
                "/" => BinOp::Div,
                "%" => BinOp::Rem,
                _ => return None,
            },
            _ => return None,
        };
        Some((op, precedence(op)))
    }

    /// Precedence climbing: parses operators binding tighter than `min`.
    fn binary(&mut self, min: u8) -> PResult<(Expr, usize)> {
        self.enter()?;
        let r = self.binary_inner(min);
        self.leave();
        r
    }

    fn binary_inner(&mut self, min: u8) -> PResult<(Expr, usize)> {
        let (mut lhs, mut d) = self.unary()?;
        while let Some((op, prec)) = self.binop() {
            if prec < min {
                break;
            }
            let pos = self.pos();
            self.at += 1;
            // Left associative: the right side binds strictly tighter.
            let (rhs, rd) = self.binary(prec + 1)?;
            (lhs, d) = self.node(
                ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                pos,
                1 + d.max(rd),
            )?;
        }
        Ok((lhs, d))
    }

    fn unary(&mut self) -> PResult<(Expr, usize)> {
        let pos = self.pos();
        if self.is_kw(Kw::Not) {
            self.at += 1;
            // `not` binds looser than comparisons: `not a < b` is `not (a < b)`.
            let (e, d) = self.binary(PREC_NOT_OPERAND)?;
            return self.node(ExprKind::Unary(UnOp::Not, Box::new(e)), pos, d + 1);
        }
        if self.is_sym("-") {
            self.at += 1;
            // A minus directly before a literal makes a negative literal, so
            // that -9223372036854775808 is expressible.
            match self.peek().tok.clone() {
                Tok::Int(v) => {
                    self.at += 1;
                    let n = if v == 1u64 << 63 {
                        i64::MIN
                    } else {
                        match i64::try_from(v) {
                            Ok(n) => -n,
                            Err(_) => {
                                return Err(CompileError::new(
                                    pos,
                                    CompileErrorKind::IntTooLarge(format!("-{v}")),
                                ))
                            }
                        }
                    };
                    return self.node(ExprKind::Int(n), pos, 1);
                }
                Tok::Float(v) => {
                    self.at += 1;
                    return self.node(ExprKind::Float(-v), pos, 1);
                }
                _ => {}
            }
            self.enter()?;
            let r = self.unary();
            self.leave();
            let (e, d) = r?;
            return self.node(ExprKind::Unary(UnOp::Neg, Box::new(e)), pos, d + 1);
        }
        self.primary()
    }

    fn primary(&mut self) -> PResult<(Expr, usize)> {
        let t = self.next();
        let pos = t.pos;
        match t.tok {
            Tok::Int(v) => match i64::try_from(v) {
                Ok(n) => self.node(ExprKind::Int(n), pos, 1),
                Err(_) => Err(CompileError::new(
                    pos,
                    CompileErrorKind::IntTooLarge(v.to_string()),
                )),
            },
            Tok::Float(v) => self.node(ExprKind::Float(v), pos, 1),
            Tok::Sym("(") => {
                let e = self.sub()?;
                self.expect_sym(")")?;
                Ok(e)
            }
            Tok::Kw(k @ (Kw::Int | Kw::Float)) => {
                self.expect_sym("(")?;
                let (args, d) = self.args()?;
                self.node(ExprKind::Call(k.as_str().to_string(), args), pos, d + 1)
            }
            Tok::Ident(name) => {
                if self.eat_sym("(") {
                    let (args, d) = self.args()?;
                    self.node(ExprKind::Call(name, args), pos, d + 1)
                } else if self.eat_sym("[") {
                    let (i, d) = self.sub()?;
                    self.expect_sym("]")?;
                    self.node(ExprKind::Index(name, Box::new(i)), pos, d + 1)
                } else {
                    self.node(ExprKind::Name(name), pos, 1)
                }
            }
            _ => {
                self.at = self.at.saturating_sub(1);
                self.err("an expression")
            }
        }
    }

    /// Arguments after the opening parenthesis, through the closing one.
    fn args(&mut self) -> PResult<(Vec<Expr>, usize)> {
        let mut args = Vec::new();
        let mut depth = 0;
        if !self.eat_sym(")") {
            loop {
                let (a, d) = self.sub()?;
                depth = depth.max(d);
                args.push(a);
                if self.eat_sym(")") {
                    break;
                }
                self.expect_sym(",")?;
            }
        }
        Ok((args, depth))
    }
}

const PREC_NOT_OPERAND: u8 = 3;

fn precedence(op: BinOp) -> u8 {
    match op {
        BinOp::Or => 1,
        BinOp::And => 2,
        // 3: operand of `not`
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 4,
        BinOp::BitOr => 5,
        BinOp::BitXor => 6,
        BinOp::BitAnd => 7,
        BinOp::Shl | BinOp::Shr => 8,
        BinOp::Add | BinOp::Sub => 9,
        BinOp::Mul | BinOp::Div | BinOp::Rem => 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr_of(src: &str) -> String {
        let m = parse(&format!("func main() return {src}; end func;")).unwrap();
        match &m.items[0] {
            Item::Func(f) => match &f.body[0] {
                Stmt::Return { value: Some(e), .. } => e.to_string(),
                s => panic!("unexpected {s:?}"),
            },
            i => panic!("unexpected {i:?}"),
        }
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(expr_of("1 + 2 * 3"), "(1 + (2 * 3))");
        assert_eq!(expr_of("1 - 2 - 3"), "((1 - 2) - 3)");
        assert_eq!(
            expr_of("a < b and not c == d or e"),
            "(((a < b) and (not (c == d))) or e)"
        );
        assert_eq!(expr_of("1 << 2 + 3 & 4"), "((1 << (2 + 3)) & 4)");
        assert_eq!(expr_of("-x * 2"), "((-x) * 2)");
        assert_eq!(expr_of("-9223372036854775808"), "(-9223372036854775808)");
        assert_eq!(expr_of("f(1, g(a[2]))"), "f(1, g(a[2]))");
    }

    #[test]
    fn statements_parse() {
        let m = parse(
            "var g = 3;\nconst N = 4;\nfunc f(a, b: float): float\n var t[N]: float;\n \
             while a > 0 do a = a - 1; end while;\n if a then return b; elsif 1 then return 2.0; else t[0] = b; end if;\n \
             return t[0];\nend func;",
        )
        .unwrap();
        assert_eq!(m.items.len(), 3);
        let Item::Func(f) = &m.items[2] else {
            panic!("not a func")
        };
        assert_eq!(f.params.len(), 2);
        assert_eq!(f.params[1].ty, Type::Float);
        assert_eq!(f.ret, Type::Float);
        assert_eq!(f.body.len(), 4);
    }

    #[test]
    fn errors_have_positions() {
        let e = parse("func main()\n  x = ;\nend func;").unwrap_err();
        assert_eq!(e.pos, Pos { line: 2, col: 7 });
        assert!(matches!(e.kind, CompileErrorKind::Expected { .. }));
        let e = parse("func main() return 1; end").unwrap_err();
        assert!(e.to_string().contains("expected `func`"), "{e}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let src = format!(
            "func main() return {}1{}; end func;",
            "(".repeat(10_000),
            ")".repeat(10_000)
        );
        let e = parse(&src).unwrap_err();
        assert_eq!(e.kind, CompileErrorKind::TooDeep(MAX_NESTING));
        let src = format!("func main() return {}1; end func;", "-".repeat(10_000));
        assert_eq!(
            parse(&src).unwrap_err().kind,
            CompileErrorKind::TooDeep(MAX_NESTING)
        );
        let src = format!("func main() return {}1; end func;", "not ".repeat(10_000));
        assert_eq!(
            parse(&src).unwrap_err().kind,
            CompileErrorKind::TooDeep(MAX_NESTING)
        );
        let src = format!("func main() return 1{}; end func;", " + 1".repeat(10_000));
        assert_eq!(
            parse(&src).unwrap_err().kind,
            CompileErrorKind::TooDeep(MAX_EXPR_DEPTH)
        );
        // A long but legal chain still parses.
        let src = format!("func main() return 1{}; end func;", " + 1".repeat(150));
        assert!(parse(&src).is_ok());
    }
}
