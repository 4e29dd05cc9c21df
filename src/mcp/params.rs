//! The tools' typed arguments: one struct per tool, whose JSON Schema (schemars) is the tool's
//! `inputSchema`, and the parsing that turns a `tools/call`'s arguments into it. Anything that
//! does not fit the schema (wrong type, an argument the tool does not have, out of range, an
//! unknown name in `keys` or `signal`) is refused naming the field and what fits; the server
//! answers it as a tool execution error the model can read (SEP-1303). Pure.

use crate::error::Error;
use crate::validate;
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

/// Why a tool's arguments were refused: the field, when one is to blame, and what fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadParams {
    /// The argument's name (`count`, `keys[1]`), or None for the arguments as a whole.
    pub(crate) field: Option<String>,
    /// What is wrong with it and what fits.
    pub(crate) message: String,
}

impl BadParams {
    fn field(field: &str, message: impl Into<String>) -> BadParams {
        BadParams {
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    /// A check of `validate`, whose message names the field itself.
    fn checked(field: &str, error: crate::error::Error) -> BadParams {
        let message = error.to_string();
        let name = field.split('[').next().unwrap_or(field);
        let message = message
            .strip_prefix(name)
            .map(|rest| rest.trim_start_matches([':', ' ']).to_owned())
            .unwrap_or(message);
        BadParams::field(field, message)
    }
}

impl std::fmt::Display for BadParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "invalid argument `{field}`: {}", self.message),
            None => write!(f, "invalid arguments: {}", self.message),
        }
    }
}

/// Parses `arguments` of `tool` (whose input schema is `schema`) into `T`: an argument the
/// schema does not name is refused with the names it does, a missing or mistyped one by name,
/// then what the schema bounds (ranges, names) is checked.
pub(crate) fn parse<T: DeserializeOwned + Checked>(
    tool: &str,
    schema: &JsonObject,
    arguments: JsonObject,
) -> Result<T, BadParams> {
    let no_properties = JsonObject::new();
    let properties = schema
        .get("properties")
        .and_then(|p| p.as_object())
        .unwrap_or(&no_properties);
    if let Some(unknown) = arguments.keys().find(|k| !properties.contains_key(*k)) {
        let known: Vec<&str> = properties.keys().map(String::as_str).collect();
        let takes = if known.is_empty() {
            "it takes no arguments".to_owned()
        } else {
            format!("it takes {}", known.join(", "))
        };
        return Err(BadParams::field(
            unknown,
            format!("{tool} has no such argument; {takes}"),
        ));
    }
    let value = serde_json::Value::Object(arguments);
    let parsed: T = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let message = e.inner().to_string();
        match message.strip_prefix("missing field `") {
            Some(rest) => BadParams::field(rest.trim_end_matches('`'), "is required"),
            None if path.is_empty() || path == "." => BadParams {
                field: None,
                message,
            },
            None => BadParams::field(&path, message),
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
        Some(v) if v < min => Err(BadParams::field(
            field,
            format!("{v} is below the minimum {min}"),
        )),
        Some(v) if v > max => Err(BadParams::field(
            field,
            format!("{v} is above the maximum {max}"),
        )),
        _ => Ok(()),
    }
}

fn required_id(field: &str, id: &str) -> Result<(), BadParams> {
    if id.is_empty() {
        return Err(BadParams::field(field, "must not be empty"));
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
    /// Contain the terminal: what it may write, read and reach; may only tighten its type's.
    pub(crate) sandbox: Option<SandboxArgs>,
}

/// `terminal_open`'s `sandbox`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SandboxArgs {
    /// The only paths it may write ($CWD, $HOME, $TMPDIR allowed); [] for none.
    pub(crate) write: Option<Vec<String>>,
    /// The only paths it may read, besides the system's.
    pub(crate) read: Option<Vec<String>>,
    /// on, loopback (its own 127.0.0.1 only) or off.
    pub(crate) network: Option<NetworkArg>,
    /// Memory cap, e.g. "512M".
    pub(crate) memory_max: Option<String>,
    /// Most processes at once.
    #[schemars(range(min = 1))]
    pub(crate) pids_max: Option<u64>,
    /// CPU cap in percent of one CPU, e.g. "50%".
    pub(crate) cpu_max: Option<String>,
}

/// `sandbox.network`.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NetworkArg {
    On,
    Loopback,
    Off,
}

