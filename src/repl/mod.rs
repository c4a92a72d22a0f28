//! `strobe repl`: an interactive Lua prompt with the `strobe` module. In-process by
//! default; `--connect` evaluates in the running daemon, so a person sees the sessions
//! an LLM created. Multi-line input continues while the chunk is incomplete; Tab
//! completes `strobe.*` names and session ids; errors never end the REPL.

mod backend;

use std::path::Path;
use std::sync::{Arc, Mutex};

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};

pub use backend::{Backend, LocalBackend, RemoteBackend};

type Shared = Arc<Mutex<Box<dyn Backend>>>;

struct ReplHelper {
    backend: Shared,
}

impl Completer for ReplHelper {
    type Candidate = Pair;
    fn complete(&self, line: &str, pos: usize, _: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, found) = self.backend.lock().unwrap().complete(&line[..pos]);
        Ok((start, found.into_iter().map(|c| Pair { display: c.clone(), replacement: c }).collect()))
    }
}
impl Hinter for ReplHelper {
    type Hint = String;
}
impl Highlighter for ReplHelper {}
impl Validator for ReplHelper {}
impl Helper for ReplHelper {}

/// Whether `code` is a chunk the parser wants more lines for (an open `function`, `{`, string...).
pub fn is_incomplete(code: &str) -> bool {
    let lua = mlua::Lua::new();
    if lua.load(format!("return {code}")).into_function().is_ok() {
        return false;
    }
    matches!(lua.load(code).into_function(), Err(mlua::Error::SyntaxError { incomplete_input: true, .. }))
}

/// Run the prompt until Ctrl-D.
pub fn run(home: &Path, backend: Box<dyn Backend>, banner: &str) -> anyhow::Result<()> {
    let backend: Shared = Arc::new(Mutex::new(backend));
    let mut editor: Editor<ReplHelper, rustyline::history::DefaultHistory> = Editor::new()?;
    editor.set_helper(Some(ReplHelper { backend: backend.clone() }));
    let history = home.join("repl_history");
    let _ = std::fs::create_dir_all(home);
    let _ = editor.load_history(&history);
    println!("{banner}");
    println!("Lua 5.4 with the `strobe` module. Tab completes names and session ids; Ctrl-D exits.");
    let mut chunk = String::new();
    loop {
        let prompt = if chunk.is_empty() { "strobe> " } else { "   ..> " };
        match editor.readline(prompt) {
            Ok(line) => {
                if !chunk.is_empty() {
                    chunk.push('\n');
                }
                chunk.push_str(&line);
                if chunk.trim().is_empty() {
                    chunk.clear();
                    continue;
                }
                if is_incomplete(&chunk) {
                    continue;
                }
                let _ = editor.add_history_entry(chunk.as_str());
                let code = std::mem::take(&mut chunk);
                let out = backend.lock().unwrap().eval(&code);
                match out {
                    Ok(out) => {
                        print!("{}", out.output);
                        for v in &out.values {
                            println!("{v}");
                        }
                        if let Some(e) = out.error {
                            println!("error: {e}");
                        }
                    }
                    Err(e) => println!("error: {e}"),
                }
            }
            Err(ReadlineError::Interrupted) => {
                // Ctrl-C drops a half-typed chunk and keeps the REPL.
                chunk.clear();
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        }
    }
    let _ = editor.save_history(&history);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_incomplete;

    #[test]
    fn incomplete_chunks_are_recognised() {
        assert!(is_incomplete("function f()"));
        assert!(is_incomplete("local t = {"));
        assert!(!is_incomplete("1 + 1"));
        assert!(!is_incomplete("x = = 2")); // a real error: evaluate it and show the error
    }
}
