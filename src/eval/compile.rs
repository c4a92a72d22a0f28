//! Conditions and logpoint `{expressions}` in the debug_eval language, compiled in the daemon
//! (from DWARF) into a straight-line JavaScript function of the hit's CPU context that the
//! agent runs on every hit: register reads, guarded memory reads and arithmetic, no round
//! trip and no reading of every local. `agent/src/compiled.ts` holds the runtime (`R`).
//!
//! Values in the generated code: integers, floats and bools are JS numbers (64-bit integers
//! beyond 2^53 lose precision, as any JS number), pointers are NativePointers, and lvalues are
//! the NativePointer of their address until read.

use super::interp::find_member;
use super::parser::{parse, string_comparison, BinOp, Expr, ExprKind, UnOp};
use super::scope::Scope;
use super::types;
use super::EvalError;
use crate::symbols::{DebugInfo, LocalVar, TypeId, TypeKind, VarLocation};

/// A compiled expression: JavaScript source of `function (c, R) { return <js>; }`'s body.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub js: String,
    /// Types the generated code reads with `R.val` (for the agent's type table).
    pub types: Vec<TypeId>,
}

/// What the variables are at the point: symbolic locations (`symbols::LocalsInfo`) and types
/// (`eval::scope`).
pub struct PointScope<'a> {
    pub info: &'a DebugInfo,
    pub vars: &'a [LocalVar],
    pub scope: Option<&'a Scope>,
    /// Added to the file's static addresses (globals) to give the session addresses the
    /// agent slides (non-zero for a shared library's points).
    pub offset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// A number of this type (ints, enums, chars, bools, floats).
    Num(TypeId),
    /// A NativePointer value of this pointer type.
    Ptr(TypeId),
    /// The address (NativePointer) of an lvalue of this type, not yet read.
    Place(TypeId),
}

type R<T> = Result<T, EvalError>;

fn err<T>(pos: usize, msg: impl Into<String>) -> R<T> {
    Err(EvalError {
        message: msg.into(),
        pos: Some(pos),
    })
}

/// Compile a condition: the result is a JS boolean.
pub fn compile_condition(src: &str, at: &PointScope<'_>) -> R<Compiled> {
    let mut c = Compiler {
        at,
        types: Vec::new(),
        lenient: false,
    };
    let e = c.parse(src)?;
    let (js, k) = c.expr(&e)?;
    let js = c.truth(&js, k, e.pos)?;
    Ok(Compiled { js, types: c.types })
}

/// Compile one `{expression}` of a logpoint template: the result is a display value.
pub fn compile_display(src: &str, at: &PointScope<'_>) -> R<Compiled> {
    let mut c = Compiler {
        at,
        types: Vec::new(),
        lenient: true,
    };
    let e = c.parse(src)?;
    let (js, k) = c.expr(&e)?;
    let js = match k {
        Kind::Num(t) => match &c.ty_kind(t) {
            TypeKind::Enum { .. } | TypeKind::Char { .. } | TypeKind::Bool => {
                c.types.push(t);
                format!("R.shown({js}, {t})")
            }
            _ => js,
        },
        Kind::Ptr(t) => {
            c.types.push(t);
            format!("R.shownPtr({js}, {t})")
        }
        Kind::Place(t) => {
            c.types.push(t);
            format!("R.val({js}, {t})")
        }
    };
    Ok(Compiled { js, types: c.types })
}

struct Compiler<'a, 'b> {
    at: &'a PointScope<'b>,
    types: Vec<TypeId>,
    /// Templates: a variable that cannot be read at this line shows its reason on every hit
    /// (`<error: ...>`) instead of refusing the logpoint; conditions refuse it when set.
    lenient: bool,
}

impl Compiler<'_, '_> {
    fn info(&self) -> &DebugInfo {
        self.at.info
    }

    fn ty_kind(&self, t: TypeId) -> TypeKind {
        self.info().ty(t).kind.clone()
    }

    fn parse(&self, src: &str) -> R<Expr> {
        let info = self.info();
        let is_type = |n: &str| !self.at.vars.iter().any(|v| v.name == n) && types::is_type_name(info, n);
        parse(src, &is_type)
    }

    fn prim(&self, name: &str) -> TypeId {
        types::primitive(self.info(), name).expect("known primitive")
    }

