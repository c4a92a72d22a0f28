//! Evaluation of a parsed expression against one frame: identifiers resolve to the frame's
//! locals and parameters, then `this->` members, globals/statics and enumerators; operators
//! follow C (usual arithmetic conversions, pointer arithmetic scaled by the pointee's size);
//! containers index like arrays (`v[2]` on a `std::vector` or a Rust `Vec`). Nothing runs in
//! the target: memory is read, and written only by an assignment.

use serde_json::{json, Value as Json};

use super::location::{Located, LocationContext};
use super::parser::{parse, string_comparison, BinOp, Expr, ExprKind, TypeName, UnOp};
use super::scope::{Scope, VarSource};
use super::types;
use super::unwind::{FrameRegs, Unwinder};
use super::{render, EvalError, Memory, RenderOptions};
use crate::symbols::{DebugInfo, Member, Type, TypeId, TypeKind};

/// Where a value lives, for `&x`, writes and the result's `address`.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    Memory(u64),
    Register(String),
    /// A computed value.
    None,
}

/// A value of a DWARF type: exactly `size` bytes, little-endian.
#[derive(Debug, Clone)]
pub struct TypedValue {
    pub ty: TypeId,
    pub bytes: Vec<u8>,
    pub place: Place,
}

/// One frame to evaluate in.
pub struct Frame {
    pub regs: FrameRegs,
    /// The variables in scope at the frame's PC (None: no DWARF there).
    pub scope: Option<Scope>,
    /// Runtime minus static addresses of the binary.
    pub slide: u64,
    /// Function name, for messages.
    pub function: Option<String>,
}

/// Writes a value's bytes to a place (memory of the target, or a paused register).
pub type Writer<'a> = &'a dyn Fn(&Place, &[u8]) -> Result<(), String>;

pub struct Evaluator<'a> {
    pub info: &'a DebugInfo,
    pub mem: &'a dyn Memory,
    pub frame: &'a Frame,
    pub unwinder: Option<&'a Unwinder>,
    /// None: the evaluation may not write (conditions, reads).
    pub writer: Option<Writer<'a>>,
    /// The caller's registers, unwound on first need (entry values).
    pub caller: std::cell::OnceCell<Option<FrameRegs>>,
}

/// Largest `x@n` and array read, in bytes.
const MAX_READ: u64 = 1 << 20;

type R<T> = Result<T, EvalError>;

fn err<T>(pos: usize, msg: impl Into<String>) -> R<T> {
    Err(EvalError { message: msg.into(), pos: Some(pos) })
}

impl<'a> Evaluator<'a> {
    /// Parse and evaluate `src`, then render it: `{expression, type, value, address?}` or
    /// `{expression, error}`.
    pub fn eval_to_json(&self, src: &str, opts: &RenderOptions) -> Json {
        match self.eval_str(src) {
            Ok(v) => {
                let address = match v.place {
                    Place::Memory(a) => Some(a),
                    _ => None,
                };
                let value = render(self.info, v.ty, &v.bytes, address, self.mem, opts);
                let mut out = json!({ "expression": src, "type": type_name(self.info, v.ty), "value": value });
                if let Some(a) = address {
                    out["address"] = json!(format!("0x{a:x}"));
                }
                if let Place::Register(r) = &v.place {
                    out["register"] = json!(r);
                }
                out
            }
            Err(e) => {
                let mut out = json!({ "expression": src, "error": e.to_string() });
                if let Some(p) = e.pos {
                    out["position"] = json!(p);
                }
                out
            }
        }
    }

    /// Every variable in scope (inner declarations shadow outer ones), rendered:
    /// `{name, type, isParameter, location, value | error}`.
    /// `declared` spells types as the source declares them (`const struct p * const`), by name.
    pub fn locals(&self, opts: &RenderOptions, declared: &std::collections::HashMap<String, String>) -> Vec<Json> {
        let Some(scope) = &self.frame.scope else { return Vec::new() };
        let mut seen = std::collections::HashSet::new();
        let mut out: Vec<Json> = Vec::new();
        for var in scope.vars.iter().rev() {
            if !seen.insert(var.name.as_str()) {
                continue;
            }
            let type_name = match declared.get(&var.name) {
                Some(d) => d.clone(),
                None => var.ty.map(|t| type_name(self.info, t)).unwrap_or_else(|| "?".into()),
            };
            let mut item = json!({ "name": var.name, "type": type_name, "isParameter": var.is_parameter });
            match self.variable(scope, var, 0) {
                Ok(v) => {
                    let address = match v.place {
                        Place::Memory(a) => Some(a),
                        _ => None,
                    };
                    item["location"] = json!(match &v.place {
                        Place::Memory(a) => format!("memory 0x{a:x}"),
                        Place::Register(r) => format!("register {r}"),
                        Place::None => "computed".to_string(),
                    });
                    item["value"] = render(self.info, v.ty, &v.bytes, address, self.mem, opts);
                }
                Err(e) => {
                    item["location"] = json!(if e.message.contains("optimized out") { "optimized out" } else { "unavailable" });
                    item["error"] = json!(e.message);
                }
            }
            out.push(item);
        }
        out.reverse();
        out
    }

    pub fn eval_str(&self, src: &str) -> R<TypedValue> {
        let info = self.info;
        let is_type = |name: &str| self.frame.scope.as_ref().is_none_or(|s| s.var(name).is_none()) && types::is_type_name(info, name);
        let ast = parse(src, &is_type)?;
        self.eval(&ast)
    }

