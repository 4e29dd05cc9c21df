//! What a model is shown: the server's instructions and the eight tools, each with its
//! description, annotations and `inputSchema` (from the typed arguments in `params`), and in
//! `--structured` mode an `outputSchema` (from the typed results in `results`, with the rendered
//! text beside them). Everything here is in every request a model makes, so it says each thing
//! once. Pure.

use super::{params, results};
use rmcp::handler::server::tool::{schema_for_input, schema_for_output};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use std::sync::Arc;

/// The server's `instructions`.
pub(crate) const INSTRUCTIONS: &str = "\
Persistent terminal sessions. Use them when work needs state that lasts (cwd, env, a running \
server, a REPL) or answers interactive input. terminal_send without a session_id runs in your \
default terminal (opened on first use, its cwd and env kept); name a session_id to go back to a \
REPL or a second terminal, and terminal_close sessions you no longer need. terminal_send returns \
when the command ends (wait: prompt) or a program waits for input (stdin_read); inferred_idle and \
timeout do not prove it ended: send with no text to keep waiting, or terminal_signal it.";

/// The tool names.
pub(crate) const OPEN: &str = "terminal_open";
/// See [`OPEN`].
pub(crate) const SEND: &str = "terminal_send";
/// See [`OPEN`].
pub(crate) const READ: &str = "terminal_read";
/// See [`OPEN`].
pub(crate) const SIGNAL: &str = "terminal_signal";
/// See [`OPEN`].
pub(crate) const CLOSE: &str = "terminal_close";
/// See [`OPEN`].
pub(crate) const LIST: &str = "terminal_list";
/// See [`OPEN`].
pub(crate) const JOB_OUTPUT: &str = "job_output";
/// See [`OPEN`].
pub(crate) const JOB_KILL: &str = "job_kill";

/// The tools as listed: `types` are the daemon's terminal types (the enum of
/// `terminal_open.type`); without `background`, `terminal_send` has no `run_in_background` and
/// the job tools are left out; with `structured`, each tool has an `outputSchema`.
pub(crate) fn list(types: &[String], background: bool, structured: bool) -> Vec<Tool> {
    let output = |schema: Arc<JsonObject>| structured.then_some(schema);
    let mut open = input::<params::OpenArgs>();
    if !types.is_empty() {
        set_property(&mut open, "type", "enum", serde_json::json!(types));
    }
    let mut send = input::<params::SendArgs>();
    if !background {
        remove_property(&mut send, "run_in_background");
    }
    let mut tools = vec![
        tool(
            OPEN,
            "Start another terminal session (a type, cwd or size of your choice; a shell by \
             default); returns its session_id and startup output.",
            Arc::new(open),
            output(output_schema::<results::OpenResult>()),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(false)
                .open_world(false),
        ),
        tool(
            SEND,
            "Type text and/or keys into a session (default: your default terminal) and wait. The \
             result ends with [wait: REASON]: prompt = the command finished (with its exit code); \
             stdin_read = a program waits for input, answer with another send to that session; \
             inferred_idle or timeout = it may still run, send with no text to wait longer or \
             signal it.",
            Arc::new(send),
            output(output_schema::<results::SendResult>()),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        ),
        tool(
            READ,
            "Page a session's output history (offset counts lines back from the newest), its \
             visible screen, one command's output (command: c3 or last; \"list\" lists the \
             commands run), or the lines matching a regex (pattern).",
            input_arc::<params::ReadArgs>(),
            output(output_schema::<results::ReadResult>()),
            ToolAnnotations::new().read_only(true).idempotent(true),
        ),
        tool(
            SIGNAL,
            "Send a signal to the session's foreground program (SIGINT interrupts it).",
            input_arc::<params::SignalArgs>(),
            output(output_schema::<results::SignalResult>()),
            ToolAnnotations::new().read_only(false).destructive(true),
        ),
        tool(
            CLOSE,
            "End a session and every process it started.",
            input_arc::<params::CloseArgs>(),
            output(output_schema::<results::CloseResult>()),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true),
        ),
        tool(
            LIST,
            "Your terminal sessions: id, status, cwd, whether busy.",
            input_arc::<params::ListArgs>(),
            output(output_schema::<results::ListResult>()),
            ToolAnnotations::new().read_only(true).idempotent(true),
        ),
    ];
    if background {
        tools.push(tool(
            JOB_OUTPUT,
            "New output of a background job (never repeated) and its status; wait_ms waits for \
             more or for the end.",
            input_arc::<params::JobOutputArgs>(),
            output(output_schema::<results::JobOutputResult>()),
            ToolAnnotations::new().read_only(true).idempotent(false),
        ));
        tools.push(tool(
            JOB_KILL,
            "Interrupt a background job.",
            input_arc::<params::JobKillArgs>(),
            output(output_schema::<results::JobKillResult>()),
            ToolAnnotations::new().read_only(false).destructive(true),
        ));
    }
    tools
}

