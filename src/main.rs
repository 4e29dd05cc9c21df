//! The `ptyd` binary: parses the command line, sets up logging, and calls into the library.

use ptyd::cli::Verb;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = ptyd::cli::parse();
    if let Verb::Completions { shell } = cli.command {
        use std::io::Write;
        let script = ptyd::cli::completion_script(shell);
        return match std::io::stdout().write_all(&script) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                eprintln!("error: writing the completion script: {e}");
                ExitCode::from(2)
            }
            _ => ExitCode::SUCCESS,
        };
    }
    if let Verb::StopPost = cli.command {
        return match ptyd::server::stop_post::run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        };
    }
    // One thread runs everything (blocking work such as cgroup removal goes to tokio's blocking
    // pool). A send is a chain of hand-offs (connection task, session actor, PTY readiness,
    // reply); on one thread each is a queue push, while a multi-thread runtime wakes idle
    // workers to steal them, which the benchmark showed as slower sends. Each actor yields
    // after a bounded amount of output so none holds the thread. For plain lines one core keeps
    // up with many flooding sessions; for progress bars and full-screen redraws it does not
    // (docs/performance.md, the agent-streams rows): emulating on more than one core is open.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Verb::Serve {
            config,
            check_config,
            listen_tcp,
            token_file,
            process_tracking,
            web,
            web_token_file,
        } => {
            init_tracing();
            let options = ptyd::server::ServeOptions {
                socket: cli.global.socket,
                config,
                check_config,
                listen_tcp,
                token_file,
                process_tracking,
                web,
                web_token_file,
            };
            match runtime.block_on(ptyd::server::run(options)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Verb::Acp(options) => front_end(runtime, cli.global.socket, |socket| async move {
            ptyd::acp::run(&socket, options).await
        }),
        Verb::Mcp(options) => front_end(runtime, cli.global.socket, |socket| async move {
            ptyd::mcp::run(&socket, options).await
        }),
        verb => match runtime.block_on(ptyd::cli::run_client(&cli.global, verb)) {
            Ok(status) => ExitCode::from(status as u8),
            Err(e) => {
                eprintln!("error: {}", e.0);
                ExitCode::from(2)
            }
        },
    }
}

/// Drops a front-end's runtime without waiting for its blocking threads. Its work is done (the
/// sessions closed, the in-process daemon stopped), but a blocking read of stdin may still wait
/// for a client that keeps stdin open after it signalled the server to stop, as every SDK client
/// does; dropping the runtime normally would wait for that read, and the client would SIGKILL us.
fn exit_without_waiting_for_stdin(runtime: tokio::runtime::Runtime) {
    runtime.shutdown_background();
}

/// Runs a front-end (`ptyd acp`, `ptyd mcp`) against the daemon on `socket` (or the default
/// socket), then exits without waiting for stdin: 0, or 1 after printing its error.
fn front_end<F, E>(
    runtime: tokio::runtime::Runtime,
    socket: Option<std::path::PathBuf>,
    run: impl FnOnce(std::path::PathBuf) -> F,
) -> ExitCode
where
    F: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    init_tracing();
    let socket = socket.unwrap_or_else(ptyd::server::default_socket_path);
    let result = runtime.block_on(run(socket));
    exit_without_waiting_for_stdin(runtime);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Logs to stderr, filtered by RUST_LOG (default `info`, but `warn` for rmcp, which logs every
/// MCP HTTP session's start and end and quotes what the client says of itself); no colours
/// when stderr is not a terminal (journald), no timestamps under systemd (the journal adds its
/// own).
fn init_tracing() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    if std::env::var_os("JOURNAL_STREAM").is_some() {
        builder.without_time().init();
    } else {
        builder.init();
    }
}
