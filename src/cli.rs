//! The `ptyd` command line: `serve` runs the daemon; the client verbs call one RPC each and print
//! its `rendered` text (or, with `--json`, the typed response as `pb` serializes it); `completions`
//! prints a shell completion script. Failures print one line, `error: CODE: message`, and exit 2.

mod attach;

use crate::client;
use crate::pb;
use clap::{Args, Parser, Subcommand};
use serde_json::Value;
use std::path::PathBuf;

/// Persistent PTY sessions for AI agents.
#[derive(Debug, Parser)]
#[command(name = "ptyd", version, about, long_about = None, after_help = AFTER_HELP)]
pub struct Cli {
    /// Options shared by every verb.
    #[command(flatten)]
    pub global: Global,
    /// What to do.
    #[command(subcommand)]
    pub command: Verb,
}

/// Examples and exit status, shown under `ptyd --help`.
const AFTER_HELP: &str = "\
Examples:
  ptyd serve                      run the daemon (or: systemctl --user enable --now ptyd.socket)
  ptyd open --name main           open a session; prints its id (t1)
  ptyd send t1 'cargo test'       type a command, wait for the result
  ptyd read t1 --count 50         page the session's history
  ptyd close t1                   end the session and all of its processes
  ptyd completions bash > ~/.local/share/bash-completion/completions/ptyd

Exit status: 0 on success; `send` exits with the command's exit code when the shell reported one;
2 when the request failed (printed as `error: CODE: message`).
Run `ptyd <COMMAND> --help` for each command's options and an example.";

