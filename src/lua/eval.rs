//! `session:eval{expressions=..., threadId=, frame=, depth=, format=}`: expressions in a paused
//! thread's frame, like gdb's `print` (the engine's `eval`, src/engine/eval.rs). Also accepts a
//! single string: `session:eval("q->len")` returns that one result.

use mlua::{UserDataMethods, UserDataRef, Value};

use super::convert::to_lua_keep_null as to_lua;
use super::lua_err;
use super::session::{args, LuaSession};
use crate::engine::EvalRequest;

pub fn add_methods<M: UserDataMethods<LuaSession>>(methods: &mut M) {
    methods.add_async_method("eval", |lua, this: UserDataRef<LuaSession>, v: Value| {
        let engine = this.engine.clone();
        let id = this.id.clone();
        async move {
            // One expression as a plain string: answer its result alone.
            if let Value::String(s) = &v {
                let req = EvalRequest { expressions: vec![s.to_str()?.to_string()], ..Default::default() };
                let r = engine.eval(&id, req).await.map_err(lua_err)?;
                let one = r["results"][0].clone();
                return to_lua(&lua, &one);
            }
            let req: EvalRequest = args(&lua, v, "session:eval")?;
            let r = engine.eval(&id, req).await.map_err(lua_err)?;
            to_lua(&lua, &r)
        }
    });
}
