//! The config file's schema and how it is read over the defaults. Every key is optional (an
//! absent key keeps its default); unknown keys are errors, so a typo cannot silently leave a
//! default in force. Numbers are read as u64 and range-checked here, so an out-of-range value
//! gets a message with the allowed range.

use super::*;
use crate::sandbox::{self, Network, SandboxRequest};

/// The file's top level.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigFile {
    /// `Config::workspace_root`; `~` and `~/...` expand to `$HOME`.
    workspace_root: Option<String>,
    /// `Config::allow_root`.
    allow_root: Option<bool>,
    /// `Config::allow_background`.
    allow_background: Option<bool>,
    /// `Config::close_grace`, in milliseconds.
    close_grace_ms: Option<u64>,
    /// `Config::adoption_grace`, in milliseconds (0: forever).
    adoption_grace_ms: Option<u64>,
    /// `Config::state_dir`; `~` and `~/...` expand to `$HOME`.
    state_dir: Option<String>,
    /// `Config::process_tracking`: `auto`, `cgroup` or `subreaper`.
    process_tracking: Option<String>,
    /// `[limits]`.
    #[serde(default)]
    limits: LimitsFile,
    /// `[defaults]`.
    #[serde(default)]
    defaults: DefaultsFile,
    /// `[environment]`.
    #[serde(default)]
    environment: EnvironmentFile,
    /// `[[types]]`: each adds a type, or replaces the built-in type of the same name in place.
    #[serde(default)]
    types: Vec<TypeFile>,
}

/// `[limits]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    sessions_per_agent: Option<u64>,
    sessions_total: Option<u64>,
    jobs_per_agent: Option<u64>,
}

/// `[defaults]`: what a session gets when the request does not say.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultsFile {
    cols: Option<u64>,
    rows: Option<u64>,
    history_lines: Option<u64>,
    history_bytes: Option<u64>,
    startup_timeout_ms: Option<u64>,
    startup_idle_ms: Option<u64>,
}

/// `[environment]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvironmentFile {
    /// Replaces the built-in allowlist.
    allowlist: Option<Vec<String>>,
    /// Merged over the built-in defaults by name.
    defaults: Option<BTreeMap<String, String>>,
}

/// One `[[types]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TypeFile {
    name: String,
    argv: Vec<String>,
    /// `bash`, `zsh`, `fish` or `none` (the default).
    integration: Option<String>,
    /// bash and zsh: keep history expansion on.
    #[serde(default)]
    history_expansion: bool,
    #[serde(default)]
    description: String,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// `sandbox = { write = [...], read = [...], network = "off", ... }`.
    sandbox: Option<SandboxFile>,
}

/// A type's `sandbox` table (contract section 12).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxFile {
    write: Option<Vec<String>>,
    read: Option<Vec<String>>,
    network: Option<String>,
    /// Bytes, or a string with a K, M or G suffix.
    memory_max: Option<toml::Value>,
    pids_max: Option<u64>,
    /// `"150%"`, or a number (percent).
    cpu_max: Option<toml::Value>,
}

