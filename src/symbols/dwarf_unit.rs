//! Reading one DWARF compile unit: a single pass over its DIEs with gimli's raw
//! entry reader, collecting `DW_TAG_subprogram`s and the names of enclosing scopes,
//! then resolving each subprogram with code into a [`FunctionInfo`].

use std::collections::HashMap;
use std::path::PathBuf;

use gimli::{AttributeValue, UnitOffset};

use super::demangle::{demangle, Lang};
use super::dwarf::{CodeRanges, R};
use super::pattern::normalize_path;
use super::FunctionInfo;

enum HighPc<'a> {
    Addr(AttributeValue<R<'a>>),
    Offset(u64),
}

/// The attributes of one `DW_TAG_subprogram` that matter here.
struct Sub<'a> {
    offset: UnitOffset,
    scope: Option<usize>,
    name: Option<AttributeValue<R<'a>>>,
    linkage: Option<AttributeValue<R<'a>>>,
    decl_file: Option<u64>,
    decl_line: Option<u64>,
    low_pc: Option<AttributeValue<R<'a>>>,
    high_pc: Option<HighPc<'a>>,
    ranges: Option<AttributeValue<R<'a>>>,
    origin: Option<UnitOffset>,
}

pub(super) struct UnitReader<'d, 'a> {
    dwarf: &'d gimli::Dwarf<R<'a>>,
    unit: &'d gimli::Unit<R<'a>>,
    code: &'d CodeRanges,
    lang: Lang,
    /// Qualified names of enclosing namespaces / types (`geometry::Circle`).
    scopes: Vec<String>,
    subs: Vec<Sub<'a>>,
    files: HashMap<u64, Option<String>>,
}

impl<'d, 'a> UnitReader<'d, 'a> {
    pub(super) fn new(
        dwarf: &'d gimli::Dwarf<R<'a>>,
        unit: &'d gimli::Unit<R<'a>>,
        code: &'d CodeRanges,
    ) -> Self {
        UnitReader {
            dwarf,
            unit,
            code,
            lang: Lang::Other,
            scopes: Vec::new(),
            subs: Vec::new(),
            files: HashMap::new(),
        }
    }

    pub(super) fn run(mut self, out: &mut Vec<FunctionInfo>) -> gimli::Result<()> {
        self.collect()?;
        for i in 0..self.subs.len() {
            if let Some(f) = self.function(i)? {
                out.push(f);
            }
        }
        Ok(())
    }

    /// Single pass over the unit's DIEs, recording subprograms and scope names.
    fn collect(&mut self) -> gimli::Result<()> {
        let mut entries = self.unit.entries_raw(None)?;
        let mut stack: Vec<(isize, usize)> = Vec::new(); // (depth, index into scopes)
        while !entries.is_empty() {
            let depth = entries.next_depth();
            let offset = entries.next_offset();
            let Some(abbrev) = entries.read_abbreviation()? else {
                continue;
            };
            while stack.last().is_some_and(|&(d, _)| d >= depth) {
                stack.pop();
            }
            let scope = stack.last().map(|&(_, i)| i);
            match abbrev.tag() {
                gimli::DW_TAG_subprogram => {
                    let mut sub = Sub {
                        offset,
                        scope,
                        name: None,
                        linkage: None,
                        decl_file: None,
                        decl_line: None,
                        low_pc: None,
                        high_pc: None,
                        ranges: None,
                        origin: None,
                    };
                    for spec in abbrev.attributes() {
                        let attr = entries.read_attribute(*spec)?;
                        match attr.name() {
                            gimli::DW_AT_name => sub.name = Some(attr.value()),
                            gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name => {
                                sub.linkage = Some(attr.value())
                            }
                            gimli::DW_AT_decl_file => {
                                sub.decl_file = match attr.value() {
                                    AttributeValue::FileIndex(i) => Some(i),
                                    v => v.udata_value(),
                                }
                            }
                            gimli::DW_AT_decl_line => sub.decl_line = attr.udata_value(),
                            gimli::DW_AT_low_pc => sub.low_pc = Some(attr.value()),
                            gimli::DW_AT_high_pc => {
                                sub.high_pc = match attr.value() {
                                    v @ (AttributeValue::Addr(_)
                                    | AttributeValue::DebugAddrIndex(_)) => Some(HighPc::Addr(v)),
                                    _ => attr.udata_value().map(HighPc::Offset),
                                }
                            }
                            gimli::DW_AT_ranges => sub.ranges = Some(attr.value()),
                            gimli::DW_AT_abstract_origin | gimli::DW_AT_specification => {
                                sub.origin = self.local_ref(attr.value()).or(sub.origin)
                            }
                            _ => {}
                        }
                    }
                    self.subs.push(sub);
                }
                gimli::DW_TAG_namespace
                | gimli::DW_TAG_structure_type
                | gimli::DW_TAG_class_type
                | gimli::DW_TAG_union_type
                | gimli::DW_TAG_enumeration_type
                | gimli::DW_TAG_interface_type => {
                    let mut name = None;
                    for spec in abbrev.attributes() {
                        let attr = entries.read_attribute(*spec)?;
                        if attr.name() == gimli::DW_AT_name {
                            name = Some(attr.value());
                        }
                    }
                    if abbrev.has_children() {
                        let component = match name.and_then(|v| self.string(v)) {
                            Some(n) => n,
                            None if abbrev.tag() == gimli::DW_TAG_namespace => {
                                "(anonymous namespace)".into()
                            }
                            None => "(anonymous)".into(),
                        };
                        let qualified = match scope {
                            Some(s) => format!("{}::{component}", self.scopes[s]),
                            None => component,
                        };
                        self.scopes.push(qualified);
                        stack.push((depth, self.scopes.len() - 1));
                    }
                }
                gimli::DW_TAG_compile_unit | gimli::DW_TAG_partial_unit => {
                    for spec in abbrev.attributes() {
                        let attr = entries.read_attribute(*spec)?;
                        if let AttributeValue::Language(lang) = attr.value() {
                            self.lang = Lang::from_dw(lang);
                        }
                    }
                }
                _ => entries.skip_attributes(abbrev.attributes())?,
            }
        }
        Ok(())
    }

