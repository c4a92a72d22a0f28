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
    Ok(run_rules_values(lua, when, ctx)?
        .into_iter()
        .filter_map(|v| v.as_string().and_then(|s| s.to_str().ok().map(|s| s.to_string())))
        .filter(|s| !s.is_empty())
        .collect())
}

/// Every rule's answer for `when`, whatever its type (test rules return pattern lists).
fn run_rules_values(lua: &Lua, when: &str, ctx: Value) -> mlua::Result<Vec<Value>> {
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
        match super::watchdog::with_budget(budget, || rule.call::<Value>(ctx.clone())) {
            Ok(Value::Nil) => {}
            Ok(v) => out.push(v),
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
    // strobe.hint_values(when, ctx) -> every non-nil answer (a rule may return a table).
    strobe.set(
        "hint_values",
        lua.create_function(|lua, (when, ctx): (String, Value)| {
            let t = lua.create_sequence_from(run_rules_values(lua, &when, ctx)?)?;
            t.set_metatable(Some(lua.array_metatable()));
            Ok(t)
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