/// Checks a type's `sandbox` table (`key` names it): every value, and every path's form (a
/// path's existence is checked when a session opens, as `$CWD` is the session's).
fn sandbox_table(key: &str, t: SandboxFile) -> Result<SandboxRequest, FileError> {
    let text = |field: &str, v: toml::Value| -> Result<String, FileError> {
        match v {
            toml::Value::String(s) => Ok(s),
            toml::Value::Integer(n) => Ok(n.to_string()),
            other => Err(FileError::at(
                format!("{key}.{field}"),
                format!("must be a string or a number, got {}", other.type_str()),
            )),
        }
    };
    let at = |field: &str| format!("{key}.{field}");
    let split = |e: String| {
        let (k, reason) = e.split_once(": ").unwrap_or(("", &e));
        FileError::at(k, reason)
    };
    let network = match t.network {
        None => None,
        Some(name) => Some(Network::from_name(&name).ok_or_else(|| {
            FileError::at(
                at("network"),
                format!("must be on, loopback or off, got {name:?}"),
            )
        })?),
    };
    let memory_max = match t.memory_max {
        None => None,
        Some(v) => {
            Some(sandbox::parse_size(&at("memory_max"), &text("memory_max", v)?).map_err(split)?)
        }
    };
    let cpu_max = match t.cpu_max {
        None => None,
        Some(v) => Some(sandbox::parse_cpu(&at("cpu_max"), &text("cpu_max", v)?).map_err(split)?),
    };
    let pids_max = match t.pids_max {
        None => None,
        Some(n) => Some(sandbox::check_pids(&at("pids_max"), n).map_err(split)?),
    };
    let req = SandboxRequest {
        write: t.write,
        read: t.read,
        network,
        memory_max,
        pids_max,
        cpu_max,
    };
    req.check_paths(key).map_err(split)?;
    Ok(req)
}

/// What is wrong with a config file, before the file's name is attached.
#[derive(Debug)]
pub(super) struct FileError {
    /// The dotted key (`limits.sessions_total`, `types[0].argv`); empty for a syntax error.
    key: String,
    /// The 1-based line, when the parser knows it.
    line: Option<usize>,
    /// What is wrong and, where useful, what is allowed.
    reason: String,
}

impl FileError {
    fn at(key: impl Into<String>, reason: impl Into<String>) -> FileError {
        FileError {
            key: key.into(),
            line: None,
            reason: reason.into(),
        }
    }

    /// One line: `config file F[, line N][: key `K`]: reason`.
    pub(super) fn in_file(self, file: &Path) -> crate::Error {
        let mut message = format!("config file {}", file.display());
        if let Some(line) = self.line {
            message.push_str(&format!(", line {line}"));
        }
        if !self.key.is_empty() {
            message.push_str(&format!(": key `{}`", self.key));
        }
        message.push_str(": ");
        message.push_str(&self.reason);
        crate::Error::invalid(message)
    }
}

/// Parses the file's text into its schema (syntax, types and unknown keys).
pub(super) fn parse_file(text: &str) -> Result<ConfigFile, FileError> {
    let line_of = |span: Option<std::ops::Range<usize>>| {
        span.and_then(|s| text.get(..s.start))
            .map(|before| before.matches('\n').count() + 1)
    };
    let deserializer = toml::Deserializer::parse(text).map_err(|e| FileError {
        key: String::new(),
        line: line_of(e.span()),
        reason: format!("invalid TOML: {}", e.message()),
    })?;
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        FileError {
            key: if key == "." { String::new() } else { key },
            line: line_of(inner.span()),
            reason: inner.message().to_owned(),
        }
    })
}

/// `value` when it is within `min..=max`, else an error naming `key` and the range.
fn ranged(key: &str, value: u64, min: u64, max: u64) -> Result<u64, FileError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(FileError::at(
            key,
            format!("must be between {min} and {max}, got {value}"),
        ))
    }
}

/// Checks the names and values of an environment table at `key`.
fn env_table(
    key: &str,
    table: BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, FileError> {
    for (name, value) in &table {
        if !is_env_name(name) {
            return Err(FileError::at(
                key,
                format!("{name:?} is not an environment variable name ({ENV_NAME_RULE})"),
            ));
        }
        if value.contains('\0') {
            return Err(FileError::at(
                format!("{key}.{name}"),
                "the value contains a NUL byte",
            ));
        }
    }
    Ok(table.into_iter().collect())
}

/// Expands a leading `~` and requires an absolute path to an existing directory.
fn workspace_root(raw: &str) -> Result<PathBuf, FileError> {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    let path = match raw.strip_prefix('~') {
        Some("") => home(),
        Some(rest) if rest.starts_with('/') => home().map(|h| h.join(&rest[1..])),
        _ => Some(PathBuf::from(raw)),
    }
    .ok_or_else(|| FileError::at("workspace_root", "`~` needs HOME to be set"))?;
    if !path.is_absolute() {
        return Err(FileError::at(
            "workspace_root",
            format!("must be an absolute path (or start with ~/), got {raw:?}"),
        ));
    }
    if !path.is_dir() {
        return Err(FileError::at(
            "workspace_root",
            format!("{} is not an existing directory", path.display()),
        ));
    }
    Ok(path)
}

/// `state_dir`: an absolute path (or `~/...`); created at start when missing.
fn state_dir(raw: &str) -> Result<PathBuf, FileError> {
    let path = match raw.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(rest))
            .ok_or_else(|| FileError::at("state_dir", "`~` needs HOME to be set"))?,
        None => PathBuf::from(raw),
    };
    if !path.is_absolute() {
        return Err(FileError::at(
            "state_dir",
            format!("must be an absolute path (or start with ~/), got {raw:?}"),
        ));
    }
    Ok(path)
}