    /// Whether a value is "true" in C's sense.
    pub fn truthy(&self, v: &TypedValue, pos: usize) -> R<bool> {
        match self.scalar(v, pos)? {
            Scalar::Int(i) => Ok(i != 0),
            Scalar::Float(f) => Ok(f != 0.0),
        }
    }

    pub fn eval(&self, e: &Expr) -> R<TypedValue> {
        let pos = e.pos;
        match &e.kind {
            ExprKind::Int { value, unsigned, long } => {
                let fits_int = *value <= i32::MAX as u64;
                let name = match (*unsigned, *long || !fits_int) {
                    (false, false) => "int",
                    (true, false) => "unsigned int",
                    (false, true) => "long",
                    (true, true) => "unsigned long",
                };
                Ok(self.int_value(name, *value as i128))
            }
            ExprKind::Float(f) => Ok(TypedValue { ty: self.prim("double"), bytes: f.to_le_bytes().to_vec(), place: Place::None }),
            ExprKind::Char(c) => Ok(TypedValue { ty: self.prim("char"), bytes: vec![*c as u8], place: Place::None }),
            ExprKind::Bool(b) => Ok(self.bool_value(*b)),
            ExprKind::Str(_) => err(pos, "a string literal can only be compared with a string (e.g. name == \"bob\")"),
            ExprKind::Ident(name) => self.identifier(name, pos),
            ExprKind::Register(r) => self.register(r, pos),
            ExprKind::Member { base, field, arrow: _ } => {
                let b = self.eval(base)?;
                self.member(b, field, pos)
            }
            ExprKind::Index { base, index } => {
                let b = self.eval(base)?;
                let i = self.eval(index)?;
                let i = self.int_of(&i, index.pos)?;
                self.index(b, i, pos)
            }
            ExprKind::Unary { op, operand } => self.unary(*op, operand, pos),
            ExprKind::Binary { op, left, right } => self.binary(*op, left, right, pos),
            ExprKind::Repeat { base, count } => {
                let b = self.eval(base)?;
                let n = self.eval(count)?;
                let n = self.int_of(&n, count.pos)?;
                let Place::Memory(addr) = b.place else {
                    return err(pos, "'@' needs a value in memory on its left, e.g. *p@8 or arr[0]@4");
                };
                let el = self.info.ty(b.ty);
                if n <= 0 || (n as u64).saturating_mul(el.size.max(1)) > MAX_READ {
                    return err(count.pos, format!("'@' takes a count from 1 to {} for this element size", MAX_READ / el.size.max(1)));
                }
                let ty = types::array_of(self.info, b.ty, n as u64);
                self.read_at(ty, addr, pos)
            }
            ExprKind::Cast { ty, operand } => {
                let v = self.eval(operand)?;
                let to = self.resolve_type(ty)?;
                self.cast(v, to, pos)
            }
            ExprKind::SizeofType(t) => {
                let id = self.resolve_type(t)?;
                Ok(self.int_value("unsigned long", self.info.ty(id).size as i128))
            }
            ExprKind::SizeofExpr(x) => {
                let v = self.eval(x)?;
                Ok(self.int_value("unsigned long", self.info.ty(v.ty).size as i128))
            }
            ExprKind::Ternary { cond, then, otherwise } => {
                let c = self.eval(cond)?;
                if self.truthy(&c, cond.pos)? {
                    self.eval(then)
                } else {
                    self.eval(otherwise)
                }
            }
            ExprKind::Assign { target, value } => self.assign(target, value, pos),
        }
    }

    // ---- names ----

    fn identifier(&self, name: &str, pos: usize) -> R<TypedValue> {
        if let Some(scope) = &self.frame.scope {
            if let Some(var) = scope.var(name) {
                return self.variable(scope, var, pos);
            }
            // Inside a C++ method, members are in scope (gdb does the same).
            if let Some(this) = scope.var("this") {
                let this_v = self.variable(scope, this, pos)?;
                if let Ok(v) = self.member(this_v, name, pos) {
                    return Ok(v);
                }
            }
        }
        if let Some(g) = self.info.global(name) {
            let Some(ty) = g.ty else { return err(pos, format!("'{name}' has no type information")) };
            return self.read_at(ty, g.address.wrapping_add(self.frame.slide), pos);
        }
        if let Some((ty, value)) = types::enumerator(self.info, name) {
            let size = self.info.ty(ty).size as usize;
            return Ok(TypedValue { ty, bytes: value.to_le_bytes()[..size.clamp(1, 8)].to_vec(), place: Place::None });
        }
        let mut known: Vec<String> = self.frame.scope.iter().flat_map(|s| s.vars.iter().map(|v| v.name.clone())).collect();
        known.sort();
        known.dedup();
        let near = self.info.closest_globals(name, 3);
        let at = self.frame.function.as_deref().map(|f| format!(" at {f}")).unwrap_or_default();
        err(
            pos,
            format!(
                "no variable '{name}' in scope{at}; locals and parameters: {}{}",
                if known.is_empty() { "none".to_string() } else { known.join(", ") },
                if near.is_empty() { String::new() } else { format!("; globals with close names: {}", near.join(", ")) }
            ),
        )
    }