    /// Read an lvalue: scalars become numbers or pointers; aggregates stay places.
    fn load(&self, js: &str, k: Kind) -> (String, Kind) {
        let Kind::Place(t) = k else { return (js.to_string(), k) };
        let ty = self.info().ty(t);
        match &ty.kind {
            TypeKind::Int { signed } | TypeKind::Enum { signed, .. } | TypeKind::Char { signed } => {
                (format!("R.{}({js}, {})", if *signed { "s" } else { "u" }, ty.size), Kind::Num(t))
            }
            TypeKind::Bool => (format!("R.u({js}, 1)"), Kind::Num(t)),
            TypeKind::Float => (format!("R.f({js}, {})", ty.size), Kind::Num(t)),
            TypeKind::Pointer { .. } | TypeKind::Function => (format!("{js}.readPointer()"), Kind::Ptr(t)),
            _ => (js.to_string(), k),
        }
    }

    fn rvalue(&self, e: &Expr) -> R<(String, Kind)> {
        let (js, k) = self.expr_raw(e)?;
        Ok(self.load(&js, k))
    }

    fn expr(&mut self, e: &Expr) -> R<(String, Kind)> {
        let (js, k) = self.expr_raw(e)?;
        Ok(self.load(&js, k))
    }

    fn truth(&self, js: &str, k: Kind, pos: usize) -> R<String> {
        match k {
            Kind::Num(_) => Ok(format!("(({js}) != 0)")),
            Kind::Ptr(_) => Ok(format!("!({js}).isNull()")),
            Kind::Place(t) => err(pos, format!("a '{}' is not true or false; compare one of its fields", self.info().ty(t).name)),
        }
    }

    fn number(&self, e: &Expr) -> R<(String, TypeId)> {
        match self.rvalue(e)? {
            (js, Kind::Num(t)) => Ok((js, t)),
            (js, Kind::Ptr(t)) => Ok((format!("R.pn({js})"), t)),
            (_, Kind::Place(t)) => err(e.pos, format!("a '{}' is not a number", self.info().ty(t).name)),
        }
    }

    fn is_float(&self, t: TypeId) -> bool {
        matches!(self.ty_kind(t), TypeKind::Float)
    }

