//! The `ptyd` binary: parses the command line, sets up logging, and calls into the library.

use clap::Parser;
use ptyd::cli::{Cli, Verb};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
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
        } => {
            init_tracing();
            match runtime.block_on(serve(&cli.global, config, check_config)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        Verb::Acp(options) => {
            init_tracing();
            match runtime.block_on(ptyd::acp::run(&cli.global, options)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
        verb => match runtime.block_on(ptyd::cli::run_client(&cli.global, verb)) {
            Ok(status) => ExitCode::from(status as u8),
            Err(e) => {
                eprintln!("error: {}", e.0);
                ExitCode::from(2)
            }
        },
    }
}

/// Logs to stderr, filtered by RUST_LOG (default `info`); no colours when stderr is not a
/// terminal (journald), no timestamps under systemd (the journal adds its own).
fn init_tracing() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
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

async fn serve(
    global: &ptyd::cli::Global,
    config_path: Option<std::path::PathBuf>,
    check_only: bool,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let config = ptyd::config::Config::load(config_path.as_deref())?;
    if check_only {
        eprintln!("ptyd: configuration is valid");
        return Ok(());
    }
    let listener = match ptyd::server::activated_listener()? {
        Some(l) => l,
        None => {
            let path = global
                .socket
                .clone()
                .unwrap_or_else(ptyd::server::default_socket_path);
            let l = ptyd::server::bind(&path)
                .with_context(|| format!("starting on {}", path.display()))?;
            eprintln!("ptyd: listening on {}", path.display());
            l
        }
    };
    let shutdown = async {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    ptyd::server::serve(listener, config, shutdown).await?;
    Ok(())
}
