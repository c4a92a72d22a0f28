//! Types the evaluator needs beyond the variables' own: named types for casts and `sizeof`
//! (`struct node`, `ns::Config`, `u32`), enumerator constants, and types the program never
//! spelled (`int` for a literal, `struct node *` for `&n`, `int[8]` for `*p@8`), added to the
//! binary's type table so the renderer treats them like any other.

use gimli::Reader as _;
use std::collections::HashMap;
use std::sync::Arc;

use gimli::AttributeValue;

use crate::symbols::{DebugInfo, Type, TypeId, TypeKind};

/// Named types and enumerators of one binary.
#[derive(Default)]
pub struct NameIndex {
    /// `struct node`, `node`, `ns::node`, `int`, `size_t` → type DIE offset.
    types: HashMap<String, u64>,
    /// Enumerator name (plain and qualified) → (enum type DIE, value).
    enumerators: HashMap<String, (u64, i64)>,
}

pub fn names(info: &DebugInfo) -> Arc<NameIndex> {
    info.eval_names.get_or_init(|| Arc::new(build(info))).clone()
}

fn build(info: &DebugInfo) -> NameIndex {
    let mut idx = NameIndex::default();
    for u in &info.units {
        let Ok(mut tree) = u.unit.entries_tree(None) else { continue };
        let Ok(root) = tree.root() else { continue };
        let _ = walk(info, &u.unit, root, "", &mut idx);
    }
    idx
}