    fn expr_raw(&self, e: &Expr) -> R<(String, Kind)> {
        let pos = e.pos;
        match &e.kind {
            ExprKind::Int { value, .. } => {
                let t = self.prim(if *value > i32::MAX as u64 { "long" } else { "int" });
                Ok((format!("{value}"), Kind::Num(t)))
            }
            ExprKind::Float(f) => Ok((format!("{f:?}"), Kind::Num(self.prim("double")))),
            ExprKind::Char(c) => Ok((format!("{c}"), Kind::Num(self.prim("char")))),
            ExprKind::Bool(b) => Ok((if *b { "1" } else { "0" }.into(), Kind::Num(self.prim("bool")))),
            ExprKind::Str(_) => err(pos, "a string literal can only be compared with a string (e.g. name == \"bob\")"),
            ExprKind::Ident(name) => self.identifier(name, pos),
            ExprKind::Register(r) => {
                let reg = match r.as_str() {
                    "pc" => "rip",
                    "sp" => "rsp",
                    "fp" => "rbp",
                    other => other,
                };
                if !REGISTERS.contains(&reg) {
                    return err(pos, format!("no register ${r}; known: {}", REGISTERS.join(", ")));
                }
                Ok((format!("R.pn(c.{reg})"), Kind::Num(self.prim("long"))))
            }
            ExprKind::Member { base, field, .. } => {
                let (bjs, bk) = self.rvalue(base)?;
                let (addr, st) = match bk {
                    Kind::Ptr(pt) => match self.ty_kind(pt) {
                        TypeKind::Pointer { target: Some(t) } => (bjs, t),
                        _ => return err(pos, "cannot follow a 'void *'; cast it first"),
                    },
                    Kind::Place(t) => (bjs, t),
                    Kind::Num(t) => return err(pos, format!("'{field}': a '{}' has no fields", self.info().ty(t).name)),
                };
                let ty = self.info().ty(st);
                let TypeKind::Struct { members, .. } = &ty.kind else {
                    return err(pos, format!("'{field}': a '{}' has no fields", ty.name));
                };
                let Some((off, m)) = find_member(self.info(), members, field, 0) else {
                    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
                    return err(pos, format!("unknown field '{field}' in {}; fields: {}", ty.name, names.join(", ")));
                };
                if let Some((bit, bits)) = m.bits {
                    let signed = matches!(self.ty_kind(m.ty), TypeKind::Int { signed: true } | TypeKind::Enum { signed: true, .. });
                    return Ok((format!("R.bits({addr}.add({off}), {bit}, {bits}, {signed})"), Kind::Num(m.ty)));
                }
                Ok((format!("{addr}.add({off})"), Kind::Place(m.ty)))
            }
            ExprKind::Index { base, index } => {
                // `args[N]`: the N-th parameter (as JavaScript conditions wrote it).
                if let (ExprKind::Ident(a), ExprKind::Int { value, .. }) = (&base.kind, &index.kind) {
                    if a == "args" && !self.at.vars.iter().any(|v| v.name == "args") {
                        let params: Vec<&LocalVar> = self.at.vars.iter().filter(|v| v.is_parameter).collect();
                        return match params.get(*value as usize) {
                            Some(p) => self.identifier(&p.name.clone(), pos),
                            None => err(index.pos, format!("args[{value}]: the function has {} parameter(s)", params.len())),
                        };
                    }
                }
                let (bjs, bk) = self.rvalue(base)?;
                let (ijs, _) = self.number(index)?;
                let el = match bk {
                    Kind::Ptr(pt) => match self.ty_kind(pt) {
                        TypeKind::Pointer { target: Some(t) } => t,
                        _ => return err(pos, "cannot index a 'void *'; cast it first"),
                    },
                    Kind::Place(t) => match self.ty_kind(t) {
                        TypeKind::Array { element, .. } => element,
                        _ => return err(pos, format!("cannot index a '{}' in a condition", self.info().ty(t).name)),
                    },
                    Kind::Num(t) => return err(pos, format!("cannot index a '{}'", self.info().ty(t).name)),
                };
                let size = self.info().ty(el).size.max(1);
                Ok((format!("{bjs}.add(({ijs}) * {size})"), Kind::Place(el)))
            }
            ExprKind::Unary { op, operand } => match op {
                UnOp::Deref => match self.rvalue(operand)? {
                    (js, Kind::Ptr(pt)) => match self.ty_kind(pt) {
                        TypeKind::Pointer { target: Some(t) } => Ok((js, Kind::Place(t))),
                        _ => err(pos, "cannot dereference a 'void *'; cast it first"),
                    },
                    (js, Kind::Place(t)) => match self.ty_kind(t) {
                        TypeKind::Array { element, .. } => Ok((js, Kind::Place(element))),
                        _ => err(pos, "cannot dereference a value that is not a pointer"),
                    },
                    _ => err(pos, "cannot dereference a value that is not a pointer"),
                },
                UnOp::AddrOf => match self.expr_raw(operand)? {
                    (js, Kind::Place(t)) => Ok((js, Kind::Ptr(types::pointer_to(self.info(), t)))),
                    _ => err(pos, "cannot take the address of a value that is not in memory"),
                },
                UnOp::Not => {
                    let (js, k) = self.rvalue(operand)?;
                    Ok((format!("(({}) ? 0 : 1)", self.truth(&js, k, operand.pos)?), Kind::Num(self.prim("bool"))))
                }
                UnOp::Neg => {
                    let (js, t) = self.number(operand)?;
                    Ok((format!("(-({js}))"), Kind::Num(t)))
                }
                UnOp::Plus => {
                    let (js, t) = self.number(operand)?;
                    Ok((js, Kind::Num(t)))
                }
                UnOp::BitNot => {
                    let (js, t) = self.number(operand)?;
                    Ok((format!("R.bnot({js})"), Kind::Num(t)))
                }
            },
            ExprKind::Binary { op, left, right } => self.binary(*op, left, right, pos),
            ExprKind::Cast { ty, operand } => {
                let Some(mut to) = types::lookup(self.info(), &ty.base) else {
                    return err(ty.pos, format!("unknown type '{}'", ty.base));
                };
                for _ in 0..ty.pointers {
                    to = types::pointer_to(self.info(), to);
                }
                let (js, k) = self.rvalue(operand)?;
                let target = self.info().ty(to);
                match (&target.kind, k) {
                    (TypeKind::Pointer { .. }, Kind::Ptr(_)) => Ok((js, Kind::Ptr(to))),
                    (TypeKind::Pointer { .. }, Kind::Num(_)) => Ok((format!("ptr({js})"), Kind::Ptr(to))),
                    (TypeKind::Float, Kind::Num(_)) => Ok((js, Kind::Num(to))),
                    (TypeKind::Int { signed } | TypeKind::Char { signed } | TypeKind::Enum { signed, .. }, Kind::Num(_) | Kind::Ptr(_)) => {
                        let n = if matches!(k, Kind::Ptr(_)) { format!("R.pn({js})") } else { js };
                        Ok((format!("R.cast({n}, {}, {signed})", target.size), Kind::Num(to)))
                    }
                    (TypeKind::Bool, Kind::Num(_)) => Ok((format!("(({js}) != 0 ? 1 : 0)"), Kind::Num(to))),
                    _ => err(pos, format!("cannot convert to '{}' in a condition", target.name)),
                }
            }
            ExprKind::SizeofType(t) => match types::lookup(self.info(), &t.base) {
                Some(id) => Ok((
                    format!("{}", if t.pointers > 0 { 8 } else { self.info().ty(id).size }),
                    Kind::Num(self.prim("unsigned long")),
                )),
                None => err(t.pos, format!("unknown type '{}'", t.base)),
            },
            ExprKind::SizeofExpr(x) => {
                let (_, k) = self.expr_raw(x)?;
                let t = match k {
                    Kind::Num(t) | Kind::Ptr(t) | Kind::Place(t) => t,
                };
                Ok((format!("{}", self.info().ty(t).size), Kind::Num(self.prim("unsigned long"))))
            }
            ExprKind::Ternary { cond, then, otherwise } => {
                let (cjs, ck) = self.rvalue(cond)?;
                let c = self.truth(&cjs, ck, cond.pos)?;
                let (a, ak) = self.rvalue(then)?;
                let (b, _) = self.rvalue(otherwise)?;
                Ok((format!("({c} ? {a} : {b})"), ak))
            }
            ExprKind::Repeat { .. } => err(pos, "'@' ranges are for debug_eval, not conditions or logpoints"),
            ExprKind::Assign { .. } => err(pos, "a condition or logpoint cannot assign; use '==' to compare"),
        }
    }