/// Options every verb takes.
#[derive(Debug, Args)]
pub struct Global {
    /// Daemon socket [default: $XDG_RUNTIME_DIR/ptyd/ptyd.sock, else /tmp/ptyd-$UID/ptyd.sock]
    #[arg(long, global = true, env = "PTYD_SOCKET")]
    pub socket: Option<PathBuf>,
    /// Agent id that owns the sessions
    #[arg(long, global = true, env = "PTYD_AGENT", default_value = "cli")]
    pub agent: String,
    /// Print the typed response as JSON instead of the rendered text
    #[arg(long, global = true)]
    pub json: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Run the daemon in the foreground.
    ///
    /// Example: ptyd serve
    Serve {
        /// Config file [default: $XDG_CONFIG_HOME/ptyd/config.toml when it exists]
        #[arg(long)]
        config: Option<PathBuf>,
        /// Validate the config file and exit without serving
        #[arg(long)]
        check_config: bool,
        /// Also serve on this TCP address, such as 127.0.0.1:7878 (needs --token-file)
        #[arg(long, value_name = "ADDR", requires = "token_file")]
        listen_tcp: Option<std::net::SocketAddr>,
        /// File (mode 0600) holding the token TCP clients send as `authorization: Bearer
        /// <token>` (only with --listen-tcp)
        #[arg(long, value_name = "PATH", requires = "listen_tcp")]
        token_file: Option<PathBuf>,
        /// Also serve the web page here, such as 127.0.0.1:7879 (needs --web-token-file): every
        /// agent's sessions, live, and a keyboard for a person
        #[arg(long, value_name = "ADDR", requires = "web_token_file")]
        web: Option<std::net::SocketAddr>,
        /// File (mode 0600) holding the web page's token (only with --web)
        #[arg(long, value_name = "PATH", requires = "web")]
        web_token_file: Option<PathBuf>,
        /// How Close finds every process of a session: auto, cgroup or subreaper [default:
        /// the config file's, else auto]
        #[arg(long, value_name = "MODE")]
        process_tracking: Option<crate::process::ProcessTracking>,
    },
    /// After the systemd unit stopped: end the sessions it left, unless the daemon crashed.
    ///
    /// Example: ptyd stop-post   (the unit's ExecStopPost= runs it; it reads $SERVICE_RESULT)
    ///
    /// A stop that was asked for (SERVICE_RESULT=success or timeout) ends every process left in
    /// the unit's cgroup; after a crash the sessions stay for the restarted daemon to adopt.
    StopPost,
    /// Run the ACP agent shim on stdio (for Zed and other ACP editors).
    ///
    /// Example: ptyd acp --type shell
    Acp(crate::acp::AcpOptions),
    /// Run the MCP server on stdio, or streamable HTTP with --listen (for MCP agents).
    ///
    /// Example: ptyd mcp --agent-id claude   (Claude Code: claude mcp add ptyd -- ptyd mcp)
    Mcp(crate::mcp::McpOptions),
    /// Open a terminal session.
    ///
    /// Example: ptyd open --name main --cwd ~/src/project
    Open {
        /// Terminal type (see `ptyd types`)
        #[arg(long = "type", default_value = "shell")]
        type_name: String,
        /// Display name
        #[arg(long, default_value = "", hide_default_value = true)]
        name: String,
        /// Working directory, absolute or relative to the workspace root [default: the workspace
        /// root]
        #[arg(long, default_value = "", hide_default_value = true)]
        cwd: String,
        /// Environment override NAME=VALUE (repeatable)
        #[arg(long = "env", value_parser = parse_env)]
        env: Vec<(String, String)>,
        /// Columns (20..=1000) [default: the daemon's, 120]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        cols: u32,
        /// Rows (5..=1000) [default: the daemon's, 40]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        rows: u32,
        /// Sandbox the session, one KEY=VALUE each (repeatable): write=PATH, read=PATH,
        /// network=on|loopback|off, memory_max=512M, pids_max=N, cpu_max=50%
        #[arg(long = "sandbox", value_name = "KEY=VALUE", value_parser = crate::sandbox::check_flag)]
        sandbox: Vec<String>,
    },
    /// Type text into a session and wait for the result.
    ///
    /// Example: ptyd send t1 'cargo test'
    ///
    /// Exit status: the command's exit code when one is known (an integrated shell's wait ended
    /// at the prompt, or the session exited with a code); 0 when none is (inferred_idle,
    /// stdin_read, timeout, a background job, a type without integration); 2 when the request
    /// failed.
    Send {
        /// Session id (t1)
        session: String,
        /// Text to type; Enter follows unless --no-submit (keys alone, without text, press just
        /// the keys)
        #[arg(default_value = "", hide_default_value = true)]
        text: String,
        /// Do not press Enter after the text
        #[arg(long)]
        no_submit: bool,
        /// Named key sent after the text (repeatable): Enter, Tab, Escape, Up, C-c, F1, ...
        #[arg(long = "key")]
        keys: Vec<String>,
        /// Run as a background job: print its id and its first output (see
        /// --background-wait-ms)
        #[arg(long)]
        background: bool,
        /// With --background: wait up to this long for the job's first complete line or its end
        /// (0..=10000) [default: 1000]
        #[arg(long, requires = "background")]
        background_wait_ms: Option<u32>,
        /// While a command still runs, write the text once the shell is back at its prompt
        /// instead of refusing it
        #[arg(long)]
        typeahead: bool,
        /// Overall wait deadline in milliseconds (1..=600000) [default: 30000]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        timeout_ms: u32,
        /// Output silence that ends the wait, in milliseconds (50..=600000) [default: 5000]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        idle_ms: u32,
        /// Cap on the result in bytes (64..=16777216) [default: the daemon's]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        max_result_bytes: u32,
    },
    /// Page a session's history, or show its screen.
    ///
    /// Example: ptyd read t1 --count 50
    Read {
        /// Session id
        session: String,
        /// Lines back from the newest
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Lines in the page (1..=10000) [default: 500]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        count: u32,
        /// Absolute first line (overrides --offset)
        #[arg(long)]
        from_line: Option<u64>,
        /// Show the visible screen instead of history
        #[arg(long)]
        screen: bool,
        /// One command's output: its id (from `ptyd history`) or `last`
        #[arg(long, value_name = "ID")]
        command: Option<String>,
        /// Cap on the result in bytes [default: the daemon's]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        max_result_bytes: u32,
    },
    /// List the commands the session's shell ran, newest last.
    ///
    /// Example: ptyd history t1 --count 20
    History {
        /// Session id
        session: String,
        /// Records back from the newest
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Records in the page (1..=10000) [default: 100]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        count: u32,
        /// Cap on the result in bytes [default: the daemon's]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        max_result_bytes: u32,
    },
    /// Search the session's history and screen for a regular expression, like grep -n.
    ///
    /// Example: ptyd grep t1 'error\[E[0-9]+\]' --context 2
    Grep {
        /// Session id
        session: String,
        /// A regular expression (Rust regex syntax)
        pattern: String,
        /// Ignore case
        #[arg(short = 'i', long)]
        ignore_case: bool,
        /// Only this command's output: its id or `last`
        #[arg(long, value_name = "ID")]
        command: Option<String>,
        /// Only lines from this number on
        #[arg(long)]
        from_line: Option<u64>,
        /// Matches kept, the newest (1..=10000) [default: 100]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        max_matches: u32,
        /// Lines shown around each match (0..=100)
        #[arg(short = 'C', long, default_value_t = 0)]
        context: u32,
        /// Cap on the result in bytes [default: the daemon's]
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        max_result_bytes: u32,
    },
    /// Send a signal to the session's foreground process group.
    ///
    /// Example: ptyd signal t1 INT
    Signal {
        /// Session id
        session: String,
        /// INT, TERM, KILL, TSTP or HUP
        signal: String,
    },
    /// Close a session and end all of its processes.
    ///
    /// Example: ptyd close t1
    Close {
        /// Session id
        session: String,
    },
    /// List your sessions.
    ///
    /// Example: ptyd list
    List,
    /// Follow a session's raw output live.
    ///
    /// Example: ptyd watch t1 --replay-lines 20
    Watch {
        /// Session id
        session: String,
        /// History lines shown first
        #[arg(long, default_value_t = 0)]
        replay_lines: u32,
    },
    /// Take a session's keyboard: your keys go to it, its screen comes to you; Ctrl-] detaches.
    ///
    /// While you are attached the agent's sends with input are refused; its next result says
    /// that a person typed. Example: ptyd attach t1 --agent claude
    Attach {
        /// Session id
        session: String,
    },
    /// New output of a background job.
    ///
    /// Example: ptyd job-output j1 --wait-ms 5000
    JobOutput {
        /// Job id (j1)
        job: String,
        /// Wait this long for new output or the end
        #[arg(long, default_value_t = 0)]
        wait_ms: u32,
    },
    /// Interrupt a background job.
    ///
    /// Example: ptyd job-kill j1
    JobKill {
        /// Job id
        job: String,
    },
    /// List the terminal types.
    ///
    /// Example: ptyd types
    Types,
    /// Print a one-time link to the web page (`ptyd serve --web`), valid once for 5 minutes.
    ///
    /// Example: ptyd web-link t1   (opens on session t1 of --agent's sessions)
    WebLink {
        /// Session the page opens on [default: the page's list]
        session: Option<String>,
    },
    /// Print a shell completion script.
    ///
    /// Example: ptyd completions bash > ~/.local/share/bash-completion/completions/ptyd
    ///
    /// zsh: ptyd completions zsh > ~/.zfunc/_ptyd (with ~/.zfunc in fpath); fish: ptyd
    /// completions fish > ~/.config/fish/completions/ptyd.fish.
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
}