    fn variable(&self, scope: &Scope, var: &super::scope::ScopeVar, pos: usize) -> R<TypedValue> {
        let Some(ty) = var.ty else { return err(pos, format!("'{}' has no type information", var.name)) };
        let size = self.info.ty(ty).size;
        match &var.source {
            VarSource::OptimizedOut => err(pos, format!("'{}' is optimized out at this pc", var.name)),
            VarSource::EntryUnavailable(why) => err(pos, format!("'{}' at the function's entry: {why}", var.name)),
            VarSource::EntryRegister(r) => {
                let v = self.frame.regs.regs.get(*r).copied().ok_or_else(|| EvalError::at(pos, &format!("register {r} is not known")))?;
                let mut bytes = v.to_le_bytes().to_vec();
                bytes.resize(size as usize, 0);
                Ok(TypedValue { ty, bytes, place: Place::Register(r.to_string()) })
            }
            VarSource::Constant(b) => {
                let mut bytes = b.clone();
                bytes.resize(size as usize, 0);
                Ok(TypedValue { ty, bytes, place: Place::None })
            }
            VarSource::Location(expr) => {
                let ctx = LocationContext {
                    info: self.info,
                    unit: scope.unit,
                    encoding: scope.encoding,
                    frame: &self.frame.regs,
                    slide: self.frame.slide,
                    mem: self.mem,
                    unwinder: self.unwinder,
                    frame_base: scope.frame_base.as_ref(),
                    caller: self
                        .caller
                        .get_or_init(|| self.unwinder.and_then(|u| u.caller(&self.frame.regs, self.frame.slide, self.mem)))
                        .as_ref(),
                };
                match ctx.locate(expr, size).map_err(|m| EvalError::at(pos, &format!("'{}': {m}", var.name)))? {
                    Located::Memory(a) => self.read_at(ty, a, pos),
                    Located::Register(r) => {
                        let v = self.frame.regs.regs.get(r).copied().ok_or_else(|| {
                            EvalError::at(pos, &format!("'{}' is in register {r}, which is not known in this frame", var.name))
                        })?;
                        let mut bytes = v.to_le_bytes().to_vec();
                        bytes.resize(size as usize, 0);
                        Ok(TypedValue { ty, bytes, place: Place::Register(r.to_string()) })
                    }
                    Located::Bytes(bytes) => Ok(TypedValue { ty, bytes, place: Place::None }),
                }
            }
        }
    }

    fn register(&self, r: &str, pos: usize) -> R<TypedValue> {
        let name = match r {
            "pc" | "rip" => "rip",
            "sp" => "rsp",
            "fp" => "rbp",
            other => other,
        };
        let Some(&v) = self.frame.regs.regs.get(name) else {
            let known: Vec<&str> = self.frame.regs.regs.keys().map(String::as_str).collect();
            return err(pos, format!("no register ${r} in this frame; known: {}", known.join(", ")));
        };
        let ty = if matches!(name, "rip" | "rsp" | "rbp") {
            let void = self.prim("void");
            types::pointer_to(self.info, void)
        } else {
            self.prim("long")
        };
        Ok(TypedValue { ty, bytes: v.to_le_bytes().to_vec(), place: Place::Register(name.to_string()) })
    }

    fn resolve_type(&self, t: &TypeName) -> R<TypeId> {
        let Some(mut id) = types::lookup(self.info, &t.base) else {
            return err(t.pos, format!("unknown type '{}'; use a name the program declares (e.g. 'struct node', 'Config', 'unsigned int')", t.base));
        };
        for _ in 0..t.pointers {
            id = types::pointer_to(self.info, id);
        }
        Ok(id)
    }

    // ---- memory ----

    fn read_at(&self, ty: TypeId, addr: u64, pos: usize) -> R<TypedValue> {
        let size = self.info.ty(ty).size;
        if size > MAX_READ {
            return err(pos, format!("the value is {size} bytes; at most {MAX_READ} are read"));
        }
        let bytes = self.mem.read_vec(addr, size as usize).map_err(|m| EvalError::at(pos, &m))?;
        Ok(TypedValue { ty, bytes, place: Place::Memory(addr) })
    }

    fn deref(&self, v: &TypedValue, pos: usize) -> R<TypedValue> {
        let t = self.info.ty(v.ty);
        match &t.kind {
            TypeKind::Pointer { target } => {
                let addr = le_u64(&v.bytes);
                let Some(target) = *target else { return err(pos, "cannot dereference a 'void *'; cast it first, e.g. *(int *)p") };
                if addr == 0 {
                    return err(pos, "dereferencing a null pointer");
                }
                if matches!(self.info.ty(target).kind, TypeKind::Void | TypeKind::Function) {
                    return err(pos, format!("cannot dereference a '{}'", display_type(&t)));
                }
                self.read_at(target, addr, pos)
            }
            TypeKind::Array { element, .. } => match v.place {
                Place::Memory(a) => self.read_at(*element, a, pos),
                _ => Ok(TypedValue { ty: *element, bytes: v.bytes[..self.info.ty(*element).size as usize].to_vec(), place: Place::None }),
            },
            TypeKind::Struct { .. } => match self.smart_pointer(v, pos)? {
                Some(p) => self.deref(&p, pos),
                None => err(pos, format!("cannot dereference a value of type '{}' (not a pointer)", display_type(&t))),
            },
            _ => err(pos, format!("cannot dereference a value of type '{}' (not a pointer)", display_type(&t))),
        }
    }