    fn identifier(&self, name: &str, pos: usize) -> R<(String, Kind)> {
        if let Some(v) = self.at.vars.iter().rev().find(|v| v.name == name) {
            let ty = self.at.scope.and_then(|s| s.var(name)).and_then(|sv| sv.ty);
            let Some(ty) = ty else {
                return err(pos, format!("'{name}' has no type information"));
            };
            let found = self.variable(name, ty, &v.location, pos);
            return match found {
                Err(e) if self.lenient => {
                    let msg = serde_json::to_string(&e.message).unwrap_or_default();
                    Ok((format!("R.fail({msg})"), Kind::Num(ty)))
                }
                other => other,
            };
        }
        self.global_or_enumerator(name, pos)
    }

    fn variable(&self, name: &str, ty: TypeId, location: &VarLocation, pos: usize) -> R<(String, Kind)> {
        match location {
            VarLocation::Register { reg } => match self.ty_kind(ty) {
                TypeKind::Pointer { .. } => Ok((format!("c.{reg}"), Kind::Ptr(ty))),
                TypeKind::Float | TypeKind::Struct { .. } | TypeKind::Array { .. } => err(pos, format!("'{name}' is in a register this condition cannot read")),
                kind => {
                    let signed = matches!(
                        kind,
                        TypeKind::Int { signed: true } | TypeKind::Enum { signed: true, .. } | TypeKind::Char { signed: true }
                    );
                    Ok((format!("R.reg(c.{reg}, {}, {signed})", self.info().ty(ty).size), Kind::Num(ty)))
                }
            },
            VarLocation::Memory { base, offset } => Ok((format!("c.{base}.add({offset})"), Kind::Place(ty))),
            VarLocation::Static { address } => Ok((format!("R.g(\"0x{address:x}\")"), Kind::Place(ty))),
            VarLocation::Value { value } => Ok((format!("{value}"), Kind::Num(ty))),
            VarLocation::OptimizedOut => err(pos, format!("'{name}' is optimized out at this line; pick a line where it is live")),
            VarLocation::Unsupported { why } => err(pos, format!("'{name}' cannot be read here ({why})")),
        }
    }

    fn global_or_enumerator(&self, name: &str, pos: usize) -> R<(String, Kind)> {
        if let Some(g) = self.info().global(name) {
            let Some(ty) = g.ty else { return err(pos, format!("'{name}' has no type information")) };
            return Ok((format!("R.g(\"0x{:x}\")", g.address.wrapping_add(self.at.offset)), Kind::Place(ty)));
        }
        if let Some((ty, value)) = types::enumerator(self.info(), name) {
            return Ok((format!("{value}"), Kind::Num(ty)));
        }
        let mut names: Vec<&str> = self.at.vars.iter().map(|v| v.name.as_str()).collect();
        names.sort();
        names.dedup();
        err(
            pos,
            format!(
                "no variable '{name}' here; in scope: {}. (JavaScript conditions need the 'js:' prefix, e.g. 'js:args[0] > 100'.)",
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            ),
        )
    }