/// The command line's definition: `Cli`'s, except that `ptyd mcp` and `ptyd acp`, which name
/// their agent with `--agent-id` and print no JSON, neither list the client verbs' `--agent` and
/// `--json` in their help nor take them.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    Cli::command()
        .mut_subcommand("mcp", without_client_options)
        .mut_subcommand("acp", without_client_options)
}

/// Parses the process's arguments (exits with clap's message on a bad one).
pub fn parse() -> Cli {
    use clap::FromArgMatches;
    let matches = command().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Shadows the global `--agent` and `--json` in a front-end's subcommand with hidden options
/// that refuse any use, saying what to use instead (a global option is not copied into a
/// subcommand that has one of its name).
fn without_client_options(command: clap::Command) -> clap::Command {
    let refused = |name: &'static str, instead: &'static str| {
        clap::Arg::new(name)
            .long(name)
            .hide(true)
            .num_args(0..=1)
            .default_missing_value("")
            .value_parser(move |_: &str| -> Result<String, String> {
                Err(format!("this command does not take --{name}{instead}"))
            })
    };
    command
        .arg(refused("agent", "; name the agent with --agent-id"))
        .arg(refused("json", ""))
}

/// The completion script for `shell` (generated into memory: clap_complete panics when its
/// writer fails, and stdout may be a closed pipe).
pub fn completion_script(shell: clap_complete::Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command(), "ptyd", &mut script);
    script
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected NAME=VALUE, got {s:?}"))
}

