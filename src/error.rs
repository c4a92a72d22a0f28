//! The error type every tool returns: a code from the spec's table plus a message
//! that tells the caller (often an LLM) what to do next.

use std::fmt;

/// Error codes of `spec-current.md` ("Errors"), plus the few later phases add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    NoDebugSymbols,
    SipBlocked,
    SessionExists,
    SessionNotFound,
    ProcessExited,
    FridaAttachFailed,
    InvalidPattern,
    WatchFailed,
    TestRunNotFound,
    ValidationError,
    UiNotAvailable,
    UiQueryFailed,
    SessionLimit,
    NoCodeAtLine,
    OptimizedOut,
    /// An expression (debug_eval, a condition, a logpoint template) cannot be evaluated; the
    /// message names the offending token and its position.
    EvalError,
    /// The call needs a paused thread and none is (or not the one named).
    NotPaused,
    /// A Lua chunk ran past its budget (the daemon's watchdog interrupted it).
    ScriptTimeout,
    /// The client cancelled the request (`notifications/cancelled`) or went away; the
    /// client never sees it (no response is sent), but a script's cleanup may.
    Cancelled,
    /// Something inside Strobe failed; the message says what.
    InternalError,
}

impl ErrorCode {
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::NoDebugSymbols,
        ErrorCode::SipBlocked,
        ErrorCode::SessionExists,
        ErrorCode::SessionNotFound,
        ErrorCode::ProcessExited,
        ErrorCode::FridaAttachFailed,
        ErrorCode::InvalidPattern,
        ErrorCode::WatchFailed,
        ErrorCode::TestRunNotFound,
        ErrorCode::ValidationError,
        ErrorCode::UiNotAvailable,
        ErrorCode::UiQueryFailed,
        ErrorCode::SessionLimit,
        ErrorCode::NoCodeAtLine,
        ErrorCode::OptimizedOut,
        ErrorCode::EvalError,
        ErrorCode::NotPaused,
        ErrorCode::ScriptTimeout,
        ErrorCode::Cancelled,
        ErrorCode::InternalError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NoDebugSymbols => "NO_DEBUG_SYMBOLS",
            ErrorCode::SipBlocked => "SIP_BLOCKED",
            ErrorCode::SessionExists => "SESSION_EXISTS",
            ErrorCode::SessionNotFound => "SESSION_NOT_FOUND",
            ErrorCode::ProcessExited => "PROCESS_EXITED",
            ErrorCode::FridaAttachFailed => "FRIDA_ATTACH_FAILED",
            ErrorCode::InvalidPattern => "INVALID_PATTERN",
            ErrorCode::WatchFailed => "WATCH_FAILED",
            ErrorCode::TestRunNotFound => "TEST_RUN_NOT_FOUND",
            ErrorCode::ValidationError => "VALIDATION_ERROR",
            ErrorCode::UiNotAvailable => "UI_NOT_AVAILABLE",
            ErrorCode::UiQueryFailed => "UI_QUERY_FAILED",
            ErrorCode::SessionLimit => "SESSION_LIMIT",
            ErrorCode::NoCodeAtLine => "NO_CODE_AT_LINE",
            ErrorCode::OptimizedOut => "OPTIMIZED_OUT",
            ErrorCode::EvalError => "EVAL_ERROR",
            ErrorCode::NotPaused => "NOT_PAUSED",
            ErrorCode::ScriptTimeout => "SCRIPT_TIMEOUT",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::InternalError => "INTERNAL_ERROR",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A coded error. `Display` renders `CODE: message`, which is also how it crosses
/// into Lua and back (see `StrobeError::from_lua_message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrobeError {
    pub code: ErrorCode,
    pub message: String,
}

impl StrobeError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        StrobeError { code, message: message.into() }
    }
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ValidationError, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InternalError, message)
    }
    pub fn session_not_found(id: &str) -> Self {
        Self::new(
            ErrorCode::SessionNotFound,
            format!(
                "No session found with ID '{id}'. Check sessionId spelling, or call debug_session with action 'list' to see known sessions."
            ),
        )
    }

    /// Recover a coded error from a string such as `"INVALID_PATTERN: bad"`, possibly
    /// wrapped in a Lua traceback. Anything without a known code is an internal error.
    pub fn from_lua_message(text: &str) -> Self {
        for code in ErrorCode::ALL {
            let tag = format!("{}: ", code.as_str());
            if let Some(pos) = text.find(&tag) {
                let rest = &text[pos + tag.len()..];
                let message = rest.split("\nstack traceback:").next().unwrap_or(rest).trim_end();
                return StrobeError::new(*code, message);
            }
        }
        StrobeError::internal(text.trim_end())
    }
}

impl fmt::Display for StrobeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for StrobeError {}

pub type Result<T, E = StrobeError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_lua_text() {
        let e = StrobeError::new(ErrorCode::InvalidPattern, "Invalid trace pattern 'a::': empty segment");
        let wrapped = format!("runtime error: scripts/tools/x.lua:3: {e}\nstack traceback:\n\t[C]: in ?");
        assert_eq!(StrobeError::from_lua_message(&wrapped), e);
        assert_eq!(StrobeError::from_lua_message("boom").code, ErrorCode::InternalError);
    }
}