impl SandboxArgs {
    /// The request's protobuf form (the daemon checks every value).
    pub(crate) fn into_pb(self) -> crate::pb::Sandbox {
        let paths = |p: Option<Vec<String>>| p.map(|paths| crate::pb::SandboxPaths { paths });
        crate::pb::Sandbox {
            write: paths(self.write),
            read: paths(self.read),
            network: match self.network {
                None => String::new(),
                Some(NetworkArg::On) => "on".into(),
                Some(NetworkArg::Loopback) => "loopback".into(),
                Some(NetworkArg::Off) => "off".into(),
            },
            memory_max: self.memory_max.unwrap_or_default(),
            pids_max: self.pids_max.unwrap_or(0),
            cpu_max: self.cpu_max.unwrap_or_default(),
        }
    }
}

impl Checked for OpenArgs {
    fn check(&self) -> Result<(), BadParams> {
        range("cols", self.cols, 20, 1000)?;
        range("rows", self.rows, 5, 1000)?;
        for (name, value) in self.env.iter().flatten() {
            validate::env_var(name, value).map_err(|e| BadParams::checked("env", e))?;
        }
        if let Some(s) = &self.sandbox {
            if let Some(m) = &s.memory_max {
                crate::sandbox::parse_size("sandbox.memory_max", m).map_err(|e| {
                    BadParams::checked("sandbox.memory_max", Error::InvalidArgument(e))
                })?;
            }
            if let Some(c) = &s.cpu_max {
                crate::sandbox::parse_cpu("sandbox.cpu_max", c).map_err(|e| {
                    BadParams::checked("sandbox.cpu_max", Error::InvalidArgument(e))
                })?;
            }
            if s.pids_max == Some(0) {
                return Err(BadParams::field("sandbox.pids_max", "must be at least 1"));
            }
        }
        Ok(())
    }
}

/// `terminal_send`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendArgs {
    /// Omit to use your default terminal (opened on first use).
    #[schemars(length(min = 1))]
    pub(crate) session_id: Option<String>,
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
        if let Some(id) = &self.session_id {
            required_id("session_id", id).map_err(|e| {
                BadParams::field(
                    "session_id",
                    format!("{}; omit it to use your default terminal", e.message),
                )
            })?;
        }
        range("timeout_ms", self.timeout_ms, 1, 600_000)?;
        range("idle_ms", self.idle_ms, 50, 600_000)?;
        for (index, key) in self.keys.iter().flatten().enumerate() {
            validate::key_bytes(key)
                .map_err(|e| BadParams::checked(&format!("keys[{index}]"), e))?;
        }
        if let Some(text) = &self.text {
            validate::text(text).map_err(|e| BadParams::checked("text", e))?;
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
    /// One command's output: its id (c3) or "last"; "list" lists the commands run (newest
    /// last, with exit codes and line ranges).
    pub(crate) command: Option<String>,
    /// A regular expression: the matching lines (grep -n style, newest count kept) of the
    /// history, or of `command`'s output.
    pub(crate) pattern: Option<String>,
    /// With pattern: ignore case.
    pub(crate) ignore_case: Option<bool>,
    /// With pattern: lines shown around each match.
    #[schemars(range(min = 0, max = 100))]
    pub(crate) context: Option<u32>,
}

/// The `command` that lists the session's commands.
pub(crate) const LIST_COMMANDS: &str = "list";

impl Checked for ReadArgs {
    fn check(&self) -> Result<(), BadParams> {
        required_id("session_id", &self.session_id)?;
        range("count", self.count, 1, 10_000)?;
        range("from_line", self.from_line, 1, u64::MAX)?;
        range("context", self.context, 0, 100)?;
        let listing = self.command.as_deref() == Some(LIST_COMMANDS);
        if let Some(command) = self.command.as_deref().filter(|_| !listing) {
            validate::command_id(command).map_err(|e| BadParams::checked("command", e))?;
        }
        if let Some(pattern) = &self.pattern {
            let ignore_case = self.ignore_case.unwrap_or(false);
            validate::pattern(pattern, ignore_case)
                .map_err(|e| BadParams::checked("pattern", e))?;
        }
        let searching = self.pattern.is_some();
        let shaped = [
            (
                "screen",
                self.screen == Some(true) && (self.command.is_some() || searching),
            ),
            ("command", listing && searching),
            ("ignore_case", self.ignore_case.is_some() && !searching),
            ("context", self.context.is_some() && !searching),
        ];
        match shaped.iter().find(|(_, wrong)| *wrong) {
            Some(("screen", _)) => Err(BadParams::field("screen", "not with command or pattern")),
            Some(("command", _)) => Err(BadParams::field(
                "command",
                "\"list\" lists commands; to search one, name it (c3, last)",
            )),
            Some((field, _)) => Err(BadParams::field(field, "only with pattern")),
            None => Ok(()),
        }
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
        validate::signal(&self.signal).map_err(|e| BadParams::checked("signal", e))?;
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

    fn schema<T: JsonSchema + 'static>() -> JsonObject {
        rmcp::handler::server::tool::schema_for_input::<T>()
            .expect("an object schema")
            .as_ref()
            .clone()
    }

