//! One row of the unified timeline, as the engine hands it to the store and as
//! queries return it. Field names follow `spec-current.md` ("events" table).

use serde::{Deserialize, Serialize};

/// The nine event kinds of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    FunctionEnter,
    FunctionExit,
    Stdout,
    Stderr,
    Crash,
    VariableSnapshot,
    Pause,
    Logpoint,
    ConditionError,
}

impl EventType {
    pub const ALL: &'static [EventType] = &[
        EventType::FunctionEnter,
        EventType::FunctionExit,
        EventType::Stdout,
        EventType::Stderr,
        EventType::Crash,
        EventType::VariableSnapshot,
        EventType::Pause,
        EventType::Logpoint,
        EventType::ConditionError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::FunctionEnter => "function_enter",
            EventType::FunctionExit => "function_exit",
            EventType::Stdout => "stdout",
            EventType::Stderr => "stderr",
            EventType::Crash => "crash",
            EventType::VariableSnapshot => "variable_snapshot",
            EventType::Pause => "pause",
            EventType::Logpoint => "logpoint",
            EventType::ConditionError => "condition_error",
        }
    }

    pub fn parse(s: &str) -> Option<EventType> {
        EventType::ALL.iter().copied().find(|t| t.as_str() == s)
    }
}

/// A timeline event. `id` is assigned by the store (`Store::next_event_id`) before the
/// event is queued, so that children can name their parent before either is written.
/// JSON-valued columns (`arguments`, `return_value`, ...) hold serialized JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: i64,
    pub session_id: String,
    pub timestamp_ns: i64,
    pub thread_id: Option<i64>,
    pub thread_name: Option<String>,
    pub pid: Option<i64>,
    pub parent_event_id: Option<i64>,
    pub event_type: EventType,
    pub function_name: Option<String>,
    pub function_name_raw: Option<String>,
    pub source_file: Option<String>,
    pub line_number: Option<i64>,
    pub arguments: Option<String>,
    pub return_value: Option<String>,
    pub duration_ns: Option<i64>,
    pub text: Option<String>,
    pub watch_values: Option<String>,
    pub sampled: Option<bool>,
    /// An exit of a call left without returning (an exception, a longjmp): no return value.
    pub unwound: Option<bool>,
    pub signal: Option<String>,
    pub fault_address: Option<String>,
    pub registers: Option<String>,
    pub backtrace: Option<String>,
    pub locals: Option<String>,
    pub breakpoint_id: Option<String>,
    pub logpoint_message: Option<String>,
    /// A typed enter stored as captured (`arguments` left empty): the raw record that
    /// `engine::capture_lazy` decodes into `arguments` when the event is read.
    pub capture: Option<Vec<u8>>,
}

impl Event {
    /// An event with only the required fields set; fill the rest with struct update syntax.
    pub fn new(session_id: &str, event_type: EventType, timestamp_ns: i64) -> Event {
        Event {
            id: 0,
            session_id: session_id.to_string(),
            timestamp_ns,
            thread_id: None,
            thread_name: None,
            pid: None,
            parent_event_id: None,
            event_type,
            function_name: None,
            function_name_raw: None,
            source_file: None,
            line_number: None,
            arguments: None,
            return_value: None,
            duration_ns: None,
            text: None,
            watch_values: None,
            sampled: None,
            unwound: None,
            signal: None,
            fault_address: None,
            registers: None,
            backtrace: None,
            locals: None,
            breakpoint_id: None,
            logpoint_message: None,
            capture: None,
        }
    }
}
