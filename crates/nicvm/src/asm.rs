//! A text assembler and disassembler for bytecode modules.
//!
//! Tests write hostile or hand-shaped bytecode in this form, and
//! `outboard nicvm disasm` prints it. `assemble(&disassemble(m)) == m` for
//! every module, including ones the verifier would reject. The syntax:
//!
//! ```text
//! ; a comment (also after an instruction)
//! .entry main                  ; entry function by name or #index
//! .global 0                    ; one module-level slot and its initial i64
//! .func main 0 3               ; name, parameters, locals (params included)
//! L0:                          ; a label (any name ending in ':')
//!     push.i 1
//!     jz L0                    ; a label, or @index
//!     call helper/2            ; callee name or #index, then /argc
//!     builtin mpi_get_rank/0   ; built-in name or #id, then /argc
//!     load.la 0 4              ; array: base slot, length
//!     push.f 1.5               ; or the raw bits: push.f 0x7ff8000000000000
//!     ret
//! .end
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::builtins::{Builtin, BUILTINS};
use crate::bytecode::*;

/// An assembly error with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct AsmError {
    /// Line of the problem.
    pub line: usize,
    /// What is wrong.
    pub msg: String,
}

/// Prints a module as assembler text.
pub fn disassemble(m: &Module) -> String {
    let mut out = String::new();
    let unique = |name: &str| m.functions.iter().filter(|f| f.name == name).count() == 1;
    let fname = |idx: u16| match m.functions.get(usize::from(idx)) {
        Some(f) if is_ident(&f.name) && unique(&f.name) => f.name.clone(),
        _ => format!("#{idx}"),
    };
    let _ = writeln!(out, ".entry {}", fname(m.entry));
    for g in &m.globals {
        let _ = writeln!(out, ".global {}", *g as i64);
    }
    for f in &m.functions {
        let name = if is_ident(&f.name) {
            f.name.clone()
        } else {
            "_".to_string()
        };
        let _ = writeln!(out, ".func {name} {} {}", f.params, f.locals);
        let targets: std::collections::BTreeSet<u32> =
            f.code.iter().filter_map(Insn::target).collect();
        for (pc, insn) in f.code.iter().enumerate() {
            if targets.contains(&(pc as u32)) {
                let _ = writeln!(out, "L{pc}:");
            }
            let mut line = format!("    {}", insn.mnemonic());
            match *insn {
                Insn::PushI(v) => {
                    let _ = write!(line, " {v}");
                }
                Insn::PushF(v) => {
                    if v.is_finite() {
                        let _ = write!(line, " {v:?}");
                    } else {
                        let _ = write!(line, " {:#018x}", v.to_bits());
                    }
                }
                Insn::LoadL(s) | Insn::StoreL(s) | Insn::LoadG(s) | Insn::StoreG(s) => {
                    let _ = write!(line, " {}", s.0);
                }
                Insn::LoadLA(a) | Insn::StoreLA(a) | Insn::LoadGA(a) | Insn::StoreGA(a) => {
                    let _ = write!(line, " {} {}", a.base, a.len);
                }
                Insn::Jmp(t) | Insn::Jz(t) | Insn::Jnz(t) => {
                    if (t.0 as usize) < f.code.len() {
                        let _ = write!(line, " L{}", t.0);
                    } else {
                        let _ = write!(line, " @{}", t.0);
                    }
                }
                Insn::Call(c) => {
                    let _ = write!(line, " {}/{}", fname(c.func), c.argc);
                }
                Insn::Builtin(b) => match Builtin::from_id(b.id) {
                    Some(bi) => {
                        let _ = write!(line, " {}/{}", bi.info().name, b.argc);
                    }
                    None => {
                        let _ = write!(line, " #{}/{}", b.id, b.argc);
                    }
                },
                _ => {}
            }
            let _ = writeln!(out, "{line:<36}; {pc}");
        }
        out.push_str(".end\n");
    }
    out
}

