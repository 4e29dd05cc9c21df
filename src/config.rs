//! The daemon's configuration: terminal types, limits, defaults, the session environment policy
//! and the workspace root. `Config::default()` is what the contract specifies; `Config::load`
//! reads the TOML config file over it (schema below, documented key by key in
//! `config.example.toml`) and rejects a bad file naming the file, the key and the reason.

pub(crate) mod daemon_env;
mod file;

use crate::marks::Integration;
use crate::validate::{ENV_NAME_RULE, is_env_name};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default history bound in lines (docs/api.md: at least 1 000 000). With the default
/// byte bound of 16 MiB, `seq 1 2000000` (about 13 MiB of text) is kept whole.
pub const DEFAULT_HISTORY_LINES: u64 = 4_000_000;
/// The history's byte bound unless configured.
pub const DEFAULT_HISTORY_BYTES: usize = 16 << 20;

/// A terminal type that `Open` can start.
#[derive(Debug, Clone, PartialEq)]
pub struct TerminalType {
    /// Name used in `OpenRequest.type`.
    pub name: String,
    /// Program and arguments (the program is looked up in the session's `PATH`).
    pub argv: Vec<String>,
    /// Which prompt-mark recipe applies.
    pub integration: Integration,
    /// bash and zsh: keep history expansion (`!`) on; off by default, so `!` is literal.
    pub history_expansion: bool,
    /// One line for people.
    pub description: String,
    /// Extra environment for this type, applied before the request's overrides.
    pub env: Vec<(String, String)>,
    /// The sandbox every session of this type runs in (`Open` may tighten it, never loosen it).
    pub sandbox: Option<crate::sandbox::SandboxRequest>,
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
    /// History bound per session, in lines: only a backstop (the byte bound decides for any
    /// output averaging 4 bytes a line or more), so that even a flood of empty lines, which
    /// costs its line offsets but no text bytes, stays bounded.
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
    /// Whether sends may run as background jobs (`run_in_background`); when false they are
    /// refused with FAILED_PRECONDITION.
    pub allow_background: bool,
    /// Grace period between the polite signal and the next one when closing.
    pub close_grace: Duration,
    /// How Close finds every process of a session: one cgroup v2 per session, a per-session
    /// subreaper, or `Auto` (cgroup when the daemon has a writable cgroup v2 subtree).
    pub process_tracking: crate::process::ProcessTracking,
    /// How long a session's helper keeps the session's processes once no daemon is attached,
    /// waiting for a new daemon to adopt them; then it ends them as Close would. Zero: forever.
    pub adoption_grace: Duration,
    /// Where the daemon keeps what a successor needs to adopt its sessions; `None`:
    /// `$XDG_STATE_HOME/ptyd` (else `~/.local/state/ptyd`).
    pub state_dir: Option<PathBuf>,
    /// Whether sessions are kept in the state directory for a successor to adopt. Not a file
    /// key: off only for the private daemon `ptyd mcp`/`ptyd acp` serve inside their own
    /// process when no daemon answers (its sessions end with it, and several may run at once).
    pub outlive_daemon: bool,
    /// What no sandboxed session may see, covered inside it: the daemon's socket, its state
    /// directory and its runtime directory (where the user's service manager and agents
    /// listen). Not a file key: `serve` fills it in.
    pub sandbox_hidden: Vec<PathBuf>,
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
            history_lines: DEFAULT_HISTORY_LINES,
            history_bytes: DEFAULT_HISTORY_BYTES,
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
            allow_background: true,
            close_grace: Duration::from_millis(500),
            process_tracking: crate::process::ProcessTracking::Auto,
            adoption_grace: Duration::from_millis(900_000),
            state_dir: None,
            outlive_daemon: true,
            sandbox_hidden: Vec::new(),
        }
    }
}