    /// The raw pointer a libstdc++ smart pointer holds (`_M_head_impl` of unique_ptr,
    /// `_M_ptr` of shared_ptr/weak_ptr), found through its nested implementation members.
    fn smart_pointer(&self, v: &TypedValue, pos: usize) -> R<Option<TypedValue>> {
        let t = self.info.ty(v.ty);
        let smart = ["unique_ptr<", "shared_ptr<", "weak_ptr<"].iter().any(|n| t.name.contains(n));
        let TypeKind::Struct { members, .. } = &t.kind else { return Ok(None) };
        if !smart {
            return Ok(None);
        }
        fn search(info: &DebugInfo, members: &[Member], depth: u32) -> Option<(u64, Member)> {
            if depth > 8 {
                return None;
            }
            for m in members {
                let mt = info.ty(m.ty);
                if (m.name == "_M_head_impl" || m.name == "_M_ptr") && matches!(mt.kind, TypeKind::Pointer { .. }) {
                    return Some((m.offset, m.clone()));
                }
                if let TypeKind::Struct { members: inner, .. } = &mt.kind {
                    if let Some((off, found)) = search(info, inner, depth + 1) {
                        return Some((m.offset + off, found));
                    }
                }
            }
            None
        }
        match search(self.info, members, 0) {
            Some((off, m)) => Ok(Some(self.field_value(v, off, &m, pos)?)),
            None => Ok(None),
        }
    }

    // ---- fields and indexing ----

    pub fn member(&self, base: TypedValue, field: &str, pos: usize) -> R<TypedValue> {
        let t = self.info.ty(base.ty);
        let base = match &t.kind {
            TypeKind::Pointer { .. } => self.deref(&base, pos)?,
            _ => base,
        };
        let t = self.info.ty(base.ty);
        match &t.kind {
            TypeKind::Struct { members, .. } => match find_member(self.info, members, field, 0) {
                Some((offset, m)) => self.field_value(&base, offset, &m, pos),
                // `up->x` on a std::unique_ptr / std::shared_ptr: through the pointer it holds.
                None if self.smart_pointer(&base, pos)?.is_some() => {
                    let inner = self.smart_pointer(&base, pos)?.expect("checked");
                    self.member(inner, field, pos)
                }
                None => {
                    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
                    err(pos, format!("unknown field '{field}' in {}; fields: {}", display_type(&t), names.join(", ")))
                }
            },
            TypeKind::RustVec { len, .. } | TypeKind::RustSlice { len, .. } | TypeKind::RustStr { len, .. } if field == "len" => {
                Ok(self.int_value("usize", le_u64(&base.bytes[*len as usize..]) as i128))
            }
            TypeKind::RustEnum { .. } => err(pos, format!("'{}' is an enum: evaluate it whole to see its variant and fields", display_type(&t))),
            _ => err(pos, format!("'{field}': a value of type '{}' has no fields", display_type(&t))),
        }
    }

    fn field_value(&self, base: &TypedValue, offset: u64, m: &Member, pos: usize) -> R<TypedValue> {
        let ft = self.info.ty(m.ty);
        let start = offset as usize;
        if let Some((bit_off, bits)) = m.bits {
            let storage = (bit_off + bits).div_ceil(8).clamp(1, 8) as usize;
            let raw = base.bytes.get(start..start + storage).ok_or_else(|| EvalError::at(pos, "field outside its struct"))?;
            let mut word = [0u8; 8];
            word[..storage].copy_from_slice(raw);
            let mut v = (u64::from_le_bytes(word) >> bit_off) & if bits >= 64 { u64::MAX } else { (1 << bits) - 1 };
            let signed = matches!(ft.kind, TypeKind::Int { signed: true } | TypeKind::Enum { signed: true, .. });
            if signed && bits > 0 && bits < 64 && (v >> (bits - 1)) & 1 == 1 {
                v |= !((1u64 << bits) - 1);
            }
            let mut bytes = v.to_le_bytes().to_vec();
            bytes.resize(ft.size as usize, 0);
            return Ok(TypedValue { ty: m.ty, bytes, place: Place::None });
        }
        let end = start + ft.size as usize;
        let bytes = base.bytes.get(start..end).ok_or_else(|| EvalError::at(pos, "field outside its struct"))?.to_vec();
        let place = match base.place {
            Place::Memory(a) => Place::Memory(a + offset),
            _ => Place::None,
        };
        Ok(TypedValue { ty: m.ty, bytes, place })
    }