fn is_ident(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

struct PendingFunc {
    name: String,
    params: u8,
    locals: u16,
    line: usize,
    lines: Vec<(usize, Vec<String>)>,
    labels: BTreeMap<String, u32>,
}

/// Parses assembler text into a module (unverified).
pub fn assemble(text: &str) -> Result<Module, AsmError> {
    let err = |line: usize, msg: String| AsmError { line, msg };
    let mut entry: Option<(usize, String)> = None;
    let mut globals = Vec::new();
    let mut funcs: Vec<PendingFunc> = Vec::new();
    let mut open: Option<PendingFunc> = None;

    for (n, raw) in text.lines().enumerate() {
        let line = n + 1;
        let body = raw.split(';').next().unwrap_or("").trim();
        if body.is_empty() {
            continue;
        }
        let words: Vec<String> = body.split_whitespace().map(str::to_string).collect();
        let head = words.first().map(String::as_str).unwrap_or("");
        match head {
            ".entry" => {
                let w = words
                    .get(1)
                    .ok_or_else(|| err(line, "missing entry".into()))?;
                entry = Some((line, w.clone()));
            }
            ".global" => {
                let w = words
                    .get(1)
                    .ok_or_else(|| err(line, "missing value".into()))?;
                globals
                    .push(parse_i64(w).ok_or_else(|| err(line, format!("bad value {w}")))? as u64);
            }
            ".func" => {
                if open.is_some() {
                    return Err(err(line, "`.func` inside a function".into()));
                }
                let (Some(name), Some(p), Some(l)) = (words.get(1), words.get(2), words.get(3))
                else {
                    return Err(err(line, "expected `.func NAME PARAMS LOCALS`".into()));
                };
                open = Some(PendingFunc {
                    name: name.clone(),
                    params: p
                        .parse()
                        .map_err(|_| err(line, format!("bad params {p}")))?,
                    locals: l
                        .parse()
                        .map_err(|_| err(line, format!("bad locals {l}")))?,
                    line,
                    lines: Vec::new(),
                    labels: BTreeMap::new(),
                });
            }
            ".end" => {
                let f = open
                    .take()
                    .ok_or_else(|| err(line, "`.end` outside a function".into()))?;
                funcs.push(f);
            }
            _ => {
                let f = open
                    .as_mut()
                    .ok_or_else(|| err(line, "instruction outside a function".into()))?;
                if let Some(label) = head.strip_suffix(':') {
                    if words.len() != 1 {
                        return Err(err(line, "a label stands on its own line".into()));
                    }
                    let at = f.lines.len() as u32;
                    if f.labels.insert(label.to_string(), at).is_some() {
                        return Err(err(line, format!("label {label} defined twice")));
                    }
                } else {
                    f.lines.push((line, words));
                }
            }
        }
    }
    if let Some(f) = open {
        return Err(err(f.line, "function without `.end`".into()));
    }

    let names: Vec<String> = funcs.iter().map(|f| f.name.clone()).collect();
    let func_ref = |line: usize, w: &str| -> Result<u16, AsmError> {
        if let Some(ix) = w.strip_prefix('#') {
            return ix
                .parse()
                .map_err(|_| err(line, format!("bad function index {w}")));
        }
        names
            .iter()
            .position(|n| n == w)
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| err(line, format!("unknown function {w}")))
    };

    let mut functions = Vec::new();
    for f in &funcs {
        let mut code = Vec::new();
        for (line, words) in &f.lines {
            code.push(parse_insn(*line, words, &f.labels, &func_ref)?);
        }
        functions.push(Function {
            name: f.name.clone(),
            params: f.params,
            locals: f.locals,
            code,
        });
    }
    let entry = match entry {
        Some((line, w)) => func_ref(line, &w)?,
        None => func_ref(0, "main").unwrap_or(0),
    };
    Ok(Module {
        entry,
        globals,
        functions,
    })
}

fn parse_i64(w: &str) -> Option<i64> {
    if let Some(h) = w.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok().map(|v| v as i64)
    } else {
        w.parse().ok()
    }
}