/// Checks one `[[types]]` entry (the `index`th) and turns it into a `TerminalType`.
fn terminal_type(index: usize, t: TypeFile) -> Result<TerminalType, FileError> {
    let key = |field: &str| format!("types[{index}].{field}");
    if t.name.is_empty()
        || t.name.len() > 64
        || !t
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    {
        return Err(FileError::at(
            key("name"),
            format!(
                "must be 1 to 64 letters, digits, '_', '-' or '.', got {:?}",
                t.name
            ),
        ));
    }
    match t.argv.first() {
        None => {
            return Err(FileError::at(
                key("argv"),
                "must name a program: it is empty",
            ));
        }
        Some(program) if program.is_empty() => {
            return Err(FileError::at(key("argv"), "the program (argv[0]) is empty"));
        }
        Some(_) => {}
    }
    if t.argv.iter().any(|a| a.contains('\0')) {
        return Err(FileError::at(
            key("argv"),
            "an argument contains a NUL byte",
        ));
    }
    let integration = match t.integration.as_deref() {
        None => Integration::None,
        Some(name) => Integration::from_name(name).ok_or_else(|| {
            FileError::at(
                key("integration"),
                format!("must be one of bash, zsh, fish, none; got {name:?}"),
            )
        })?,
    };
    if t.history_expansion && !matches!(integration, Integration::Bash | Integration::Zsh) {
        return Err(FileError::at(
            key("history_expansion"),
            format!(
                "applies to the bash and zsh integrations only; this type's integration is {}",
                integration.name()
            ),
        ));
    }
    if t.description.chars().any(char::is_control) {
        return Err(FileError::at(
            key("description"),
            "must be one line without control characters",
        ));
    }
    let env = env_table(&key("env"), t.env)?;
    let sandbox = t
        .sandbox
        .map(|s| sandbox_table(&key("sandbox"), s))
        .transpose()?;
    if find_program(&t.argv[0]).is_none() {
        tracing::warn!(
            r#type = %t.name,
            program = %t.argv[0],
            "the program of a configured type is not in the daemon's PATH; opening it will fail"
        );
    }
    Ok(TerminalType {
        name: t.name,
        argv: t.argv,
        integration,
        history_expansion: t.history_expansion,
        description: t.description,
        env,
        sandbox,
    })
}

