//! Hint rules (`scripts/hints/*.lua`): each file returns
//! `{ name, when = "launch" | "trace" | ..., priority?, rule = function(ctx) return text or nil end }`.
//! `strobe.hints(when, ctx)` runs the rules for a situation and returns their texts;
//! tools use them for `nextSteps` and `status`. Also `strobe.scenario_steps()`, the
//! step kinds of `scripts/scenario/*.lua` (both registries are filled by the loader).

use mlua::{Function, Lua, LuaSerdeExt, Table, Value};

/// Named registry value holding the hint definitions, in evaluation order.
pub const HINTS_KEY: &str = "strobe.hints";
/// Named registry value holding scenario step kinds by name.
pub const STEPS_KEY: &str = "strobe.scenario_steps";

/// Run every rule registered for `when`; a rule that fails (or runs past its budget)
/// is logged and skipped, so a broken hint never breaks the tool that asked.
fn run_rules(lua: &Lua, when: &str, ctx: Value) -> mlua::Result<Vec<String>> {
    let rules: Option<Table> = lua.named_registry_value(HINTS_KEY)?;
    let mut out = Vec::new();
    let Some(rules) = rules else { return Ok(out) };
    for def in rules.sequence_values::<Table>() {
        let def = def?;
        if def.get::<Option<String>>("when")?.as_deref() != Some(when) {
            continue;
        }
        let rule: Function = def.get("rule")?;
        let budget = super::watchdog::Budget::slice(super::watchdog::HINT_SLICE, "a hint rule");
        match super::watchdog::with_budget(budget, || rule.call::<Option<String>>(ctx.clone())) {
            Ok(Some(text)) if !text.is_empty() => out.push(text),
            Ok(_) => {}
            Err(e) => {
                let name: String = def.get::<Option<String>>("name")?.unwrap_or_else(|| "?".into());
                tracing::warn!("hint rule '{name}' failed: {e}");
            }
        }
    }
    Ok(out)
}

pub fn register(lua: &Lua, strobe: &Table) -> mlua::Result<()> {
    // strobe.hints(when, ctx) -> { text, ... }
    strobe.set(
        "hints",
        lua.create_function(|lua, (when, ctx): (String, Value)| {
            let texts = run_rules(lua, &when, ctx)?;
            let t = lua.create_sequence_from(texts)?;
            t.set_metatable(Some(lua.array_metatable()));
            Ok(t)
        })?,
    )?;
    // strobe.hint(when, ctx) -> the texts joined by spaces, or nil when no rule fired.
    strobe.set(
        "hint",
        lua.create_function(|lua, (when, ctx): (String, Value)| {
            let texts = run_rules(lua, &when, ctx)?;
            Ok((!texts.is_empty()).then(|| texts.join(" ")))
        })?,
    )?;
    strobe.set(
        "scenario_steps",
        lua.create_function(|lua, ()| {
            let steps: Option<Table> = lua.named_registry_value(STEPS_KEY)?;
            match steps {
                Some(t) => Ok(t),
                None => lua.create_table(),
            }
        })?,
    )?;
    Ok(())
}