fn parse_insn(
    line: usize,
    words: &[String],
    labels: &BTreeMap<String, u32>,
    func_ref: &dyn Fn(usize, &str) -> Result<u16, AsmError>,
) -> Result<Insn, AsmError> {
    let err = |msg: String| AsmError { line, msg };
    let mn = words.first().map(String::as_str).unwrap_or("");
    let info = info_by_mnemonic(mn).ok_or_else(|| err(format!("unknown mnemonic {mn}")))?;
    let want = match info.operand {
        OperandKind::None => 0,
        OperandKind::Array => 2,
        _ => 1,
    };
    if words.len() != want + 1 {
        return Err(err(format!("`{mn}` takes {want} operand(s)")));
    }
    let a = words.get(1).map(String::as_str).unwrap_or("");
    let b = words.get(2).map(String::as_str).unwrap_or("");
    let num =
        |w: &str| -> Result<u16, AsmError> { w.parse().map_err(|_| err(format!("bad slot {w}"))) };
    let split_argc = |w: &str| -> Result<(String, u8), AsmError> {
        let (name, argc) = w
            .rsplit_once('/')
            .ok_or_else(|| err(format!("expected NAME/ARGC, found {w}")))?;
        let argc = argc.parse().map_err(|_| err(format!("bad argc in {w}")))?;
        Ok((name.to_string(), argc))
    };
    let operand_insn = |op: u8| -> Result<Insn, AsmError> {
        Ok(match info.operand {
            OperandKind::None => return Err(err(format!("`{mn}` takes no operand"))),
            OperandKind::I64 => {
                Insn::PushI(parse_i64(a).ok_or_else(|| err(format!("bad integer {a}")))?)
            }
            OperandKind::F64 => {
                let v = if let Some(h) = a.strip_prefix("0x") {
                    u64::from_str_radix(h, 16)
                        .map(f64::from_bits)
                        .map_err(|_| err(format!("bad float bits {a}")))?
                } else {
                    a.parse().map_err(|_| err(format!("bad float {a}")))?
                };
                Insn::PushF(v)
            }
            OperandKind::Slot => {
                let s = Slot(num(a)?);
                match op {
                    opcode::LoadL => Insn::LoadL(s),
                    opcode::StoreL => Insn::StoreL(s),
                    opcode::LoadG => Insn::LoadG(s),
                    _ => Insn::StoreG(s),
                }
            }
            OperandKind::Array => {
                let r = ArrayRef {
                    base: num(a)?,
                    len: num(b)?,
                };
                match op {
                    opcode::LoadLA => Insn::LoadLA(r),
                    opcode::StoreLA => Insn::StoreLA(r),
                    opcode::LoadGA => Insn::LoadGA(r),
                    _ => Insn::StoreGA(r),
                }
            }
            OperandKind::Target => {
                let t = if let Some(n) = a.strip_prefix('@') {
                    n.parse().map_err(|_| err(format!("bad target {a}")))?
                } else {
                    *labels
                        .get(a)
                        .ok_or_else(|| err(format!("unknown label {a}")))?
                };
                match op {
                    opcode::Jmp => Insn::Jmp(Target(t)),
                    opcode::Jz => Insn::Jz(Target(t)),
                    _ => Insn::Jnz(Target(t)),
                }
            }
            OperandKind::Call => {
                let (name, argc) = split_argc(a)?;
                Insn::Call(CallRef {
                    func: func_ref(line, &name)?,
                    argc,
                })
            }
            OperandKind::Builtin => {
                let (name, argc) = split_argc(a)?;
                let id = if let Some(n) = name.strip_prefix('#') {
                    n.parse()
                        .map_err(|_| err(format!("bad built-in id {name}")))?
                } else {
                    BUILTINS
                        .iter()
                        .find(|x| x.name == name)
                        .map(|x| x.builtin as u8)
                        .ok_or_else(|| err(format!("unknown built-in {name}")))?
                };
                Insn::Builtin(BuiltinRef { id, argc })
            }
        })
    };
    if info.operand == OperandKind::None {
        // Decode the operand-less instruction from its opcode byte.
        let bytes = [info.opcode];
        let mut r = Reader::new(&bytes, 0);
        return Insn::decode(&mut r).map_err(|e| err(e.to_string()));
    }
    operand_insn(info.opcode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembles_labels_calls_and_builtins() {
        let m = assemble(
            ".entry main\n.global 5\n.func main 0 1\nL0:\n  load.g 0\n  jz done ; c\n  builtin mpi_get_rank/0\n  call helper/1\n  store.l 0\n  jmp L0\ndone:\n  push.i -1\n  ret\n.end\n.func helper 1 1\n  load.l 0\n  ret\n.end\n",
        )
        .unwrap();
        assert_eq!(m.globals, vec![5]);
        assert_eq!(m.functions.len(), 2);
        let main = &m.functions[0].code;
        assert_eq!(main[1], Insn::Jz(Target(6)));
        assert_eq!(main[2], Insn::Builtin(BuiltinRef { id: 1, argc: 0 }));
        assert_eq!(main[3], Insn::Call(CallRef { func: 1, argc: 1 }));
        assert_eq!(main[5], Insn::Jmp(Target(0)));
        assert_eq!(assemble(&disassemble(&m)).unwrap(), m);
    }

    #[test]
    fn errors_name_the_line() {
        let e = assemble(".func main 0 0\n  push.i 1\n  frob\n.end").unwrap_err();
        assert_eq!(e.line, 3);
        let e = assemble(".func main 0 0\n  jmp nowhere\n.end").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.msg.contains("nowhere"));
    }
}
