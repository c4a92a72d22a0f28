//! `debug_trace({argumentsAtExit: true})`: exit events also carry the pointer parameters,
//! read again when the function returns (`{"r": 101}` for `void bump(int *r, int by)`
//! after `*r += by`), so a callee's effect through a pointer is visible. Functions with a
//! pointer parameter move to the JS hook path (the agent reads the pointees); the others
//! keep theirs. The change applies to hooks of the root process, now and later.

use std::collections::BTreeSet;

use super::Engine;
use crate::error::Result;
use crate::symbols::{DebugInfo, Signature, TypeKind};

/// Whether `sig` has a parameter worth reading again at exit: a pointer.
pub(crate) fn has_pointer_param(info: &DebugInfo, sig: &Signature) -> bool {
    sig.params.iter().any(|p| p.ty.is_some_and(|t| matches!(info.ty(t).kind, TypeKind::Pointer { .. })))
}

impl Engine {
    /// Switch `argumentsAtExit` for session `id`; hooked functions with pointer parameters
    /// are hooked again with the new recipe.
    pub async fn set_arguments_at_exit(&self, id: &str, on: bool) -> Result<()> {
        let session = self.session(id)?;
        session.ensure_running()?;
        let hooked = {
            let mut st = session.state.lock().unwrap();
            if st.tracing.args_at_exit == on {
                return Ok(());
            }
            st.tracing.args_at_exit = on;
            st.hooked.clone()
        };
        if hooked.is_empty() {
            return Ok(());
        }
        let symbols = self.session_symbols(&session)?;
        let info = DebugInfo::of(&symbols)?;
        let redo: BTreeSet<u32> = hooked
            .into_iter()
            .filter(|i| {
                // The DWARF of the module that has the function (the program or a library).
                let (own, address) = self.function_dwarf(&session, &symbols, *i).unwrap_or_else(|| (info.clone(), symbols.functions[*i as usize].address));
                own.signature(address).is_some_and(|s| has_pointer_param(&own, &s))
            })
            .collect();
        if redo.is_empty() {
            return Ok(());
        }
        let frida = self.frida_running()?;
        super::children::remove_hooks(&frida, &session, session.pid, &symbols, &redo).await?;
        super::children::add_hooks(self, &frida, &session, session.pid, &symbols, &redo).await?;
        Ok(())
    }
}