/// Runs a client verb; returns the process exit status.
pub async fn run_client(global: &Global, verb: Verb) -> Result<i32, CliError> {
    let socket = global
        .socket
        .clone()
        .unwrap_or_else(crate::server::default_socket_path);
    let mut c = client::connect(&socket).await.map_err(|e| {
        format!(
            "UNAVAILABLE: cannot reach ptyd at {}: {}; is the daemon running? (`ptyd serve`, \
             or `systemctl --user start ptyd.socket`)",
            socket.display(),
            root_cause(&e)
        )
    })?;
    let agent_id = global.agent.clone();
    let (rendered, typed, status): (String, Value, i32) = match verb {
        Verb::Serve { .. }
        | Verb::Acp(_)
        | Verb::Mcp(_)
        | Verb::StopPost
        | Verb::Completions { .. } => {
            return Err(CliError(
                "serve, acp, mcp, stop-post and completions are not client verbs".into(),
            ));
        }
        Verb::Open {
            type_name,
            name,
            cwd,
            env,
            cols,
            rows,
            sandbox,
        } => {
            let r = c
                .open(pb::OpenRequest {
                    agent_id,
                    r#type: type_name,
                    name,
                    cwd,
                    env: env.into_iter().collect(),
                    cols,
                    rows,
                    max_result_bytes: 0,
                    sandbox: pb::sandbox::from_flags(&sandbox).map_err(CliError)?,
                })
                .await?
                .into_inner();
            (r.rendered.clone(), as_json(&r)?, 0)
        }
        Verb::Send {
            session,
            text,
            no_submit,
            keys,
            background,
            typeahead,
            timeout_ms,
            idle_ms,
            max_result_bytes,
            background_wait_ms,
        } => {
            let r = c
                .send(pb::SendRequest {
                    agent_id,
                    session_id: session,
                    text,
                    // Unset leaves the contract's default: Enter after text, none after keys alone.
                    submit: no_submit.then_some(false),
                    keys,
                    run_in_background: background,
                    typeahead,
                    timeout_ms,
                    idle_ms,
                    max_result_bytes,
                    background_wait_ms,
                })
                .await?
                .into_inner();
            let status = match &r.result {
                Some(pb::send_response::Result::Foreground(f)) => {
                    f.exit_code.unwrap_or(0).clamp(0, 255)
                }
                _ => 0,
            };
            (r.rendered.clone(), as_json(&r)?, status)
        }
        Verb::Read {
            session,
            offset,
            count,
            from_line,
            screen,
            command,
            max_result_bytes,
        } => {
            let r = c
                .read(pb::ReadRequest {
                    agent_id,
                    session_id: session,
                    offset,
                    count,
                    from_line,
                    screen,
                    max_result_bytes,
                    command_id: command.unwrap_or_default(),
                })
                .await?
                .into_inner();
            (r.rendered.clone(), as_json(&r)?, 0)
        }
        Verb::History {
            session,
            offset,
            count,
            max_result_bytes,
        } => {
            let r = c
                .commands(pb::CommandsRequest {
                    agent_id,
                    session_id: session,
                    offset,
                    count,
                    max_result_bytes,
                })
                .await?
                .into_inner();
            (r.rendered.clone(), as_json(&r)?, 0)
        }
        Verb::Grep {
            session,
            pattern,
            ignore_case,
            command,
            from_line,
            max_matches,
            context,
            max_result_bytes,
        } => {
            let r = c
                .search(pb::SearchRequest {
                    agent_id,
                    session_id: session,
                    pattern,
                    ignore_case,
                    command_id: command.unwrap_or_default(),
                    from_line,
                    max_matches,
                    context,
                    max_result_bytes,
                })
                .await?
                .into_inner();
            // As grep: 1 when nothing matched.
            let status = i32::from(r.total_matches == 0);
            (r.rendered.clone(), as_json(&r)?, status)
        }
        Verb::Signal { session, signal } => {
            let r = c
                .signal(pb::SignalRequest {
                    agent_id,
                    session_id: session,
                    signal,
                })
                .await?
                .into_inner();
            (r.rendered.clone(), as_json(&r)?, 0)
        }
        Verb::Close { session } => {
            let r = c
                .close(pb::CloseRequest {
                    agent_id,
                    session_id: session,
                })
                .await?
                .into_inner();
            (r.rendered.clone(), as_json(&r)?, 0)
        }
        Verb::List => {
            let r = c.list(pb::ListRequest { agent_id }).await?.into_inner();
            (r.rendered.clone(), as_json(&r)?, 0)
        }
        Verb::Types => {
            let r = c.types(pb::TypesRequest {}).await?.into_inner();
            (r.rendered.clone(), as_json(&r)?, 0)
        }
        Verb::WebLink { session } => {
            let r = c
                .web_link(pb::WebLinkRequest {
                    agent_id,
                    session_id: session.unwrap_or_default(),
                })
                .await?
                .into_inner();
            (r.rendered.clone(), as_json(&r)?, 0)
        }
        Verb::Watch {
            session,
            replay_lines,
        } => {
            use std::io::Write;
            let mut stream = c
                .watch(pb::WatchRequest {
                    agent_id,
                    session_id: session,
                    replay_lines,
                })
                .await?
                .into_inner();
            let mut out = std::io::stdout();
            while let Some(event) = stream.message().await? {
                out.write_all(&event.output)
                    .and_then(|_| out.flush())
                    .map_err(|e| e.to_string())?;
            }
            return Ok(0);
        }
        Verb::Attach { session } => return Ok(attach::run(c, agent_id, session).await?),
        Verb::JobOutput { job, wait_ms } => {
            let r = c
                .job_output(pb::JobOutputRequest {
                    agent_id,
                    job_id: job,
                    wait_ms,
                    max_result_bytes: 0,
                })
                .await?
                .into_inner();
            (r.rendered.clone(), as_json(&r)?, 0)
        }
        Verb::JobKill { job } => {
            let r = c
                .job_kill(pb::JobKillRequest {
                    agent_id,
                    job_id: job,
                })
                .await?
                .into_inner();
            (r.rendered.clone(), as_json(&r)?, 0)
        }
    };
    if global.json {
        println!("{typed:#}");
    } else {
        println!("{rendered}");
    }
    Ok(status)
}