    fn index(&self, base: TypedValue, i: i128, pos: usize) -> R<TypedValue> {
        let t = self.info.ty(base.ty);
        let element_at = |el: TypeId, start: u64, len: Option<u64>| -> R<TypedValue> {
            if let Some(n) = len {
                if i < 0 || i as u64 >= n {
                    return err(pos, format!("index {i} is out of range for length {n}"));
                }
            }
            let size = self.info.ty(el).size.max(1);
            self.read_at(el, start.wrapping_add((i as i64 as u64).wrapping_mul(size)), pos)
        };
        match &t.kind {
            TypeKind::Array { element, count } => match base.place {
                Place::Memory(a) => element_at(*element, a, None),
                _ => {
                    let size = self.info.ty(*element).size as usize;
                    let n = count.unwrap_or(0) as i128;
                    if i < 0 || i >= n {
                        return err(pos, format!("index {i} is out of range for length {n}"));
                    }
                    let s = i as usize * size;
                    Ok(TypedValue { ty: *element, bytes: base.bytes[s..s + size].to_vec(), place: Place::None })
                }
            },
            TypeKind::Pointer { target: Some(el) } => {
                let a = le_u64(&base.bytes);
                if a == 0 {
                    return err(pos, "indexing a null pointer");
                }
                element_at(*el, a, None)
            }
            TypeKind::RustVec { ptr, len, element, .. } | TypeKind::RustSlice { ptr, len, element } => {
                element_at(*element, le_u64(&base.bytes[*ptr as usize..]), Some(le_u64(&base.bytes[*len as usize..])))
            }
            TypeKind::RustStr { ptr, len } => {
                let u8t = self.prim("u8");
                element_at(u8t, le_u64(&base.bytes[*ptr as usize..]), Some(le_u64(&base.bytes[*len as usize..])))
            }
            TypeKind::Struct { members, .. } => {
                // libstdc++: std::vector (_M_start/_M_finish), std::array (_M_elems), std::string (_M_p).
                if let Some((off, m)) = find_member(self.info, members, "_M_start", 0) {
                    let start = self.field_value(&base, off, &m, pos)?;
                    let finish = find_member(self.info, members, "_M_finish", 0)
                        .map(|(o, fm)| self.field_value(&base, o, &fm, pos))
                        .transpose()?;
                    if let TypeKind::Pointer { target: Some(el) } = self.info.ty(m.ty).kind {
                        let size = self.info.ty(el).size.max(1);
                        let len = finish.map(|f| le_u64(&f.bytes).wrapping_sub(le_u64(&start.bytes)) / size);
                        return element_at(el, le_u64(&start.bytes), len);
                    }
                }
                if let Some((off, m)) = find_member(self.info, members, "_M_elems", 0) {
                    let arr = self.field_value(&base, off, &m, pos)?;
                    return self.index(arr, i, pos);
                }
                if let Some((off, m)) = find_member(self.info, members, "_M_p", 0) {
                    let p = self.field_value(&base, off, &m, pos)?;
                    let len = find_member(self.info, members, "_M_string_length", 0)
                        .map(|(o, lm)| self.field_value(&base, o, &lm, pos))
                        .transpose()?
                        .map(|v| le_u64(&v.bytes));
                    if let TypeKind::Pointer { target: Some(el) } = self.info.ty(m.ty).kind {
                        return element_at(el, le_u64(&p.bytes), len);
                    }
                }
                err(pos, format!("cannot index a value of type '{}'", display_type(&t)))
            }
            _ => err(pos, format!("cannot index a value of type '{}' (not an array, pointer or container)", display_type(&t))),
        }
    }

    // ---- operators ----

    fn unary(&self, op: UnOp, operand: &Expr, pos: usize) -> R<TypedValue> {
        if op == UnOp::AddrOf {
            let v = self.eval(operand)?;
            let Place::Memory(a) = v.place else {
                return err(pos, "cannot take the address of a value that is not in memory (a register or a computed value)");
            };
            return Ok(TypedValue { ty: types::pointer_to(self.info, v.ty), bytes: a.to_le_bytes().to_vec(), place: Place::None });
        }
        let v = self.eval(operand)?;
        match op {
            UnOp::Deref => self.deref(&v, pos),
            UnOp::Not => Ok(self.bool_value(!self.truthy(&v, operand.pos)?)),
            UnOp::Plus => {
                self.scalar(&v, operand.pos)?;
                Ok(v)
            }
            UnOp::Neg => match self.scalar(&v, operand.pos)? {
                Scalar::Float(f) => Ok(self.float_value(v.ty, -f)),
                Scalar::Int(i) => Ok(self.int_result(&v, &v, i.wrapping_neg())),
            },
            UnOp::BitNot => match self.scalar(&v, operand.pos)? {
                Scalar::Int(i) => Ok(self.int_result(&v, &v, !i)),
                Scalar::Float(_) => err(pos, "'~' needs an integer"),
            },
            UnOp::AddrOf => unreachable!(),
        }
    }