impl Config {
    /// The configuration from `path`, or from `$XDG_CONFIG_HOME/ptyd/config.toml` (else
    /// `~/.config/ptyd/config.toml`) when that exists, else the defaults. An explicit `path` that
    /// does not exist is an error; so is any file that does not parse or validate.
    pub fn load(path: Option<&Path>) -> crate::Result<Config> {
        match Config::file_to_load(path) {
            Some(file) => {
                let text = std::fs::read_to_string(&file).map_err(|e| {
                    crate::Error::invalid(format!("config file {}: {e}", file.display()))
                })?;
                Config::from_toml(&text, &file)
            }
            None => Ok(Config::default()),
        }
    }

    /// The file `load` reads: `explicit` when given, else the default path when a file exists
    /// there, else none (the built-in defaults apply).
    pub fn file_to_load(explicit: Option<&Path>) -> Option<PathBuf> {
        match explicit {
            Some(p) => Some(p.to_path_buf()),
            None => Config::default_path().filter(|p| p.exists()),
        }
    }

    /// `$XDG_CONFIG_HOME/ptyd/config.toml`, else `$HOME/.config/ptyd/config.toml` (XDG base
    /// directory rules: a relative `XDG_CONFIG_HOME` is ignored).
    pub fn default_path() -> Option<PathBuf> {
        default_path_from(
            std::env::var_os("XDG_CONFIG_HOME"),
            std::env::var_os("HOME"),
        )
    }

    /// The defaults with the config file's `text` applied; `file` is named in errors.
    pub fn from_toml(text: &str, file: &Path) -> crate::Result<Config> {
        let parsed = file::parse_file(text).map_err(|e| e.in_file(file))?;
        let mut config = Config::default();
        parsed.apply(&mut config).map_err(|e| e.in_file(file))?;
        Ok(config)
    }

    /// The type registered under `name`.
    pub fn find_type(&self, name: &str) -> Option<&TerminalType> {
        self.types.iter().find(|t| t.name == name)
    }

    /// A session's environment, built rather than inherited (docs/api.md): the names of
    /// `daemon_env` (the daemon's own environment) that `env_allowlist` lets through, then
    /// `env_defaults`, then `PTYD_SESSION_ID`, then the type's `env`, then the request's
    /// `overrides` (in name order); a later value replaces an earlier one of the same name.
    pub fn session_env(
        &self,
        session_id: &str,
        ty: &TerminalType,
        overrides: &std::collections::HashMap<String, String>,
        daemon_env: impl IntoIterator<Item = (String, String)>,
    ) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = daemon_env
            .into_iter()
            .filter(|(name, _)| self.allows(name))
            .collect();
        let mut set = |name: &str, value: &str| {
            env.retain(|(n, _)| n != name);
            env.push((name.to_owned(), value.to_owned()));
        };
        for (name, value) in &self.env_defaults {
            set(name, value);
        }
        set("PTYD_SESSION_ID", session_id);
        for (name, value) in &ty.env {
            set(name, value);
        }
        let mut names: Vec<&String> = overrides.keys().collect();
        names.sort();
        for name in names {
            set(name, &overrides[name]);
        }
        env
    }

    /// Whether the allowlist passes the daemon's variable `name` into sessions.
    fn allows(&self, name: &str) -> bool {
        self.env_allowlist
            .iter()
            .any(|allowed| match allowed.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == allowed,
            })
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
            history_expansion: false,
            description: what.to_owned(),
            env: Vec::new(),
            sandbox: None,
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