impl ConfigFile {
    /// Validates every key and applies the file over `config` (the defaults).
    pub(super) fn apply(self, config: &mut Config) -> Result<(), FileError> {
        if let Some(raw) = &self.workspace_root {
            config.workspace_root = workspace_root(raw)?;
        }
        if let Some(allow) = self.allow_background {
            config.allow_background = allow;
        }
        if let Some(allow) = self.allow_root {
            config.allow_root = allow;
        }
        if let Some(ms) = self.close_grace_ms {
            config.close_grace = Duration::from_millis(ranged("close_grace_ms", ms, 0, 60_000)?);
        }
        if let Some(ms) = self.adoption_grace_ms {
            // Up to a week: long enough for any planned downtime, short enough to be a bound.
            config.adoption_grace =
                Duration::from_millis(ranged("adoption_grace_ms", ms, 0, 604_800_000)?);
        }
        if let Some(raw) = &self.state_dir {
            config.state_dir = Some(state_dir(raw)?);
        }
        if let Some(mode) = &self.process_tracking {
            config.process_tracking = mode.parse().map_err(|_| {
                FileError::at(
                    "process_tracking",
                    format!("must be one of auto, cgroup, subreaper; got {mode:?}"),
                )
            })?;
        }

        let l = self.limits;
        if let Some(n) = l.sessions_per_agent {
            config.limits.sessions_per_agent =
                ranged("limits.sessions_per_agent", n, 1, 10_000)? as usize;
        }
        if let Some(n) = l.sessions_total {
            config.limits.sessions_total = ranged("limits.sessions_total", n, 1, 10_000)? as usize;
        }
        if let Some(n) = l.jobs_per_agent {
            config.limits.jobs_per_agent = ranged("limits.jobs_per_agent", n, 1, 100_000)? as usize;
        }
        if config.limits.sessions_per_agent > config.limits.sessions_total {
            return Err(FileError::at(
                "limits.sessions_per_agent",
                format!(
                    "({}) must not exceed limits.sessions_total ({})",
                    config.limits.sessions_per_agent, config.limits.sessions_total
                ),
            ));
        }

        let d = self.defaults;
        if let Some(n) = d.cols {
            // The same ranges `Open` accepts for `cols` and `rows`.
            config.cols = ranged("defaults.cols", n, 20, 1000)? as u16;
        }
        if let Some(n) = d.rows {
            config.rows = ranged("defaults.rows", n, 5, 1000)? as u16;
        }
        if let Some(n) = d.history_lines {
            config.history_lines = ranged("defaults.history_lines", n, 100, 100_000_000)?;
        }
        if let Some(n) = d.history_bytes {
            config.history_bytes = ranged("defaults.history_bytes", n, 64 << 10, 4 << 30)? as usize;
        }
        if let Some(ms) = d.startup_timeout_ms {
            config.startup_timeout =
                Duration::from_millis(ranged("defaults.startup_timeout_ms", ms, 100, 600_000)?);
        }
        if let Some(ms) = d.startup_idle_ms {
            config.startup_idle =
                Duration::from_millis(ranged("defaults.startup_idle_ms", ms, 50, 600_000)?);
        }

        let e = self.environment;
        if let Some(allowlist) = e.allowlist {
            for (i, entry) in allowlist.iter().enumerate() {
                // `LC_*` style prefixes; a lone `*` passes the whole environment (the user asked).
                let ok = match entry.strip_suffix('*') {
                    Some(prefix) => prefix.is_empty() || is_env_name(prefix),
                    None => is_env_name(entry),
                };
                if !ok {
                    return Err(FileError::at(
                        format!("environment.allowlist[{i}]"),
                        format!("{entry:?} is neither a variable name nor a PREFIX* pattern"),
                    ));
                }
            }
            config.env_allowlist = allowlist;
        }
        if let Some(defaults) = e.defaults {
            for (name, value) in env_table("environment.defaults", defaults)? {
                match config.env_defaults.iter_mut().find(|(n, _)| *n == name) {
                    Some(slot) => slot.1 = value,
                    None => config.env_defaults.push((name, value)),
                }
            }
        }

        let mut defined: Vec<String> = Vec::new();
        for (index, t) in self.types.into_iter().enumerate() {
            let ty = terminal_type(index, t)?;
            if let Some(first) = defined.iter().position(|n| *n == ty.name) {
                return Err(FileError::at(
                    format!("types[{index}].name"),
                    format!("type {:?} is already defined by types[{first}]", ty.name),
                ));
            }
            defined.push(ty.name.clone());
            match config.types.iter_mut().find(|b| b.name == ty.name) {
                Some(builtin) => *builtin = ty,
                None => config.types.push(ty),
            }
        }
        Ok(())
    }
}