    fn binary(&self, op: BinOp, left: &Expr, right: &Expr, pos: usize) -> R<TypedValue> {
        // Short-circuit: `p && p->next` must not read through a null p.
        if matches!(op, BinOp::And | BinOp::Or) {
            let l = self.eval(left)?;
            let lt = self.truthy(&l, left.pos)?;
            if (op == BinOp::And && !lt) || (op == BinOp::Or && lt) {
                return Ok(self.bool_value(lt));
            }
            let r = self.eval(right)?;
            return Ok(self.bool_value(self.truthy(&r, right.pos)?));
        }
        // String comparisons: `name == "bob"` on char*, char[], std::string, String, &str.
        if let Some((other, s)) = string_comparison(op, left, right) {
            let v = self.eval(other)?;
            let text = self.text_of(&v, other.pos)?;
            return Ok(self.bool_value((text == *s) == (op == BinOp::Eq)));
        }
        let l = self.eval(left)?;
        let r = self.eval(right)?;
        let lt = self.info.ty(l.ty);
        let rt = self.info.ty(r.ty);
        // Pointer arithmetic and comparison.
        let lp = pointee_size(self.info, &lt);
        let rp = pointee_size(self.info, &rt);
        match (op, lp, rp) {
            (BinOp::Add | BinOp::Sub, Some(size), None) => {
                let n = self.int_of(&r, right.pos)?;
                let delta = (n as i64).wrapping_mul(size as i64);
                let a = le_u64(&l.bytes);
                let a = if op == BinOp::Add { a.wrapping_add(delta as u64) } else { a.wrapping_sub(delta as u64) };
                return Ok(TypedValue { ty: self.pointer_type(&l), bytes: a.to_le_bytes().to_vec(), place: Place::None });
            }
            (BinOp::Add, None, Some(size)) => {
                let n = self.int_of(&l, left.pos)?;
                let a = le_u64(&r.bytes).wrapping_add((n as i64).wrapping_mul(size as i64) as u64);
                return Ok(TypedValue { ty: self.pointer_type(&r), bytes: a.to_le_bytes().to_vec(), place: Place::None });
            }
            (BinOp::Sub, Some(size), Some(_)) => {
                let d = (le_u64(&l.bytes) as i64).wrapping_sub(le_u64(&r.bytes) as i64) / size.max(1) as i64;
                return Ok(self.int_value("long", d as i128));
            }
            _ => {}
        }
        let (a, b) = (self.scalar(&l, left.pos)?, self.scalar(&r, right.pos)?);
        let cmp = |o: std::cmp::Ordering| -> bool {
            use std::cmp::Ordering::*;
            match op {
                BinOp::Lt => o == Less,
                BinOp::Gt => o == Greater,
                BinOp::Le => o != Greater,
                BinOp::Ge => o != Less,
                BinOp::Eq => o == Equal,
                _ => o != Equal,
            }
        };
        let is_cmp = matches!(op, BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge | BinOp::Eq | BinOp::Ne);
        match (a, b) {
            (Scalar::Int(x), Scalar::Int(y)) => {
                let unsigned = self.common_unsigned(&l, &r);
                if is_cmp {
                    let o = if unsigned { (x as u64 as u128).cmp(&(y as u64 as u128)) } else { x.cmp(&y) };
                    return Ok(self.bool_value(cmp(o)));
                }
                let v = match op {
                    BinOp::Add => x.wrapping_add(y),
                    BinOp::Sub => x.wrapping_sub(y),
                    BinOp::Mul => x.wrapping_mul(y),
                    BinOp::Div | BinOp::Rem if y == 0 => return err(right.pos, "division by zero"),
                    BinOp::Div if unsigned => ((x as u64) / (y as u64)) as i128,
                    BinOp::Rem if unsigned => ((x as u64) % (y as u64)) as i128,
                    BinOp::Div => x.wrapping_div(y),
                    BinOp::Rem => x.wrapping_rem(y),
                    BinOp::Shl => x.wrapping_shl(y.clamp(0, 127) as u32),
                    BinOp::Shr if unsigned => ((x as u64) >> (y.clamp(0, 63) as u32)) as i128,
                    BinOp::Shr => x >> (y.clamp(0, 127) as u32),
                    BinOp::BitAnd => x & y,
                    BinOp::BitOr => x | y,
                    BinOp::BitXor => x ^ y,
                    _ => unreachable!("handled above"),
                };
                Ok(self.int_result(&l, &r, v))
            }
            (a, b) => {
                let (x, y) = (a.as_f64(), b.as_f64());
                if is_cmp {
                    return Ok(self.bool_value(x.partial_cmp(&y).is_some_and(cmp)));
                }
                let v = match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    _ => return err(pos, "this operator needs integers, not floating-point values"),
                };
                Ok(TypedValue { ty: self.prim("double"), bytes: v.to_le_bytes().to_vec(), place: Place::None })
            }
        }
    }

    fn assign(&self, target: &Expr, value: &Expr, pos: usize) -> R<TypedValue> {
        let Some(write) = self.writer else {
            return err(pos, "assignment is not allowed here (conditions and reads cannot change the program); use debug_memory write or debug_eval");
        };
        let t = self.eval(target)?;
        if t.place == Place::None {
            return err(target.pos, "cannot assign to a computed value; assign to a variable, field or element");
        }
        let v = self.eval(value)?;
        let converted = self.cast(v, t.ty, value.pos)?;
        if matches!(self.info.ty(t.ty).kind, TypeKind::Struct { .. } | TypeKind::Array { .. }) {
            return err(pos, "only scalars (numbers, bools, enums, pointers) can be assigned");
        }
        write(&t.place, &converted.bytes).map_err(|m| EvalError::at(pos, &m))?;
        Ok(TypedValue { ty: t.ty, bytes: converted.bytes, place: t.place })
    }

    /// C conversion of a scalar to `to` (numbers, bools, enums, pointers).
    pub fn cast(&self, v: TypedValue, to: TypeId, pos: usize) -> R<TypedValue> {
        let tt = self.info.ty(to);
        let from = self.info.ty(v.ty);
        if v.ty == to {
            return Ok(v);
        }
        let size = tt.size as usize;
        let scalar = self.scalar(&v, pos).map_err(|_| {
            EvalError::at(pos, &format!("cannot convert a '{}' to '{}'", display_type(&from), display_type(&tt)))
        })?;
        let bytes = match (&tt.kind, scalar) {
            (TypeKind::Float, s) => {
                let f = s.as_f64();
                if size == 4 { (f as f32).to_le_bytes().to_vec() } else { f.to_le_bytes().to_vec() }
            }
            (TypeKind::Bool, s) => vec![u8::from(s.as_f64() != 0.0 || matches!(s, Scalar::Int(i) if i != 0))],
            (TypeKind::Int { .. } | TypeKind::Char { .. } | TypeKind::Enum { .. } | TypeKind::Pointer { .. }, s) => {
                let i = match s {
                    Scalar::Int(i) => i,
                    Scalar::Float(f) => f as i128,
                };
                i.to_le_bytes()[..size.min(16)].to_vec()
            }
            _ => return err(pos, format!("cannot convert a '{}' to '{}'", display_type(&from), display_type(&tt))),
        };
        Ok(TypedValue { ty: to, bytes, place: Place::None })
    }

    // ---- scalars ----

    pub fn scalar(&self, v: &TypedValue, pos: usize) -> R<Scalar> {
        let t = self.info.ty(v.ty);
        let b = &v.bytes;
        Ok(match &t.kind {
            TypeKind::Int { signed } | TypeKind::Enum { signed, .. } | TypeKind::Char { signed } => Scalar::Int(int_from(b, *signed)),
            TypeKind::Bool => Scalar::Int(i128::from(b.first().copied().unwrap_or(0) != 0)),
            TypeKind::Pointer { .. } | TypeKind::Function => Scalar::Int(le_u64(b) as i128),
            TypeKind::Float => match b.len() {
                4 => Scalar::Float(f32::from_le_bytes(b[..4].try_into().unwrap()) as f64),
                8 => Scalar::Float(f64::from_le_bytes(b[..8].try_into().unwrap())),
                16 => Scalar::Float(x87_to_f64(b)),
                n => return err(pos, format!("a {}-byte float is not supported", n)),
            },
            _ => return err(pos, format!("a value of type '{}' is not a number (use a field, an element or * first)", display_type(&t))),
        })
    }

    fn int_of(&self, v: &TypedValue, pos: usize) -> R<i128> {
        match self.scalar(v, pos)? {
            Scalar::Int(i) => Ok(i),
            Scalar::Float(_) => err(pos, "an integer is needed here"),
        }
    }

    /// The text of a string-like value (char*, char[], std::string, Rust String/&str).
    fn text_of(&self, v: &TypedValue, pos: usize) -> R<String> {
        let t = self.info.ty(v.ty);
        let read = |addr: u64, len: Option<u64>| -> R<String> {
            let max = 1 << 16;
            let bytes = match len {
                Some(n) => self.mem.read_vec(addr, n.min(max) as usize).map_err(|m| EvalError::at(pos, &m))?,
                None => {
                    let mut out = Vec::new();
                    while out.len() < max as usize {
                        let mut b = [0u8; 1];
                        self.mem.read(addr + out.len() as u64, &mut b).map_err(|m| EvalError::at(pos, &m))?;
                        if b[0] == 0 {
                            break;
                        }
                        out.push(b[0]);
                    }
                    out
                }
            };
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        };
        match &t.kind {
            TypeKind::Pointer { target: Some(c) } if crate::symbols::types::is_c_char(&self.info.ty(*c)) => {
                let a = le_u64(&v.bytes);
                if a == 0 {
                    return err(pos, "comparing a null string pointer");
                }
                read(a, None)
            }
            TypeKind::Array { element, .. } if crate::symbols::types::is_c_char(&self.info.ty(*element)) => {
                let end = v.bytes.iter().position(|b| *b == 0).unwrap_or(v.bytes.len());
                Ok(String::from_utf8_lossy(&v.bytes[..end]).into_owned())
            }
            TypeKind::RustStr { ptr, len } | TypeKind::RustVec { ptr, len, utf8: true, .. } => {
                read(le_u64(&v.bytes[*ptr as usize..]), Some(le_u64(&v.bytes[*len as usize..])))
            }
            TypeKind::Struct { members, .. } => match (find_member(self.info, members, "_M_p", 0), find_member(self.info, members, "_M_string_length", 0)) {
                (Some((po, pm)), Some((lo, lm))) => {
                    let p = self.field_value(v, po, &pm, pos)?;
                    let l = self.field_value(v, lo, &lm, pos)?;
                    read(le_u64(&p.bytes), Some(le_u64(&l.bytes)))
                }
                _ => err(pos, format!("a '{}' is not a string", display_type(&t))),
            },
            _ => err(pos, format!("a '{}' is not a string; compare strings with char*, char[], std::string or String", display_type(&t))),
        }
    }

    fn common_unsigned(&self, l: &TypedValue, r: &TypedValue) -> bool {
        let info = |v: &TypedValue| {
            let t = self.info.ty(v.ty);
            let unsigned = matches!(t.kind, TypeKind::Int { signed: false } | TypeKind::Pointer { .. });
            (t.size.max(4), unsigned)
        };
        let (ls, lu) = info(l);
        let (rs, ru) = info(r);
        if ls == rs {
            lu || ru
        } else if ls > rs {
            lu
        } else {
            ru
        }
    }

    /// An integer result with C's usual arithmetic conversions over the operands' types.
    fn int_result(&self, l: &TypedValue, r: &TypedValue, v: i128) -> TypedValue {
        let size = self.info.ty(l.ty).size.max(self.info.ty(r.ty).size).max(4);
        let unsigned = self.common_unsigned(l, r);
        let name = match (size, unsigned) {
            (4, false) => "int",
            (4, true) => "unsigned int",
            (_, false) => "long",
            (_, true) => "unsigned long",
        };
        self.int_value(name, v)
    }

    fn pointer_type(&self, v: &TypedValue) -> TypeId {
        match self.info.ty(v.ty).kind {
            TypeKind::Array { element, .. } => types::pointer_to(self.info, element),
            _ => v.ty,
        }
    }

    pub fn prim(&self, name: &str) -> TypeId {
        types::primitive(self.info, name).expect("a known primitive")
    }

    fn int_value(&self, name: &str, v: i128) -> TypedValue {
        let ty = self.prim(name);
        let size = self.info.ty(ty).size as usize;
        TypedValue { ty, bytes: v.to_le_bytes()[..size].to_vec(), place: Place::None }
    }

    fn bool_value(&self, b: bool) -> TypedValue {
        TypedValue { ty: self.prim("bool"), bytes: vec![u8::from(b)], place: Place::None }
    }

    fn float_value(&self, ty: TypeId, f: f64) -> TypedValue {
        let bytes = if self.info.ty(ty).size == 4 { (f as f32).to_le_bytes().to_vec() } else { f.to_le_bytes().to_vec() };
        let ty = if bytes.len() == 4 { ty } else { self.prim("double") };
        TypedValue { ty, bytes, place: Place::None }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Scalar {
    Int(i128),
    Float(f64),
}

impl Scalar {
    fn as_f64(self) -> f64 {
        match self {
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
}

/// The type as a C programmer writes it (`struct node *`), not doubled qualifiers.
pub fn display_type(t: &Type) -> String {
    t.name.replace("const const ", "const ")
}

/// `display_type`, naming a pointer by its target when the pointer was named before its
/// target was complete (a struct that points to itself: ` *`).
pub fn type_name(info: &DebugInfo, id: TypeId) -> String {
    let t = info.ty(id);
    match t.kind {
        TypeKind::Pointer { target: Some(to) } if t.name.starts_with(' ') || t.name.is_empty() => {
            let inner = info.ty(to);
            let base = if inner.name.is_empty() { "?".to_string() } else { display_type(&inner) };
            format!("{base} *")
        }
        _ => display_type(&t),
    }
}

/// A member by name, through anonymous unions/structs and base classes; (offset, member).
pub(crate) fn find_member(info: &DebugInfo, members: &[Member], name: &str, depth: u32) -> Option<(u64, Member)> {
    if depth > 6 {
        return None;
    }
    if let Some(m) = members.iter().find(|m| m.name == name) {
        return Some((m.offset, m.clone()));
    }
    for m in members.iter().filter(|m| m.name.starts_with('<') || m.name.is_empty() || m.name.starts_with("_M_impl") || m.name == "_M_dataplus") {
        if let TypeKind::Struct { members: inner, .. } = &info.ty(m.ty).kind {
            if let Some((off, found)) = find_member(info, inner, name, depth + 1) {
                return Some((m.offset + off, found));
            }
        }
    }
    None
}

fn pointee_size(info: &DebugInfo, t: &Type) -> Option<u64> {
    match &t.kind {
        TypeKind::Pointer { target: Some(x) } => Some(info.ty(*x).size.max(1)),
        TypeKind::Pointer { target: None } => Some(1),
        _ => None,
    }
}

pub fn le_u64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    w[..n].copy_from_slice(&b[..n]);
    u64::from_le_bytes(w)
}

fn int_from(b: &[u8], signed: bool) -> i128 {
    let n = b.len().min(16);
    let mut w = [0u8; 16];
    w[..n].copy_from_slice(&b[..n]);
    let u = u128::from_le_bytes(w);
    if signed && n > 0 && n < 16 && b[n - 1] & 0x80 != 0 {
        (u | (!0u128 << (n * 8))) as i128
    } else {
        u as i128
    }
}

/// x87 80-bit extended precision → the nearest double.
fn x87_to_f64(b: &[u8]) -> f64 {
    let mant = u64::from_le_bytes(b[..8].try_into().unwrap());
    let se = u16::from_le_bytes([b[8], b[9]]);
    let sign = if se & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = (se & 0x7fff) as i32;
    if exp == 0x7fff {
        return if mant << 1 == 0 { sign * f64::INFINITY } else { f64::NAN };
    }
    if exp == 0 && mant == 0 {
        return sign * 0.0;
    }
    sign * (mant as f64) * 2f64.powi((if exp == 0 { 1 } else { exp }) - 16383 - 63)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_sign_extend_from_their_size() {
        assert_eq!(int_from(&[0xff], true), -1);
        assert_eq!(int_from(&[0xff], false), 255);
        assert_eq!(int_from(&(-5i32).to_le_bytes(), true), -5);
        assert_eq!(int_from(&u64::MAX.to_le_bytes(), false), u64::MAX as i128);
    }

    #[test]
    fn x87_values_convert() {
        // 1.0: exponent 16383, explicit integer bit.
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
        b[8..10].copy_from_slice(&16383u16.to_le_bytes());
        assert_eq!(x87_to_f64(&b), 1.0);
    }
}