/// A response as `--json` prints it: the proto's field names, enums by their contract names
/// (the serialization `pb` derives).
fn as_json<T: serde::Serialize>(response: &T) -> Result<Value, CliError> {
    serde_json::to_value(response)
        .map_err(|e| CliError(format!("encoding the response as JSON: {e}")))
}

/// The innermost error of `e`'s source chain: for a failed connection that is the OS error
/// ("No such file or directory"), not the transport's generic wrapper.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    inner.to_string()
}

/// A CLI failure, printed as one line.
#[derive(Debug)]
pub struct CliError(pub String);

impl From<String> for CliError {
    fn from(s: String) -> CliError {
        CliError(s)
    }
}

impl From<tonic::Status> for CliError {
    fn from(s: tonic::Status) -> CliError {
        // One line even if a message carries a newline; what to do in this CLI's verbs.
        let message = crate::error::advice::in_words(s.message(), &crate::error::advice::CLI)
            .replace('\n', " ");
        CliError(format!("{}: {message}", code_name(s.code())))
    }
}

/// `NotFound` -> `NOT_FOUND`.
fn code_name(code: tonic::Code) -> String {
    let mut out = String::new();
    for (i, c) in format!("{code:?}").chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_cli_verbs() {
        let busy = tonic::Status::failed_precondition(format!(
            "terminal session t1 is busy with background job j1; {}",
            crate::error::advice::JOB
        ));
        assert_eq!(
            CliError::from(busy).0,
            "FAILED_PRECONDITION: terminal session t1 is busy with background job j1; wait for it \
             with `ptyd job-output JOB` or stop it with `ptyd job-kill JOB`"
        );
    }

    #[test]
    fn front_ends_do_not_take_the_client_verbs_options() {
        let refused = |args: &[&str]| {
            command()
                .try_get_matches_from(args)
                .expect_err("refused")
                .to_string()
        };
        let agent = refused(&["ptyd", "mcp", "--agent", "x"]);
        assert!(agent.contains("--agent-id"), "{agent}");
        refused(&["ptyd", "acp", "--json"]);
        let mut built = command();
        built.build();
        let help = built
            .find_subcommand_mut("mcp")
            .expect("mcp")
            .render_long_help()
            .to_string();
        assert!(
            help.contains("--agent-id") && help.contains("--socket"),
            "{help}"
        );
        assert!(
            !help.contains("--agent ") && !help.contains("--json"),
            "{help}"
        );
        command()
            .try_get_matches_from(["ptyd", "--agent", "me", "list", "--json"])
            .expect("client verbs keep them");
    }
}