    fn local_ref(&self, value: AttributeValue<R<'a>>) -> Option<UnitOffset> {
        match value {
            AttributeValue::UnitRef(off) => Some(off),
            // Cross-unit references (LTO) are not followed; same-unit ones are.
            AttributeValue::DebugInfoRef(off) => off.to_unit_offset(&self.unit.header),
            _ => None,
        }
    }

    fn find(&self, offset: UnitOffset) -> Option<&Sub<'a>> {
        self.subs
            .binary_search_by_key(&offset.0, |s| s.offset.0)
            .ok()
            .map(|i| &self.subs[i])
    }

    fn string(&self, value: AttributeValue<R<'a>>) -> Option<String> {
        let s = self.dwarf.attr_string(self.unit, value).ok()?;
        Some(s.to_string_lossy().into_owned())
    }

    /// Entry address and size, if the subprogram has code that was kept by the linker.
    fn code_range(&self, sub: &Sub<'a>) -> gimli::Result<Option<(u64, u64)>> {
        if let Some(low) = sub.low_pc {
            let Some(low) = self.dwarf.attr_address(self.unit, low)? else {
                return Ok(None);
            };
            let size = match sub.high_pc {
                Some(HighPc::Offset(n)) => n,
                Some(HighPc::Addr(v)) => self
                    .dwarf
                    .attr_address(self.unit, v)?
                    .map_or(0, |h| h.saturating_sub(low)),
                None => 0,
            };
            return Ok(self.code.contains(low).then_some((low, size)));
        }
        if let Some(v) = sub.ranges {
            if let Some(off) = self.dwarf.attr_ranges_offset(self.unit, v)? {
                // The first range holds the entry (hot part before any `.cold` part).
                let mut ranges = self.dwarf.ranges(self.unit, off)?;
                while let Some(r) = ranges.next()? {
                    if r.end > r.begin && self.code.contains(r.begin) {
                        return Ok(Some((r.begin, r.end - r.begin)));
                    }
                }
            }
        }
        Ok(None)
    }

    fn function(&mut self, i: usize) -> gimli::Result<Option<FunctionInfo>> {
        let Some((address, size)) = self.code_range(&self.subs[i])? else {
            return Ok(None);
        };
        // Follow concrete -> abstract origin -> specification, nearest value wins.
        let (mut name, mut linkage, mut decl) = (None, None, None);
        let mut cur = &self.subs[i];
        for _ in 0..8 {
            if name.is_none() {
                name = cur.name.map(|n| (n, cur.scope));
            }
            linkage = linkage.or(cur.linkage);
            if decl.is_none() && cur.decl_file.is_some() {
                decl = Some((cur.decl_file, cur.decl_line));
            }
            match cur.origin.and_then(|o| self.find(o)) {
                Some(next) if next.offset != cur.offset => cur = next,
                _ => break,
            }
        }
        let name = name.and_then(|(n, scope)| Some((self.string(n)?, scope)));
        let linkage = linkage.and_then(|l| self.string(l));
        let qualified = |(n, scope): &(String, Option<usize>)| match scope {
            Some(s) => format!("{}::{n}", self.scopes[*s]),
            None => n.clone(),
        };
        let (display, raw_name) = match (&linkage, &name) {
            (Some(l), n) => {
                let display = demangle(l, self.lang)
                    .or_else(|| n.as_ref().map(qualified))
                    .unwrap_or_else(|| l.clone());
                (display, l.clone())
            }
            (None, Some(n)) => (qualified(n), n.0.clone()),
            (None, None) => return Ok(None),
        };
        let (file, line) = match decl {
            Some((f, l)) => (
                f.and_then(|f| self.file(f)),
                l.and_then(|l| u32::try_from(l).ok()),
            ),
            None => (None, None),
        };
        Ok(Some(FunctionInfo {
            name: display,
            raw_name,
            address,
            size,
            file,
            line,
        }))
    }

    /// Absolute, normalized path of file `index` of the unit's line program.
    fn file(&mut self, index: u64) -> Option<String> {
        if let Some(cached) = self.files.get(&index) {
            return cached.clone();
        }
        let resolved = self.resolve_file(index);
        self.files.insert(index, resolved.clone());
        resolved
    }

    fn resolve_file(&self, index: u64) -> Option<String> {
        let program = self.unit.line_program.as_ref()?;
        let header = program.header();
        let entry = header.file(index)?;
        let mut path = PathBuf::new();
        if let Some(comp_dir) = &self.unit.comp_dir {
            path.push(&*comp_dir.to_string_lossy());
        }
        if let Some(dir) = entry.directory(header).and_then(|d| self.string(d)) {
            path.push(dir); // an absolute directory replaces comp_dir
        }
        path.push(self.string(entry.path_name())?);
        Some(normalize_path(&path).to_string_lossy().into_owned())
    }
}