fn tool(
    name: &'static str,
    description: &'static str,
    input_schema: Arc<JsonObject>,
    output_schema: Option<Arc<JsonObject>>,
    annotations: ToolAnnotations,
) -> Tool {
    let tool = Tool::new(name, description, input_schema).with_annotations(annotations);
    match output_schema {
        Some(schema) => tool.with_raw_output_schema(schema),
        None => tool,
    }
}

fn input<T: JsonSchema + 'static>() -> JsonObject {
    // The structs derive JsonSchema with an object root, so this cannot fail.
    let mut schema = schema_for_input::<T>()
        .map(|schema| schema.as_ref().clone())
        .unwrap_or_default();
    drop_integer_formats(&mut schema);
    schema
}

fn input_arc<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    Arc::new(input::<T>())
}

/// The output schema of a tool whose typed result is `T`: its fields and `rendered`.
fn output_schema<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = schema_for_output::<results::Structured<T>>()
        .as_ref()
        .clone();
    drop_integer_formats(&mut schema);
    Arc::new(schema)
}

/// Removes schemars' `format: uint32`-style annotations: JSON Schema defines no such formats
/// (validators warn about them), and `minimum`/`maximum` say what matters.
fn drop_integer_formats(schema: &mut JsonObject) {
    let integer_format = schema
        .get("format")
        .and_then(|f| f.as_str())
        .is_some_and(|f| f.starts_with("int") || f.starts_with("uint"));
    if integer_format {
        schema.remove("format");
    }
    for value in schema.values_mut() {
        match value {
            serde_json::Value::Object(inner) => drop_integer_formats(inner),
            serde_json::Value::Array(items) => {
                for item in items {
                    if let serde_json::Value::Object(inner) = item {
                        drop_integer_formats(inner);
                    }
                }
            }
            _ => {}
        }
    }
}

fn set_property(schema: &mut JsonObject, property: &str, key: &str, value: serde_json::Value) {
    if let Some(serde_json::Value::Object(properties)) = schema.get_mut("properties")
        && let Some(serde_json::Value::Object(field)) = properties.get_mut(property)
    {
        field.insert(key.to_owned(), value);
    }
}

fn remove_property(schema: &mut JsonObject, property: &str) {
    if let Some(serde_json::Value::Object(properties)) = schema.get_mut("properties") {
        properties.remove(property);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn property<'a>(tool: &'a Tool, name: &str) -> Option<&'a serde_json::Value> {
        tool.input_schema.get("properties")?.get(name)
    }

    #[test]
    fn the_whole_list_stays_small() {
        let types = ["shell", "bash", "zsh", "fish", "python"].map(String::from);
        let tools = list(&types, true, false);
        let json = serde_json::to_string(&tools).unwrap();
        assert_eq!(tools.len(), 8);
        assert!(json.len() < 10 * 1024, "tools/list is {} bytes", json.len());
        assert!(!json.contains("uint"), "no integer formats: {json}");
        let structured = list(&types, true, true);
        for tool in &structured {
            let schema = tool.output_schema.as_ref().expect("an output schema");
            let properties = schema.get("properties").expect("properties");
            assert!(
                properties.get("rendered").is_some(),
                "{} carries rendered",
                tool.name
            );
        }
        for tool in &tools {
            assert!(
                tool.output_schema.is_none(),
                "{}: no output schema by default",
                tool.name
            );
            assert!(tool.annotations.is_some(), "{} has annotations", tool.name);
            assert_eq!(
                tool.input_schema.get("additionalProperties"),
                Some(&false.into())
            );
        }
    }

    #[test]
    fn schemas_carry_ranges_defaults_and_required_fields() {
        let tools = list(&["shell".to_owned(), "python".to_owned()], true, false);
        let by_name = |n: &str| tools.iter().find(|t| t.name == n).unwrap();
        let open = by_name(OPEN);
        assert_eq!(
            property(open, "type").and_then(|t| t.get("enum")),
            Some(&serde_json::json!(["shell", "python"]))
        );
        let read = by_name(READ);
        let count = property(read, "count").unwrap();
        assert_eq!(count.get("minimum"), Some(&1.into()));
        assert_eq!(count.get("maximum"), Some(&10000.into()));
        assert_eq!(count.get("default"), Some(&500.into()));
        assert_eq!(
            read.input_schema.get("required"),
            Some(&serde_json::json!(["session_id"]))
        );
        let signal = by_name(SIGNAL);
        let text = serde_json::to_string(property(signal, "signal").unwrap()).unwrap();
        assert!(text.contains("SIGTSTP"), "{text}");
    }

    #[test]
    fn without_background_there_is_no_job_tool() {
        let tools = list(&[], false, false);
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, [OPEN, SEND, READ, SIGNAL, CLOSE, LIST]);
        let send = tools.iter().find(|t| t.name == SEND).unwrap();
        assert!(property(send, "run_in_background").is_none());
    }
}