fn walk(
    info: &DebugInfo,
    unit: &gimli::Unit<gimli::EndianArcSlice<gimli::RunTimeEndian>>,
    node: gimli::EntriesTreeNode<'_, '_, '_, gimli::EndianArcSlice<gimli::RunTimeEndian>>,
    prefix: &str,
    idx: &mut NameIndex,
) -> gimli::Result<()> {
    let mut children = node.children();
    while let Some(child) = children.next()? {
        let e = child.entry();
        let name = e.attr_value(gimli::DW_AT_name)?.and_then(|v| info.dwarf.attr_string(unit, v).ok()).map(|s| s.to_string_lossy().map(|c| c.into_owned()));
        let name = match name {
            Some(Ok(n)) => Some(n),
            _ => None,
        };
        let declaration = matches!(e.attr_value(gimli::DW_AT_declaration)?, Some(AttributeValue::Flag(true)));
        let offset = e.offset().to_debug_info_offset(&unit.header).map(|o| o.0 as u64);
        let qualified = name.as_ref().map(|n| if prefix.is_empty() { n.clone() } else { format!("{prefix}::{n}") });
        match e.tag() {
            gimli::DW_TAG_namespace | gimli::DW_TAG_module => {
                let p = qualified.unwrap_or_else(|| prefix.to_string());
                walk(info, unit, child, &p, idx)?;
            }
            tag @ (gimli::DW_TAG_structure_type
            | gimli::DW_TAG_class_type
            | gimli::DW_TAG_union_type
            | gimli::DW_TAG_enumeration_type
            | gimli::DW_TAG_typedef
            | gimli::DW_TAG_base_type) => {
                if let (Some(n), Some(q), Some(off), false) = (&name, &qualified, offset, declaration) {
                    let tagword = match tag {
                        gimli::DW_TAG_structure_type => Some("struct"),
                        gimli::DW_TAG_class_type => Some("class"),
                        gimli::DW_TAG_union_type => Some("union"),
                        gimli::DW_TAG_enumeration_type => Some("enum"),
                        _ => None,
                    };
                    for k in [Some(q.clone()), Some(n.clone()), tagword.map(|t| format!("{t} {n}")), tagword.map(|t| format!("{t} {q}"))].into_iter().flatten() {
                        idx.types.entry(k).or_insert(off);
                    }
                }
                if tag == gimli::DW_TAG_enumeration_type {
                    if let Some(off) = offset {
                        enumerators(info, unit, child, prefix, qualified.as_deref(), off, idx)?;
                    }
                } else if matches!(tag, gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type) {
                    // Nested types: `Outer::Inner`.
                    if let Some(q) = &qualified {
                        walk(info, unit, child, q, idx)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn enumerators(
    info: &DebugInfo,
    unit: &gimli::Unit<gimli::EndianArcSlice<gimli::RunTimeEndian>>,
    node: gimli::EntriesTreeNode<'_, '_, '_, gimli::EndianArcSlice<gimli::RunTimeEndian>>,
    prefix: &str,
    enum_name: Option<&str>,
    enum_die: u64,
    idx: &mut NameIndex,
) -> gimli::Result<()> {
    let mut children = node.children();
    while let Some(child) = children.next()? {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_enumerator {
            continue;
        }
        let Some(name) = e.attr_value(gimli::DW_AT_name)?.and_then(|v| info.dwarf.attr_string(unit, v).ok()) else { continue };
        let name = name.to_string_lossy()?.into_owned();
        let Some(v) = e.attr_value(gimli::DW_AT_const_value)? else { continue };
        let value = v.sdata_value().or_else(|| v.udata_value().map(|u| u as i64)).unwrap_or(0);
        let mut keys = vec![name.clone()];
        if !prefix.is_empty() {
            keys.push(format!("{prefix}::{name}"));
        }
        if let Some(en) = enum_name {
            keys.push(format!("{en}::{name}")); // C++ `enum class Color { Red }` → `Color::Red`
        }
        for k in keys {
            idx.enumerators.entry(k).or_insert((enum_die, value));
        }
    }
    Ok(())
}

/// The named type `name` (`struct node`, `unsigned int`, `u32`), if the program has it
/// or it is a C/Rust primitive.
pub fn lookup(info: &DebugInfo, name: &str) -> Option<TypeId> {
    if let Some(&off) = names(info).types.get(name) {
        if let Some(t) = info.type_at(off) {
            return Some(t);
        }
    }
    primitive(info, name)
}

pub fn is_type_name(info: &DebugInfo, name: &str) -> bool {
    names(info).types.contains_key(name) || primitive_shape(name).is_some()
}

/// An enumerator constant: (its enum type, value).
pub fn enumerator(info: &DebugInfo, name: &str) -> Option<(TypeId, i64)> {
    let &(die, value) = names(info).enumerators.get(name)?;
    Some((info.type_at(die)?, value))
}

/// A type added to the binary's table (deduplicated by its shape).
pub fn synthetic(info: &DebugInfo, ty: Type) -> TypeId {
    let k = format!("{:?}", ty);
    let mut known = info.eval_synthetic.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&id) = known.get(&k) {
        return id;
    }
    let id = info.store.lock().unwrap_or_else(|e| e.into_inner()).push(ty);
    known.insert(k, id);
    id
}

pub fn pointer_to(info: &DebugInfo, target: TypeId) -> TypeId {
    let name = format!("{} *", info.ty(target).name);
    synthetic(info, Type { name, size: 8, kind: TypeKind::Pointer { target: Some(target) } })
}

pub fn array_of(info: &DebugInfo, element: TypeId, count: u64) -> TypeId {
    let el = info.ty(element);
    synthetic(info, Type { name: format!("{}[{count}]", el.name), size: el.size * count, kind: TypeKind::Array { element, count: Some(count) } })
}

/// `(size, kind)` of a primitive spelled the C or Rust way.
fn primitive_shape(name: &str) -> Option<(u64, TypeKind)> {
    let int = |size, signed| Some((size, TypeKind::Int { signed }));
    match name {
        "char" | "signed char" | "i8" => Some((1, TypeKind::Char { signed: true })).filter(|_| name != "i8").or_else(|| int(1, true)),
        "unsigned char" | "u8" => int(1, false),
        "short int" | "short" | "i16" => int(2, true),
        "short unsigned int" | "unsigned short" | "u16" => int(2, false),
        "int" | "signed int" | "i32" => int(4, true),
        "unsigned int" | "unsigned" | "u32" => int(4, false),
        "long int" | "long" | "long long int" | "long long" | "i64" | "isize" | "ssize_t" | "ptrdiff_t" | "int64_t" => int(8, true),
        "long unsigned int" | "unsigned long" | "long long unsigned int" | "unsigned long long" | "u64" | "usize" | "size_t"
        | "uint64_t" | "uintptr_t" => int(8, false),
        "int8_t" => int(1, true),
        "uint8_t" => int(1, false),
        "int16_t" => int(2, true),
        "uint16_t" => int(2, false),
        "int32_t" => int(4, true),
        "uint32_t" => int(4, false),
        "float" | "f32" => Some((4, TypeKind::Float)),
        "double" | "f64" => Some((8, TypeKind::Float)),
        "bool" | "_Bool" => Some((1, TypeKind::Bool)),
        "void" => Some((0, TypeKind::Void)),
        _ => None,
    }
}

/// A primitive by name, as a synthetic type when the binary's DWARF has no such base type.
pub fn primitive(info: &DebugInfo, name: &str) -> Option<TypeId> {
    let (size, kind) = primitive_shape(name)?;
    Some(synthetic(info, Type { name: name.to_string(), size, kind }))
}

