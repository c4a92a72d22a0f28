//! Turning one type DIE into a [`Type`] (see `types.rs`), recursively, memoized by DIE
//! offset. Typedefs and cv-qualifiers are looked through; Rust's std containers are
//! recognized by name and shape, their field offsets taken from DWARF.

use gimli::{AttributeValue, Reader as _, UnitOffset};

use super::types::{unknown, Discr, Member, TemplateParam, Type, TypeId, TypeKind, TypeStore, Variant};
use super::variables::{die_offset, DebugInfo, AR};

/// Deepest chain of typedef/pointer/member types followed in one resolution.
const MAX_NESTING: u32 = 64;

type Die<'u> = gimli::DebuggingInformationEntry<'u, 'u, AR>;

pub(crate) struct TypeReader<'a> {
    pub(crate) info: &'a DebugInfo,
    pub(crate) store: &'a mut TypeStore,
}

impl TypeReader<'_> {
    pub(crate) fn resolve(&mut self, die: u64) -> TypeId {
        self.resolve_at(die, 0)
    }

    fn resolve_at(&mut self, die: u64, nesting: u32) -> TypeId {
        if let Some(&id) = self.store.by_die.get(&die) {
            return id;
        }
        let id = self.store.reserve(die);
        let ty = if nesting > MAX_NESTING { unknown() } else { self.read(die, nesting).unwrap_or_else(unknown) };
        self.store.set(id, ty);
        id
    }

    fn read(&mut self, die: u64, nesting: u32) -> Option<Type> {
        let info = self.info;
        let ui = info.unit_of(die)?;
        let ud = &info.units[ui];
        let unit = &ud.unit;
        let off = gimli::DebugInfoOffset(die as usize).to_unit_offset(&unit.header)?;
        let e = unit.entry(off).ok()?;
        let name = info.attr_string(unit, &e, gimli::DW_AT_name);
        let size = udata(&e, gimli::DW_AT_byte_size);
        let target = e.attr_value(gimli::DW_AT_type).ok().flatten().and_then(|v| die_offset(unit, v));
        let sub = |me: &mut Self, t: Option<u64>| t.map(|t| me.resolve_at(t, nesting + 1));
        let ty = match e.tag() {
            gimli::DW_TAG_base_type => {
                let enc = match e.attr_value(gimli::DW_AT_encoding).ok().flatten() {
                    Some(AttributeValue::Encoding(x)) => x,
                    _ => gimli::DW_ATE_signed,
                };
                let kind = match enc {
                    gimli::DW_ATE_float => TypeKind::Float,
                    gimli::DW_ATE_boolean => TypeKind::Bool,
                    gimli::DW_ATE_signed_char => TypeKind::Char { signed: true },
                    gimli::DW_ATE_unsigned_char => TypeKind::Char { signed: false },
                    gimli::DW_ATE_UTF => TypeKind::Char { signed: false },
                    gimli::DW_ATE_unsigned => TypeKind::Int { signed: false },
                    _ => TypeKind::Int { signed: true },
                };
                // Rust's u8/i8 are numbers, not characters (C's `char` is DW_ATE_signed_char).
                Type { name: name.unwrap_or_else(|| "?".into()), size: size.unwrap_or(0), kind }
            }
            gimli::DW_TAG_pointer_type | gimli::DW_TAG_reference_type | gimli::DW_TAG_rvalue_reference_type | gimli::DW_TAG_ptr_to_member_type => {
                let to = sub(self, target);
                if matches!(e.tag(), gimli::DW_TAG_reference_type | gimli::DW_TAG_rvalue_reference_type) {
                    if let Some(&id) = self.store.by_die.get(&die) {
                        self.store.references.insert(id);
                    }
                }
                let n = name.unwrap_or_else(|| match to {
                    Some(t) => format!("{} *", self.store.get(t).name),
                    None => "void *".into(),
                });
                Type { name: n, size: size.unwrap_or(8), kind: TypeKind::Pointer { target: to } }
            }
            gimli::DW_TAG_typedef | gimli::DW_TAG_const_type | gimli::DW_TAG_volatile_type | gimli::DW_TAG_restrict_type | gimli::DW_TAG_atomic_type => {
                let Some(t) = sub(self, target) else {
                    return Some(Type { name: "void".into(), size: 0, kind: TypeKind::Void });
                };
                let mut under = (*self.store.get(t)).clone();
                self.copy_templates(t, die);
                if self.store.by_reference.contains(&t) {
                    self.note_by_reference(die);
                }
                if e.tag() == gimli::DW_TAG_typedef {
                    if let Some(n) = name {
                        // `typedef struct {...} Clock` reads better as Clock; so does `Mode`.
                        if under.name.is_empty() || under.name.starts_with("(anonymous") || !matches!(under.kind, TypeKind::Struct { .. } | TypeKind::Pointer { .. }) {
                            under.name = n;
                        }
                    }
                }
                under
            }
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type => {
                let is_union = e.tag() == gimli::DW_TAG_union_type;
                let keyword = match e.tag() {
                    gimli::DW_TAG_union_type => "union",
                    gimli::DW_TAG_class_type => "class",
                    _ => "struct",
                };
                let display = match (&name, ud.rust) {
                    (Some(n), true) => n.clone(),
                    (Some(n), false) => format!("{keyword} {n}"),
                    (None, _) => format!("(anonymous {keyword})"),
                };
                let (members, template_t, variant_part) = self.members(unit, off, nesting)?;
                self.template_params(unit, off, die, nesting);
                if !ud.rust && !is_union && self.passed_by_reference(unit, off, name.as_deref(), &members) {
                    self.note_by_reference(die);
                }
                let size = size.unwrap_or(0);
                let kind = if ud.rust {
                    self.rust_kind(name.as_deref().unwrap_or(""), &members, template_t, variant_part)
                } else {
                    None
                };
                Type { name: display, size, kind: kind.unwrap_or(TypeKind::Struct { members, is_union }) }
            }
            gimli::DW_TAG_array_type => {
                let element = sub(self, target)?;
                let mut dims = Vec::new();
                let mut tree = unit.entries_tree(Some(off)).ok()?;
                let root = tree.root().ok()?;
                let mut children = root.children();
                while let Ok(Some(c)) = children.next() {
                    let c = c.entry();
                    if c.tag() == gimli::DW_TAG_subrange_type {
                        let count = udata(c, gimli::DW_AT_count).or_else(|| udata(c, gimli::DW_AT_upper_bound).map(|u| u + 1));
                        dims.push(count);
                    }
                }
                // int a[2][3] is an array of 2 arrays of 3: build from the innermost dimension.
                let mut elem = element;
                let mut ty = None;
                for (i, count) in dims.iter().enumerate().rev() {
                    let el = self.store.get(elem);
                    let t = Type {
                        name: format!("{}[{}]", el.name, count.map_or(String::new(), |c| c.to_string())),
                        size: count.unwrap_or(0) * el.size,
                        kind: TypeKind::Array { element: elem, count: *count },
                    };
                    if i == 0 {
                        ty = Some(t);
                    } else {
                        elem = self.store.push(t);
                    }
                }
                ty.unwrap_or_else(|| {
                    let el = self.store.get(element);
                    Type { name: format!("{}[]", el.name), size: 0, kind: TypeKind::Array { element, count: None } }
                })
            }
            gimli::DW_TAG_enumeration_type => {
                let under = sub(self, target).map(|t| self.store.get(t));
                let signed = under.as_ref().is_none_or(|u| matches!(u.kind, TypeKind::Int { signed: true } | TypeKind::Char { signed: true }));
                let mut enumerators = Vec::new();
                let mut tree = unit.entries_tree(Some(off)).ok()?;
                let root = tree.root().ok()?;
                let mut children = root.children();
                while let Ok(Some(c)) = children.next() {
                    let c = c.entry();
                    if c.tag() == gimli::DW_TAG_enumerator {
                        let v = match c.attr_value(gimli::DW_AT_const_value).ok().flatten() {
                            Some(AttributeValue::Sdata(v)) => v,
                            Some(AttributeValue::Udata(v)) => v as i64,
                            // DW_FORM_data1/2/4 carry no sign: 250 in a data1 of an unsigned
                            // enum is 250, not -6 (which no enumerator name matched).
                            Some(v) if !signed => v.udata_value().map(|u| u as i64).or_else(|| v.sdata_value()).unwrap_or(0),
                            Some(v) => v.sdata_value().or_else(|| v.udata_value().map(|u| u as i64)).unwrap_or(0),
                            None => 0,
                        };
                        enumerators.push((info.attr_string(unit, c, gimli::DW_AT_name).unwrap_or_default(), v));
                    }
                }
                let display = match (name, ud.rust) {
                    (Some(n), true) => n,
                    (Some(n), false) => format!("enum {n}"),
                    (None, _) => "(anonymous enum)".into(),
                };
                Type { name: display, size: size.or(under.map(|u| u.size)).unwrap_or(4), kind: TypeKind::Enum { signed, enumerators } }
            }
            gimli::DW_TAG_subroutine_type => Type { name: name.unwrap_or_else(|| "fn".into()), size: 0, kind: TypeKind::Function },
            gimli::DW_TAG_unspecified_type => Type { name: name.unwrap_or_else(|| "void".into()), size: 0, kind: TypeKind::Void },
            _ => Type { name: name.unwrap_or_else(|| "?".into()), size: size.unwrap_or(0), kind: TypeKind::Unknown },
        };
        Some(ty)
    }

    /// Record the template parameters of the struct DIE `die` (at `off` in `unit`).
    fn template_params(&mut self, unit: &gimli::Unit<AR>, off: UnitOffset, die: u64, nesting: u32) {
        let Ok(mut tree) = unit.entries_tree(Some(off)) else { return };
        let Ok(root) = tree.root() else { return };
        let mut raw = Vec::new();
        let mut children = root.children();
        while let Ok(Some(node)) = children.next() {
            let c = node.entry();
            if c.tag() != gimli::DW_TAG_template_type_parameter && c.tag() != gimli::DW_TAG_template_value_parameter {
                continue;
            }
            let name = self.info.attr_string(unit, c, gimli::DW_AT_name).unwrap_or_default();
            let ty = c.attr_value(gimli::DW_AT_type).ok().flatten().and_then(|v| die_offset(unit, v));
            let value = c.attr_value(gimli::DW_AT_const_value).ok().flatten().and_then(|v| v.sdata_value().or_else(|| v.udata_value().map(|u| u as i64)));
            raw.push((name, ty, value));
        }
        if raw.is_empty() {
            return;
        }
        let params: Vec<TemplateParam> = raw.into_iter().map(|(name, ty, value)| TemplateParam { name, ty: ty.map(|t| self.resolve_at(t, nesting + 1)), value }).collect();
        if let Some(&id) = self.store.by_die.get(&die) {
            self.store.templates.insert(id, params.into());
        }
    }

    /// A typedef or cv-qualified type (DIE `die`) keeps the template parameters of `under`.
    fn copy_templates(&mut self, under: TypeId, die: u64) {
        if let (Some(t), Some(&id)) = (self.store.templates.get(&under).cloned(), self.store.by_die.get(&die)) {
            self.store.templates.insert(id, t);
        }
    }

    /// Members (with base classes), the `T` template parameter, and a Rust variant part.
    #[allow(clippy::type_complexity)]
    fn members(&mut self, unit: &gimli::Unit<AR>, off: UnitOffset, nesting: u32) -> Option<(Vec<Member>, Option<TypeId>, Option<(Option<Discr>, Vec<Variant>)>)> {
        let info = self.info;
        let mut raw: Vec<(String, u64, Option<u64>, Option<(u64, u64)>)> = Vec::new();
        let mut template_t = None;
        let mut variant_part = None;
        let mut tree = unit.entries_tree(Some(off)).ok()?;
        let root = tree.root().ok()?;
        let mut children = root.children();
        while let Ok(Some(node)) = children.next() {
            let c = node.entry().clone();
            match c.tag() {
                gimli::DW_TAG_member | gimli::DW_TAG_inheritance => {
                    if c.attr_value(gimli::DW_AT_external).ok().flatten().is_some() || c.attr_value(gimli::DW_AT_declaration).ok().flatten().is_some() {
                        continue; // a static member: not part of the object's bytes
                    }
                    let ty = c.attr_value(gimli::DW_AT_type).ok().flatten().and_then(|v| die_offset(unit, v));
                    let name = if c.tag() == gimli::DW_TAG_inheritance {
                        "<base>".to_string()
                    } else {
                        info.attr_string(unit, &c, gimli::DW_AT_name).unwrap_or_else(|| super::types::ANONYMOUS.into())
                    };
                    let bits = udata(&c, gimli::DW_AT_bit_size).map(|bs| (udata(&c, gimli::DW_AT_data_bit_offset).unwrap_or(0), bs));
                    let located = member_offset(&c);
                    let mut offset = located.unwrap_or(0);
                    // data_bit_offset counts from the struct start: keep it relative to `offset`;
                    // without a member location (DWARF 5), the field starts at its first byte
                    // (else the bits were read at offset 0, shifted out: every bitfield read 0).
                    let bits = bits.map(|(bo, bs)| match located {
                        None => {
                            offset = bo / 8;
                            (bo % 8, bs)
                        }
                        Some(_) if offset == 0 => (bo, bs),
                        Some(_) => (bo.saturating_sub(offset * 8), bs),
                    });
                    raw.push((name, offset, ty, bits));
                }
                gimli::DW_TAG_template_type_parameter => {
                    let is_t = info.attr_string(unit, &c, gimli::DW_AT_name).as_deref() == Some("T");
                    if is_t && template_t.is_none() {
                        let t = c.attr_value(gimli::DW_AT_type).ok().flatten().and_then(|v| die_offset(unit, v));
                        template_t = t.map(|t| self.resolve_at(t, nesting + 1));
                    }
                }
                gimli::DW_TAG_variant_part => variant_part = self.variant_part(unit, node, nesting),
                _ => {}
            }
        }
        let mut members = Vec::with_capacity(raw.len());
        for (name, offset, ty, bits) in raw {
            let ty = match ty {
                Some(t) => self.resolve_at(t, nesting + 1),
                None => continue,
            };
            let name = if name == "<base>" { format!("<base {}>", self.store.get(ty).name) } else { name };
            members.push(Member { name, offset, ty, bits });
        }
        Some((members, template_t, variant_part))
    }

    fn note_by_reference(&mut self, die: u64) {
        if let Some(&id) = self.store.by_die.get(&die) {
            self.store.by_reference.insert(id);
        }
    }

    /// Is the C++ class at `off` passed by invisible reference (Itanium C++ ABI: not trivial
    /// for the purposes of calls)? It declares a virtual function, or a destructor or a copy or
    /// move constructor of its own (not the compiler's, not `= default` in the class); or a
    /// base or member (or an array of them) is such a class. (gdb decides the same way.)
    fn passed_by_reference(&self, unit: &gimli::Unit<AR>, off: UnitOffset, name: Option<&str>, members: &[Member]) -> bool {
        let holds = |ty: TypeId| {
            let t = self.store.get(ty);
            let inner = match t.kind {
                TypeKind::Array { element, .. } => element,
                _ => ty,
            };
            self.store.by_reference.contains(&inner)
        };
        if members.iter().any(|m| m.name.starts_with("_vptr") || holds(m.ty)) {
            return true;
        }
        let bare = name.map(|n| n.split('<').next().unwrap_or(n));
        let Ok(mut tree) = unit.entries_tree(Some(off)) else { return false };
        let Ok(root) = tree.root() else { return false };
        let mut children = root.children();
        while let Ok(Some(node)) = children.next() {
            let c = node.entry().clone();
            if c.tag() != gimli::DW_TAG_subprogram {
                continue;
            }
            let f = self.info.attr_string(unit, &c, gimli::DW_AT_name);
            let is_virtual = match c.attr_value(gimli::DW_AT_virtuality).ok().flatten() {
                Some(AttributeValue::Virtuality(v)) => v != gimli::DW_VIRTUALITY_none,
                Some(v) => v.udata_value().is_some_and(|v| v != 0),
                None => false,
            };
            if is_virtual {
                return true;
            }
            // Declared by the compiler, or `= default` in the class: trivial unless a base or
            // member is not (checked above).
            let defaulted = c.attr_value(gimli::DW_AT_defaulted).ok().flatten().and_then(|v| v.udata_value()) == Some(gimli::DW_DEFAULTED_in_class.0 as u64);
            if defaulted || c.attr_value(gimli::DW_AT_artificial).ok().flatten().is_some() {
                continue;
            }
            if f.as_deref().is_some_and(|f| f.starts_with('~')) || (f.is_some() && f.as_deref() == bare && self.copies_itself(unit, node, off)) {
                return true;
            }
        }
        false
    }

    /// Is this constructor's first declared parameter a reference to the class at `class`
    /// (a copy or move constructor)?
    fn copies_itself(&self, unit: &gimli::Unit<AR>, node: gimli::EntriesTreeNode<AR>, class: UnitOffset) -> bool {
        let mut params = node.children();
        while let Ok(Some(p)) = params.next() {
            let p = p.entry();
            if p.tag() != gimli::DW_TAG_formal_parameter || p.attr_value(gimli::DW_AT_artificial).ok().flatten().is_some() {
                continue;
            }
            // The parameter's type: a reference, to the class, through const / volatile.
            let mut at = p.attr_value(gimli::DW_AT_type).ok().flatten();
            let mut through_reference = false;
            for _ in 0..4 {
                let Some(AttributeValue::UnitRef(o)) = at else { return false };
                if o == class {
                    return through_reference;
                }
                let Ok(e) = unit.entry(o) else { return false };
                match e.tag() {
                    gimli::DW_TAG_reference_type | gimli::DW_TAG_rvalue_reference_type if !through_reference => through_reference = true,
                    gimli::DW_TAG_const_type | gimli::DW_TAG_volatile_type if through_reference => {}
                    _ => return false,
                }
                at = e.attr_value(gimli::DW_AT_type).ok().flatten();
            }
            return false;
        }
        false
    }

    fn variant_part(&mut self, unit: &gimli::Unit<AR>, node: gimli::EntriesTreeNode<AR>, nesting: u32) -> Option<(Option<Discr>, Vec<Variant>)> {
        let discr_ref = match node.entry().attr_value(gimli::DW_AT_discr).ok().flatten() {
            Some(AttributeValue::UnitRef(o)) => Some(o),
            _ => None,
        };
        let mut discr = None;
        let mut variants = Vec::new();
        let mut children = node.children();
        while let Ok(Some(child)) = children.next() {
            let c = child.entry().clone();
            match c.tag() {
                gimli::DW_TAG_member if Some(c.offset()) == discr_ref => {
                    let t = c.attr_value(gimli::DW_AT_type).ok().flatten().and_then(|v| die_offset(unit, v));
                    let size = t.map(|t| self.resolve_at(t, nesting + 1)).map_or(0, |t| self.store.get(t).size);
                    discr = Some(Discr { offset: member_offset(&c).unwrap_or(0), size });
                }
                gimli::DW_TAG_variant => {
                    let value = c.attr_value(gimli::DW_AT_discr_value).ok().flatten().and_then(|v| v.udata_value().or_else(|| v.sdata_value().map(|s| s as u64)));
                    let mut vc = child.children();
                    while let Ok(Some(m)) = vc.next() {
                        let m = m.entry();
                        if m.tag() != gimli::DW_TAG_member {
                            continue;
                        }
                        let name = self.info.attr_string(unit, m, gimli::DW_AT_name).unwrap_or_default();
                        let Some(t) = m.attr_value(gimli::DW_AT_type).ok().flatten().and_then(|v| die_offset(unit, v)) else { continue };
                        let offset = member_offset(m).unwrap_or(0);
                        let ty = self.resolve_at(t, nesting + 1);
                        variants.push(Variant { value, name, ty, offset });
                        break;
                    }
                }
                _ => {}
            }
        }
        Some((discr, variants))
    }

    /// Rust std shapes: `&str`, `&[T]`, `Vec<T>`, `String`, and enums.
    fn rust_kind(&self, name: &str, members: &[Member], template_t: Option<TypeId>, variant_part: Option<(Option<Discr>, Vec<Variant>)>) -> Option<TypeKind> {
        let field = |n: &str| members.iter().find(|m| m.name == n);
        if let Some((discr, variants)) = variant_part {
            return Some(TypeKind::RustEnum { discr, variants });
        }
        if let (Some(p), Some(l)) = (field("data_ptr"), field("length")) {
            if name == "&str" || name == "&mut str" || name == "*const str" || name == "*mut str" {
                return Some(TypeKind::RustStr { ptr: p.offset, len: l.offset });
            }
            if let TypeKind::Pointer { target: Some(element) } = self.store.get(p.ty).kind {
                return Some(TypeKind::RustSlice { ptr: p.offset, len: l.offset, element });
            }
        }
        if name.starts_with("Vec<") {
            let (buf, len, element) = (field("buf")?, field("len")?, template_t?);
            let ptr = buf.offset + self.store.first_pointer(buf.ty, 0)?;
            return Some(TypeKind::RustVec { ptr, len: len.offset, element, utf8: false });
        }
        if name == "String" {
            let vec = field("vec")?;
            if let TypeKind::RustVec { ptr, len, element, .. } = self.store.get(vec.ty).kind {
                return Some(TypeKind::RustVec { ptr: vec.offset + ptr, len: vec.offset + len, element, utf8: true });
            }
        }
        None
    }
}

fn udata(e: &Die<'_>, at: gimli::DwAt) -> Option<u64> {
    e.attr_value(at).ok().flatten().and_then(|v| v.udata_value())
}

/// `DW_AT_data_member_location`: a constant, or (old DWARF) `DW_OP_plus_uconst N`.
fn member_offset(e: &Die<'_>) -> Option<u64> {
    match e.attr_value(gimli::DW_AT_data_member_location).ok().flatten()? {
        AttributeValue::Exprloc(expr) => {
            let bytes = expr.0.to_slice().ok()?;
            if bytes.first() == Some(&gimli::DW_OP_plus_uconst.0) {
                let mut r = gimli::EndianSlice::new(&bytes[1..], gimli::LittleEndian);
                gimli::Reader::read_uleb128(&mut r).ok()
            } else {
                None
            }
        }
        v => v.udata_value(),
    }
}
