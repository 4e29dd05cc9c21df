//! The daemon's configuration: terminal types, limits, defaults, the session environment policy
//! and the workspace root. `Config::default()` is what the contract specifies.

use crate::marks::Integration;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A terminal type that `Open` can start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalType {
    /// Name used in `OpenRequest.type`.
    pub name: String,
    /// Program and arguments (the program is looked up in the session's `PATH`).
    pub argv: Vec<String>,
    /// Which prompt-mark recipe applies.
    pub integration: Integration,
    /// One line for people.
    pub description: String,
    /// Extra environment for this type, applied before the request's overrides.
    pub env: Vec<(String, String)>,
}

/// Limits on what agents may hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Live sessions one agent may hold.
    pub sessions_per_agent: usize,
    /// Live sessions in the whole daemon.
    pub sessions_total: usize,
    /// Jobs retained per agent (the oldest finished ones are dropped first).
    pub jobs_per_agent: usize,
}

/// The daemon's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Registered terminal types, in the order `Types` lists them.
    pub types: Vec<TerminalType>,
    /// Session and job limits.
    pub limits: Limits,
    /// Default terminal width.
    pub cols: u16,
    /// Default terminal height.
    pub rows: u16,
    /// History bound per session, in lines.
    pub history_lines: u64,
    /// History bound per session, in bytes of text.
    pub history_bytes: usize,
    /// How long `Open` waits for a session to become ready.
    pub startup_timeout: Duration,
    /// Output silence after which a starting session counts as ready.
    pub startup_idle: Duration,
    /// Names copied from the daemon's environment into sessions (`LC_*` style prefixes allowed).
    pub env_allowlist: Vec<String>,
    /// Non-interactive defaults set after the allowlist.
    pub env_defaults: Vec<(String, String)>,
    /// Where relative `cwd`s resolve and where sessions start by default.
    pub workspace_root: PathBuf,
    /// Whether root may connect to a daemon run by another user.
    pub allow_root: bool,
    /// Grace period between the polite signal and the next one when closing.
    pub close_grace: Duration,
}

impl Default for Config {
    fn default() -> Config {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| "/".into());
        Config {
            types: builtin_types(),
            limits: Limits {
                sessions_per_agent: 32,
                sessions_total: 256,
                jobs_per_agent: 64,
            },
            cols: 120,
            rows: 40,
            history_lines: 100_000,
            history_bytes: 16 << 20,
            startup_timeout: Duration::from_secs(10),
            startup_idle: Duration::from_millis(1500),
            env_allowlist: [
                "HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "LC_*", "TZ",
            ]
            .map(String::from)
            .to_vec(),
            env_defaults: [
                ("TERM", "xterm-256color"),
                ("PAGER", "cat"),
                ("GIT_PAGER", "cat"),
                ("MANPAGER", "cat"),
                ("GIT_TERMINAL_PROMPT", "0"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .to_vec(),
            workspace_root: home,
            allow_root: false,
            close_grace: Duration::from_millis(500),
        }
    }
}

impl Config {
    /// The configuration from `path`, or from `$XDG_CONFIG_HOME/ptyd/config.toml` (else
    /// `~/.config/ptyd/config.toml`) when that exists, else the defaults.
    pub fn load(path: Option<&Path>) -> crate::Result<Config> {
        match path {
            Some(p) if !p.exists() => Err(crate::Error::invalid(format!(
                "config file {} does not exist",
                p.display()
            ))),
            _ => Ok(Config::default()),
        }
    }

    /// The type registered under `name`.
    pub fn find_type(&self, name: &str) -> Option<&TerminalType> {
        self.types.iter().find(|t| t.name == name)
    }

    /// The names of all registered types, for error messages.
    pub fn type_names(&self) -> String {
        self.types
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `shell` (the login shell when it is bash, zsh or fish, else bash), each of `bash`, `zsh`,
/// `fish` that is installed, and `python` (the python3 REPL).
fn builtin_types() -> Vec<TerminalType> {
    let shell_type =
        |name: &str, program: &str, integration: Integration, what: &str| TerminalType {
            name: name.to_owned(),
            argv: vec![program.to_owned()],
            integration,
            description: what.to_owned(),
            env: Vec::new(),
        };
    let mut types = Vec::new();
    let login = std::env::var("SHELL").unwrap_or_default();
    let login_name = Path::new(&login)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let (program, integration) = match Integration::from_name(login_name) {
        Some(i) if i != Integration::None && find_program(&login).is_some() => (login.clone(), i),
        _ => (
            find_program("bash").unwrap_or_else(|| "bash".into()),
            Integration::Bash,
        ),
    };
    types.push(shell_type(
        "shell",
        &program,
        integration,
        "the user's login shell",
    ));
    for (name, integration) in [
        ("bash", Integration::Bash),
        ("zsh", Integration::Zsh),
        ("fish", Integration::Fish),
    ] {
        if let Some(path) = find_program(name) {
            types.push(shell_type(
                name,
                &path,
                integration,
                &format!("{name} with prompt marks"),
            ));
        }
    }
    let mut python = shell_type("python", "python3", Integration::None, "the python3 REPL");
    python.argv.push("-q".to_owned());
    types.push(python);
    types
}

/// The absolute path of `program` in the daemon's `PATH` (or itself when it has a slash).
pub fn find_program(program: &str) -> Option<String> {
    if program.contains('/') {
        return is_executable(Path::new(program)).then(|| program.to_owned());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .map(|p| p.display().to_string())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
