//! The tools' typed arguments: one struct per tool, whose JSON Schema (schemars) is the tool's
//! `inputSchema`, and the parsing that turns a `tools/call`'s arguments into it. Anything that
//! does not fit the schema (wrong type, unknown key name, out of range, an unknown name in `keys`
//! or `signal`) is an invalid-params error whose message names the field. Pure.

use crate::validate;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

/// Why a tool's arguments were refused: the message names the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadParams(pub(crate) String);

/// Parses `arguments` into `T`, naming the offending field on failure, then checks what the
/// schema bounds (ranges, names).
pub(crate) fn parse<T: DeserializeOwned + Checked>(arguments: JsonObject) -> Result<T, BadParams> {
    let value = serde_json::Value::Object(arguments);
    let parsed: T = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path.is_empty() || path == "." {
            BadParams(e.inner().to_string())
        } else {
            BadParams(format!("{path}: {}", e.inner()))
        }
    })?;
    parsed.check()?;
    Ok(parsed)
}

/// Bounds a schema states that serde cannot check.
pub(crate) trait Checked {
    /// `Err` naming the first field out of bounds.
    fn check(&self) -> Result<(), BadParams>;
}

fn range<T: PartialOrd + std::fmt::Display + Copy>(
    field: &str,
    value: Option<T>,
    min: T,
    max: T,
) -> Result<(), BadParams> {
    match value {
        Some(v) if v < min || v > max => Err(BadParams(format!(
            "{field} must be between {min} and {max}, got {v}"
        ))),
        _ => Ok(()),
    }
}

fn required_id(field: &str, id: &str) -> Result<(), BadParams> {
    if id.is_empty() {
        return Err(BadParams(format!("{field} must not be empty")));
    }
    Ok(())
}

/// `terminal_open`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpenArgs {
    /// Terminal type.
    #[serde(rename = "type")]
    #[schemars(extend("default" = "shell"))]
    pub(crate) type_name: Option<String>,
    /// Display name shown in lists.
    pub(crate) name: Option<String>,
    /// Working directory, absolute or relative to the workspace root (default).
    pub(crate) cwd: Option<String>,
    /// Environment variables to set.
    pub(crate) env: Option<BTreeMap<String, String>>,
    #[schemars(range(min = 20, max = 1000), extend("default" = 120))]
    pub(crate) cols: Option<u32>,
    #[schemars(range(min = 5, max = 1000), extend("default" = 40))]
    pub(crate) rows: Option<u32>,
}

impl Checked for OpenArgs {
    fn check(&self) -> Result<(), BadParams> {
        range("cols", self.cols, 20, 1000)?;
        range("rows", self.rows, 5, 1000)?;
        for (name, value) in self.env.iter().flatten() {
            validate::env_var(name, value).map_err(|e| BadParams(e.to_string()))?;
        }
        Ok(())
    }
}

/// `terminal_send`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendArgs {
    #[schemars(length(min = 1))]
    pub(crate) session_id: String,
    /// Text to type (a command line, or an answer to a program's prompt).
    pub(crate) text: Option<String>,
    /// Press Enter after text. Default: true when text is not empty.
    pub(crate) submit: Option<bool>,
    /// Named keys sent after text: Enter, Tab, Escape, Backspace, Delete, Up, Down, Left, Right,
    /// Home, End, PageUp, PageDown, F1..F12, C-a..C-z.
    pub(crate) keys: Option<Vec<String>>,
    /// Return a job_id at once; read it with job_output.
    pub(crate) run_in_background: Option<bool>,
    /// Write text meant for after a running command once the prompt is back, instead of refusing it.
    pub(crate) typeahead: Option<bool>,
    /// Longest wait.
    #[schemars(range(min = 1, max = 600000), extend("default" = 30000))]
    pub(crate) timeout_ms: Option<u32>,
    /// Output silence that ends the wait.
    #[schemars(range(min = 50, max = 600000), extend("default" = 5000))]
    pub(crate) idle_ms: Option<u32>,
}

impl Checked for SendArgs {
    fn check(&self) -> Result<(), BadParams> {
        required_id("session_id", &self.session_id)?;
        range("timeout_ms", self.timeout_ms, 1, 600_000)?;
        range("idle_ms", self.idle_ms, 50, 600_000)?;
        for key in self.keys.iter().flatten() {
            validate::key_bytes(key).map_err(|e| BadParams(e.to_string()))?;
        }
        if let Some(text) = &self.text {
            validate::text(text).map_err(|e| BadParams(e.to_string()))?;
        }
        Ok(())
    }
}

impl SendArgs {
    /// `submit` as `mcp.md` defaults it: true when there is text, else false (so the empty send
    /// only waits).
    pub(crate) fn submit(&self) -> bool {
        self.submit
            .unwrap_or_else(|| self.text.as_deref().is_some_and(|t| !t.is_empty()))
    }
}