/// `default_path` over explicit values of `XDG_CONFIG_HOME` and `HOME`.
fn default_path_from(
    xdg_config_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    let absolute = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(xdg_config_home)
        .or_else(|| absolute(home).map(|home| home.join(".config")))
        .map(|dir| dir.join("ptyd").join("config.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> crate::Result<Config> {
        Config::from_toml(text, Path::new("/etc/x/config.toml"))
    }

    /// The error message for `text`; panics when it loads.
    fn error_of(text: &str) -> String {
        match load_text(text) {
            Ok(_) => panic!("expected {text:?} to be rejected"),
            Err(e) => e.to_string(),
        }
    }

    #[track_caller]
    fn assert_rejected(text: &str, key: &str, reason: &str) {
        let message = error_of(text);
        assert!(
            message.starts_with("config file /etc/x/config.toml"),
            "names the file: {message}"
        );
        assert!(
            message.contains(&format!("key `{key}`")),
            "names the key {key}: {message}"
        );
        assert!(message.contains(reason), "says {reason:?}: {message}");
        assert!(!message.contains('\n'), "one line: {message:?}");
    }

    /// The fields a file can set, for comparing whole configurations.
    fn settings(c: &Config) -> String {
        format!(
            "{:?} {:?} {} {} {} {} {:?} {:?} {:?} {:?} {:?} {} {:?} {:?} {:?} {:?}",
            c.types,
            c.limits,
            c.cols,
            c.rows,
            c.history_lines,
            c.history_bytes,
            c.startup_timeout,
            c.startup_idle,
            c.env_allowlist,
            c.env_defaults,
            c.workspace_root,
            c.allow_root,
            c.close_grace,
            c.process_tracking,
            c.adoption_grace,
            c.state_dir
        )
    }

    #[test]
    fn the_session_environment_is_built_in_order() {
        let config = load_text(
            "[environment]\nallowlist = [\"PATH\", \"LC_*\"]\ndefaults = { PAGER = \"less\" }\n",
        )
        .expect("loads");
        let daemon = [
            ("PATH", "/bin"),
            ("LC_ALL", "C"),
            ("SECRET_TOKEN", "s3cret"),
            ("PAGER", "more"),
            ("LCX", "no"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let mut ty = config.find_type("python").unwrap().clone();
        ty.env = vec![
            ("PYTHONUNBUFFERED".into(), "1".into()),
            ("PAGER".into(), "ty".into()),
        ];
        let overrides = [("PAGER", "req"), ("PTYD_SESSION_ID", "t99"), ("A", "a")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into_iter()
            .collect();
        let env = config.session_env("t7", &ty, &overrides, daemon);
        let value = |name: &str| env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        let table = [
            ("PATH", Some("/bin")),           // allowlisted
            ("LC_ALL", Some("C")),            // allowlisted by prefix
            ("SECRET_TOKEN", None),           // not allowlisted
            ("LCX", None),                    // the prefix is LC_, not LC
            ("TERM", Some("xterm-256color")), // a built-in default
            ("PAGER", Some("req")),           // daemon < default < type < request
            ("PYTHONUNBUFFERED", Some("1")),
            ("PTYD_SESSION_ID", Some("t99")), // the request has the last word
            ("A", Some("a")),
        ];
        for (name, expected) in table {
            assert_eq!(value(name), expected, "{name}");
        }
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "each name once: {names:?}");
    }

    #[test]
    fn an_empty_file_is_the_defaults() {
        let config = load_text("").expect("an empty file loads");
        assert_eq!(settings(&config), settings(&Config::default()));
    }

    #[test]
    fn the_example_file_parses_and_states_the_defaults() {
        let config =
            load_text(include_str!("../config.example.toml")).expect("config.example.toml loads");
        assert_eq!(
            settings(&config),
            settings(&Config::default()),
            "every value in config.example.toml must be the default it documents"
        );
    }

    #[test]
    fn the_example_types_are_valid_when_uncommented() {
        let example = include_str!("../config.example.toml");
        let start = example.find("# [[types]]").expect("the example has types");
        let uncommented: String = example[start..]
            .lines()
            .map(|l| l.strip_prefix("# ").unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let config = load_text(&uncommented).expect("the commented type examples load");
        assert!(config.find_type("py").is_some());
        assert_eq!(config.find_type("shell").unwrap().argv, ["/bin/zsh"]);
    }

    #[test]
    fn every_key_is_applied() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            r#"
workspace_root = "{}"
allow_root = true
allow_background = false
close_grace_ms = 250
adoption_grace_ms = 0
state_dir = "/var/tmp/ptyd-state"
process_tracking = "subreaper"
[limits]
sessions_per_agent = 2
sessions_total = 3
jobs_per_agent = 4
[defaults]
cols = 80
rows = 24
history_lines = 1000
history_bytes = 1048576
startup_timeout_ms = 2000
startup_idle_ms = 300
[environment]
allowlist = ["PATH", "XDG_*"]
defaults = {{ PAGER = "less", EDITOR = "true" }}
"#,
            dir.path().display()
        );
        let c = load_text(&text).expect("loads");
        assert_eq!(c.workspace_root, dir.path());
        assert!(c.allow_root);
        assert!(!c.allow_background);
        assert_eq!(c.close_grace, Duration::from_millis(250));
        assert_eq!(c.adoption_grace, Duration::ZERO);
        assert_eq!(
            c.state_dir.as_deref(),
            Some(Path::new("/var/tmp/ptyd-state"))
        );
        assert_eq!(
            c.process_tracking,
            crate::process::ProcessTracking::Subreaper
        );
        assert_eq!(
            (
                c.limits.sessions_per_agent,
                c.limits.sessions_total,
                c.limits.jobs_per_agent
            ),
            (2, 3, 4)
        );
        assert_eq!((c.cols, c.rows), (80, 24));
        assert_eq!((c.history_lines, c.history_bytes), (1000, 1 << 20));
        assert_eq!(c.startup_timeout, Duration::from_secs(2));
        assert_eq!(c.startup_idle, Duration::from_millis(300));
        assert_eq!(c.env_allowlist, ["PATH", "XDG_*"]);
        let default = |name: &str| {
            c.env_defaults
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(default("PAGER"), Some("less"), "replaced by name");
        assert_eq!(default("EDITOR"), Some("true"), "added");
        assert_eq!(default("GIT_PAGER"), Some("cat"), "the others are kept");
    }

    #[test]
    fn a_new_type_is_added_after_the_builtins() {
        let c = load_text(
            r#"
[[types]]
name = "py"
argv = ["python3", "-q"]
integration = "none"
description = "python"
env = { PYTHONUNBUFFERED = "1" }
"#,
        )
        .expect("loads");
        let builtin = Config::default().types.len();
        assert_eq!(c.types.len(), builtin + 1);
        let py = c.types.last().unwrap();
        assert_eq!(py.name, "py");
        assert_eq!(py.argv, ["python3", "-q"]);
        assert_eq!(py.integration, Integration::None);
        assert_eq!(py.description, "python");
        assert_eq!(py.env, [("PYTHONUNBUFFERED".into(), "1".into())]);
    }

    #[test]
    fn history_expansion_is_off_unless_a_type_turns_it_on() {
        let c = load_text(
            "[[types]]\nname = \"b\"\nargv = [\"bash\"]\nintegration = \"bash\"\n\
             history_expansion = true\n\
             [[types]]\nname = \"z\"\nargv = [\"zsh\"]\nintegration = \"zsh\"\n",
        )
        .expect("loads");
        let on = |name: &str| c.find_type(name).unwrap().history_expansion;
        assert!(on("b"));
        assert!(!on("z"));
        assert!(Config::default().types.iter().all(|t| !t.history_expansion));
    }

    #[test]
    fn a_type_with_a_builtin_name_replaces_it_in_place() {
        let c = load_text(
            r#"
[[types]]
name = "python"
argv = ["python3", "-I"]
"#,
        )
        .expect("loads");
        let defaults = Config::default();
        assert_eq!(c.types.len(), defaults.types.len());
        let at = defaults
            .types
            .iter()
            .position(|t| t.name == "python")
            .unwrap();
        assert_eq!(c.types[at].argv, ["python3", "-I"]);
        assert_eq!(
            c.types[at].integration,
            Integration::None,
            "integration defaults to none"
        );
    }

    #[test]
    fn unknown_keys_are_rejected_with_their_path_and_line() {
        assert_rejected(
            "[limits]\nsesions_total = 3\n",
            "limits.sesions_total",
            "unknown field `sesions_total`",
        );
        assert!(error_of("[limits]\nsesions_total = 3\n").contains(", line 2:"));
        assert_rejected("colour = true\n", "colour", "unknown field");
        assert_rejected(
            "[[types]]\nname = \"x\"\nargv = [\"x\"]\ncolor = 1\n",
            "types[0].color",
            "unknown field",
        );
    }

    #[test]
    fn wrong_types_and_ranges_name_the_key() {
        assert_rejected(
            "[defaults]\ncols = \"wide\"\n",
            "defaults.cols",
            "invalid type",
        );
        assert_rejected(
            "[defaults]\ncols = 5000\n",
            "defaults.cols",
            "between 20 and 1000, got 5000",
        );
        assert_rejected(
            "[defaults]\nrows = 1\n",
            "defaults.rows",
            "between 5 and 1000",
        );
        assert_rejected(
            "[limits]\nsessions_total = 0\n",
            "limits.sessions_total",
            "between 1",
        );
        assert_rejected(
            "[limits]\nsessions_per_agent = 10\nsessions_total = 5\n",
            "limits.sessions_per_agent",
            "must not exceed",
        );
        assert_rejected(
            "[defaults]\nstartup_timeout_ms = -1\n",
            "defaults.startup_timeout_ms",
            "-1",
        );
        assert_rejected("close_grace_ms = 600000\n", "close_grace_ms", "between 0");
        assert_rejected(
            "adoption_grace_ms = 604800001\n",
            "adoption_grace_ms",
            "between 0",
        );
        assert_rejected("state_dir = \"relative\"\n", "state_dir", "absolute");
        assert_rejected("allow_root = \"yes\"\n", "allow_root", "invalid type");
        assert_rejected(
            "process_tracking = \"pids\"\n",
            "process_tracking",
            "must be one of auto, cgroup, subreaper",
        );
    }

    #[test]
    fn bad_types_name_the_entry_and_field() {
        let ty = |body: &str| format!("[[types]]\n{body}\n");
        assert_rejected(
            &ty("name = \"py\"\nargv = [\"python3\"]\nintegration = \"bsh\""),
            "types[0].integration",
            "must be one of bash, zsh, fish, none",
        );
        assert_rejected(
            &ty("name = \"py\"\nargv = [\"python3\"]\nhistory_expansion = true"),
            "types[0].history_expansion",
            "bash and zsh integrations only; this type's integration is none",
        );
        assert_rejected(
            &ty("name = \"py\"\nargv = []"),
            "types[0].argv",
            "must name a program",
        );
        assert_rejected(
            &ty("name = \"py\"\nargv = [\"\"]"),
            "types[0].argv",
            "empty",
        );
        assert_rejected(&ty("argv = [\"x\"]"), "types[0]", "missing field `name`");
        assert_rejected(
            &ty("name = \"a b\"\nargv = [\"x\"]"),
            "types[0].name",
            "must be 1 to 64",
        );
        assert_rejected(
            &ty("name = \"x\"\nargv = [\"x\"]\nenv = { \"A=B\" = \"1\" }"),
            "types[0].env",
            "not an environment variable name",
        );
        assert_rejected(
            &format!(
                "{}{}",
                ty("name = \"x\"\nargv = [\"x\"]"),
                ty("name = \"x\"\nargv = [\"y\"]")
            ),
            "types[1].name",
            "already defined by types[0]",
        );
    }

    #[test]
    fn a_types_sandbox_is_read_and_checked_key_by_key() {
        let ty = |sandbox: &str| {
            format!("[[types]]\nname = \"c\"\nargv = [\"bash\"]\nsandbox = {{ {sandbox} }}\n")
        };
        let config = load_text(&ty(
            "write = [\"$CWD\", \"/tmp\"], read = [], network = \"loopback\", \
             memory_max = \"2G\", pids_max = 512, cpu_max = 150",
        ))
        .unwrap();
        let sandbox = config.find_type("c").unwrap().sandbox.clone().unwrap();
        assert_eq!(
            sandbox,
            crate::sandbox::SandboxRequest {
                write: Some(vec!["$CWD".into(), "/tmp".into()]),
                read: Some(vec![]),
                network: Some(crate::sandbox::Network::Loopback),
                memory_max: Some(2 << 30),
                pids_max: Some(512),
                cpu_max: Some(150),
            }
        );
        for (body, key, reason) in [
            (
                "network = \"wifi\"",
                "types[0].sandbox.network",
                "on, loopback or off",
            ),
            (
                "memory_max = \"lots\"",
                "types[0].sandbox.memory_max",
                "byte count",
            ),
            (
                "memory_max = true",
                "types[0].sandbox.memory_max",
                "string or a number",
            ),
            ("cpu_max = \"0%\"", "types[0].sandbox.cpu_max", "from 1%"),
            ("pids_max = 0", "types[0].sandbox.pids_max", "at least 1"),
            ("write = [\"rel\"]", "types[0].sandbox.write[0]", "absolute"),
            (
                "read = [\"$USER/x\"]",
                "types[0].sandbox.read[0]",
                "only $CWD, $HOME",
            ),
            (
                "seccomp = true",
                "types[0].sandbox.seccomp",
                "unknown field `seccomp`",
            ),
        ] {
            assert_rejected(&ty(body), key, reason);
        }
    }

    #[test]
    fn bad_environment_and_workspace_are_rejected() {
        assert_rejected(
            "[environment]\nallowlist = [\"PATH\", \"LC *\"]\n",
            "environment.allowlist[1]",
            "PREFIX*",
        );
        assert_rejected(
            "[environment.defaults]\n\"1X\" = \"y\"\n",
            "environment.defaults",
            "not an environment variable name",
        );
        assert_rejected(
            "workspace_root = \"relative/dir\"\n",
            "workspace_root",
            "absolute",
        );
        assert_rejected(
            "workspace_root = \"/nonexistent/ptyd-workspace\"\n",
            "workspace_root",
            "not an existing directory",
        );
    }

    #[test]
    fn a_syntax_error_names_the_line() {
        let message = error_of("[limits]\nsessions_total = \n");
        assert!(
            message.starts_with("config file /etc/x/config.toml, line 2: invalid TOML"),
            "{message}"
        );
    }

    #[test]
    fn the_default_path_follows_xdg() {
        let path = |xdg: Option<&str>, home: Option<&str>| {
            default_path_from(xdg.map(Into::into), home.map(Into::into))
        };
        assert_eq!(
            path(Some("/cfg"), Some("/home/u")),
            Some(PathBuf::from("/cfg/ptyd/config.toml"))
        );
        assert_eq!(
            path(None, Some("/home/u")),
            Some(PathBuf::from("/home/u/.config/ptyd/config.toml"))
        );
        assert_eq!(
            path(Some("relative"), Some("/home/u")),
            Some(PathBuf::from("/home/u/.config/ptyd/config.toml")),
            "a relative XDG_CONFIG_HOME is ignored"
        );
        assert_eq!(path(None, None), None);
    }

    #[test]
    fn an_explicit_missing_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.toml");
        let message = Config::load(Some(&missing))
            .expect_err("a missing --config file is an error")
            .to_string();
        assert!(
            message.contains(&missing.display().to_string()),
            "{message}"
        );
    }

    #[test]
    fn an_explicit_file_is_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, "[defaults]\ncols = 100\n").unwrap();
        assert_eq!(Config::load(Some(&file)).expect("loads").cols, 100);
    }
}
