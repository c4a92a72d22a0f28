//! `strobe.xml.decode(text)` → the document's root element as
//! `{tag = "testsuites", attrs = {...}, children = {...}, text = "..."}` (text: the
//! element's own text, trimmed). Test adapters read JUnit / Catch2 / gtest XML with it.

use mlua::{Lua, Table};

use super::lua_err;
use crate::error::StrobeError;

fn element(lua: &Lua, node: roxmltree::Node) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("tag", node.tag_name().name())?;
    let attrs = lua.create_table()?;
    for a in node.attributes() {
        attrs.set(a.name(), a.value())?;
    }
    t.set("attrs", attrs)?;
    let children = lua.create_table()?;
    let mut text = String::new();
    for c in node.children() {
        if c.is_element() {
            children.push(element(lua, c)?)?;
        } else if c.is_text() {
            text.push_str(c.text().unwrap_or(""));
        }
    }
    t.set("children", children)?;
    t.set("text", text.trim())?;
    Ok(t)
}

pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    let xml = lua.create_table()?;
    xml.set(
        "decode",
        lua.create_function(|lua, text: mlua::String| {
            let text = text.to_str()?.to_string();
            let opts = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
            let doc = roxmltree::Document::parse_with_options(&text, opts)
                .map_err(|e| lua_err(StrobeError::validation(format!("strobe.xml.decode: not well-formed XML: {e}"))))?;
            element(lua, doc.root_element())
        })?,
    )?;
    strobe.set("xml", xml)
}