    fn refuse<T: DeserializeOwned + Checked + JsonSchema + 'static>(
        value: serde_json::Value,
    ) -> String {
        match parse::<T>("the_tool", &schema::<T>(), args(value.clone())) {
            Ok(_) => panic!("{value} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    fn accept<T: DeserializeOwned + Checked + JsonSchema + 'static>(value: serde_json::Value) -> T {
        parse::<T>("the_tool", &schema::<T>(), args(value.clone()))
            .unwrap_or_else(|e| panic!("{value}: {e}"))
    }

    #[test]
    fn refusals_name_the_field_and_what_fits() {
        let cases: &[(&str, serde_json::Value, &str)] = &[
            (
                "wrong type",
                json!({"session_id": "t1", "count": "ten"}),
                "invalid argument `count`: invalid type: string \"ten\"",
            ),
            (
                "below the range",
                json!({"session_id": "t1", "count": 0}),
                "invalid argument `count`: 0 is below the minimum 1",
            ),
            (
                "above the range",
                json!({"session_id": "t1", "count": 20000}),
                "invalid argument `count`: 20000 is above the maximum 10000",
            ),
            (
                "unknown argument",
                json!({"session_id": "t1", "lines": 3}),
                "invalid argument `lines`: the_tool has no such argument; it takes session_id, ",
            ),
            (
                "missing id",
                json!({"count": 3}),
                "invalid argument `session_id`: is required",
            ),
            (
                "empty id",
                json!({"session_id": ""}),
                "invalid argument `session_id`: must not be empty",
            ),
        ];
        for (what, value, want) in cases {
            let got = refuse::<ReadArgs>(value.clone());
            assert!(
                got.starts_with(want),
                "{what}: {got:?} starts with {want:?}"
            );
        }
        let keys = refuse::<SendArgs>(json!({"keys": ["Enter", "Hyper"]}));
        assert!(
            keys.starts_with(
                "invalid argument `keys[1]`: unknown key \"Hyper\"; known keys are Enter"
            ),
            "{keys}"
        );
        let idle = refuse::<SendArgs>(json!({"idle_ms": 10}));
        assert_eq!(
            idle,
            "invalid argument `idle_ms`: 10 is below the minimum 50"
        );
        let signal = refuse::<SignalArgs>(json!({"session_id": "t1", "signal": "SIGUSR1"}));
        assert!(
            signal
                .starts_with("invalid argument `signal`: \"SIGUSR1\" is not supported; use one of"),
            "{signal}"
        );
        let empty = refuse::<SendArgs>(json!({"session_id": ""}));
        assert!(
            empty.contains("omit it to use your default terminal"),
            "{empty}"
        );
        let list = refuse::<ListArgs>(json!({"x": 1}));
        assert_eq!(
            list,
            "invalid argument `x`: the_tool has no such argument; it takes no arguments"
        );
    }

    #[test]
    fn accepts_what_the_schema_allows() {
        let send: SendArgs = accept(json!({"session_id": "t1"}));
        assert!(!send.submit(), "the empty send only waits");
        let send: SendArgs = accept(json!({"text": "ls"}));
        assert!(send.submit(), "text is submitted by default");
        assert_eq!(send.session_id, None, "no session: the default terminal");
        let send: SendArgs = accept(json!({"session_id": "t1", "text": "ls", "submit": false}));
        assert!(!send.submit());
        for spelling in ["SIGINT", "INT", "sigint"] {
            let _: SignalArgs = accept(json!({"session_id": "t1", "signal": spelling}));
        }
        let _: ListArgs = accept(json!({}));
    }
}