/// `terminal_read`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    #[schemars(length(min = 1))]
    pub(crate) session_id: String,
    /// Lines back from the newest where the page ends.
    #[schemars(extend("default" = 0))]
    pub(crate) offset: Option<u64>,
    #[schemars(range(min = 1, max = 10000), extend("default" = 500))]
    pub(crate) count: Option<u32>,
    /// Absolute first line (1 = the session's first); overrides offset.
    #[schemars(range(min = 1))]
    pub(crate) from_line: Option<u64>,
    /// Return the visible screen instead of history.
    pub(crate) screen: Option<bool>,
}

impl Checked for ReadArgs {
    fn check(&self) -> Result<(), BadParams> {
        required_id("session_id", &self.session_id)?;
        range("count", self.count, 1, 10_000)?;
        range("from_line", self.from_line, 1, u64::MAX)
    }
}

/// The signals `terminal_signal` takes (other spellings such as `INT` are accepted too).
#[derive(Debug, JsonSchema)]
#[schemars(inline)]
#[allow(clippy::upper_case_acronyms, dead_code)]
enum SignalName {
    SIGINT,
    SIGTERM,
    SIGKILL,
    SIGTSTP,
    SIGHUP,
}

/// `terminal_signal`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignalArgs {
    #[schemars(length(min = 1))]
    pub(crate) session_id: String,
    #[schemars(with = "SignalName")]
    pub(crate) signal: String,
}

impl Checked for SignalArgs {
    fn check(&self) -> Result<(), BadParams> {
        required_id("session_id", &self.session_id)?;
        validate::signal(&self.signal).map_err(|e| BadParams(e.to_string()))?;
        Ok(())
    }
}

/// `terminal_close`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CloseArgs {
    #[schemars(length(min = 1))]
    pub(crate) session_id: String,
}

impl Checked for CloseArgs {
    fn check(&self) -> Result<(), BadParams> {
        required_id("session_id", &self.session_id)
    }
}

/// `terminal_list`: no arguments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {}

impl Checked for ListArgs {
    fn check(&self) -> Result<(), BadParams> {
        Ok(())
    }
}

/// `job_output`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobOutputArgs {
    #[schemars(length(min = 1))]
    pub(crate) job_id: String,
    /// Wait up to this long for new output or the end (0: answer now).
    #[schemars(range(min = 0, max = 600000), extend("default" = 0))]
    pub(crate) wait_ms: Option<u32>,
}

impl Checked for JobOutputArgs {
    fn check(&self) -> Result<(), BadParams> {
        required_id("job_id", &self.job_id)?;
        range("wait_ms", self.wait_ms, 0, 600_000)
    }
}

/// `job_kill`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobKillArgs {
    #[schemars(length(min = 1))]
    pub(crate) job_id: String,
}

impl Checked for JobKillArgs {
    fn check(&self) -> Result<(), BadParams> {
        required_id("job_id", &self.job_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: serde_json::Value) -> JsonObject {
        value.as_object().expect("an object").clone()
    }

    #[test]
    fn refusals_name_the_field() {
        let cases: &[(&str, serde_json::Value, &str)] = &[
            (
                "wrong type",
                json!({"session_id": "t1", "count": "ten"}),
                "count",
            ),
            (
                "out of range",
                json!({"session_id": "t1", "count": 0}),
                "count",
            ),
            (
                "unknown key",
                json!({"session_id": "t1", "lines": 3}),
                "lines",
            ),
            ("missing id", json!({"count": 3}), "session_id"),
            ("empty id", json!({"session_id": ""}), "session_id"),
        ];
        for (what, value, field) in cases {
            let err = parse::<ReadArgs>(args(value.clone())).expect_err(what);
            assert!(err.0.contains(field), "{what}: {:?} names {field}", err.0);
        }
        let err = parse::<SendArgs>(args(
            json!({"session_id": "t1", "keys": ["Enter", "Hyper"]}),
        ))
        .expect_err("unknown key name");
        assert!(err.0.contains("keys") && err.0.contains("Hyper"), "{err:?}");
        let err = parse::<SendArgs>(args(json!({"session_id": "t1", "idle_ms": 10})))
            .expect_err("idle too short");
        assert!(err.0.contains("idle_ms"), "{err:?}");
        let err = parse::<SignalArgs>(args(json!({"session_id": "t1", "signal": "SIGUSR1"})))
            .expect_err("unknown signal");
        assert!(err.0.contains("signal"), "{err:?}");
    }

    #[test]
    fn accepts_what_the_schema_allows() {
        let send = parse::<SendArgs>(args(json!({"session_id": "t1"}))).expect("empty send");
        assert!(!send.submit(), "the empty send only waits");
        let send = parse::<SendArgs>(args(json!({"session_id": "t1", "text": "ls"}))).unwrap();
        assert!(send.submit(), "text is submitted by default");
        let send = parse::<SendArgs>(args(
            json!({"session_id": "t1", "text": "ls", "submit": false}),
        ))
        .unwrap();
        assert!(!send.submit());
        for spelling in ["SIGINT", "INT", "sigint"] {
            parse::<SignalArgs>(args(json!({"session_id": "t1", "signal": spelling})))
                .unwrap_or_else(|e| panic!("{spelling}: {e:?}"));
        }
        parse::<ListArgs>(JsonObject::new()).expect("list takes nothing");
        parse::<ListArgs>(args(json!({"x": 1}))).expect_err("list refuses arguments");
    }
}