    fn binary(&self, op: BinOp, left: &Expr, right: &Expr, pos: usize) -> R<(String, Kind)> {
        let boolean = self.prim("bool");
        if matches!(op, BinOp::And | BinOp::Or) {
            let (l, lk) = self.rvalue(left)?;
            let (r, rk) = self.rvalue(right)?;
            let (l, r) = (self.truth(&l, lk, left.pos)?, self.truth(&r, rk, right.pos)?);
            let js_op = if op == BinOp::And { "&&" } else { "||" };
            return Ok((format!("(({l} {js_op} {r}) ? 1 : 0)"), Kind::Num(boolean)));
        }
        if let Some((other, s)) = string_comparison(op, left, right) {
            let (js, k) = self.rvalue(other)?;
            let text = match k {
                Kind::Ptr(_) => format!("R.cstr({js})"),
                Kind::Place(t) if matches!(self.ty_kind(t), TypeKind::Array { .. }) => format!("R.cstr({js})"),
                _ => return err(other.pos, "only a char* or char[] compares with a string literal in a condition"),
            };
            let lit = serde_json::to_string(s).unwrap_or_default();
            let js_op = if op == BinOp::Eq { "===" } else { "!==" };
            return Ok((format!("(({text} {js_op} {lit}) ? 1 : 0)"), Kind::Num(boolean)));
        }
        let (l, lk) = self.rvalue(left)?;
        let (r, rk) = self.rvalue(right)?;
        // Pointer arithmetic and comparisons.
        let pointee = |k: Kind| match k {
            Kind::Ptr(pt) => match self.ty_kind(pt) {
                TypeKind::Pointer { target: Some(t) } => Some(self.info().ty(t).size.max(1)),
                _ => Some(1),
            },
            _ => None,
        };
        match (op, pointee(lk), pointee(rk)) {
            (BinOp::Add | BinOp::Sub, Some(size), None) => {
                let sign = if op == BinOp::Add { "" } else { "-" };
                return Ok((format!("{l}.add({sign}({r}) * {size})"), lk));
            }
            (BinOp::Sub, Some(size), Some(_)) => return Ok((format!("((R.pn({l}) - R.pn({r})) / {size})"), Kind::Num(self.prim("long")))),
            (BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge, Some(_), _)
            | (BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge, _, Some(_)) => {
                let n = |js: &str, k: Kind| if matches!(k, Kind::Ptr(_)) { format!("R.pn({js})") } else { js.to_string() };
                return Ok((format!("(({} {} {}) ? 1 : 0)", n(&l, lk), js_cmp(op), n(&r, rk)), Kind::Num(boolean)));
            }
            _ => {}
        }
        let (Kind::Num(lt), Kind::Num(rt)) = (lk, rk) else {
            return err(pos, "this operator needs numbers or pointers");
        };
        let float = self.is_float(lt) || self.is_float(rt);
        let result = if float {
            self.prim("double")
        } else if self.info().ty(lt).size >= self.info().ty(rt).size {
            lt
        } else {
            rt
        };
        let js = match op {
            BinOp::Add => format!("({l} + {r})"),
            BinOp::Sub => format!("({l} - {r})"),
            BinOp::Mul => format!("({l} * {r})"),
            BinOp::Div if float => format!("({l} / {r})"),
            BinOp::Div => format!("R.div({l}, {r})"),
            BinOp::Rem if float => return err(pos, "'%' needs integers"),
            BinOp::Rem => format!("R.rem({l}, {r})"),
            BinOp::Shl => format!("R.shl({l}, {r})"),
            BinOp::Shr => format!("R.shr({l}, {r})"),
            BinOp::BitAnd => format!("R.band({l}, {r})"),
            BinOp::BitOr => format!("R.bor({l}, {r})"),
            BinOp::BitXor => format!("R.bxor({l}, {r})"),
            _ => return Ok((format!("(({l} {} {r}) ? 1 : 0)", js_cmp(op)), Kind::Num(boolean))),
        };
        Ok((js, Kind::Num(result)))
    }
}

fn js_cmp(op: BinOp) -> &'static str {
    match op {
        BinOp::Lt => "<",
        BinOp::Gt => ">",
        BinOp::Le => "<=",
        BinOp::Ge => ">=",
        BinOp::Eq => "===",
        _ => "!==",
    }
}

/// The registers a compiled expression may name (Frida's CpuContext fields).
const REGISTERS: [&str; 17] = [
    "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip",
];
