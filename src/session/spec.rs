//! What a session is started with, and the one place its settings are derived: an `Open`
//! request's settings checked against the config's policy (`SessionSpec::for_open`), and the
//! settings a state directory keeps for a daemon that adopts the session (`record`,
//! `from_record`). Every session setting is named here once; the service only translates the
//! request, and the start and the adoption only convert.

use crate::config::{Config, TerminalType};
use crate::error::{Error, Result};
use crate::marks::{Integration, IntegrationFiles, MarkKey};
use crate::sandbox::{self, Places, Sandbox, SandboxRequest};
use crate::state::record::SessionRecord;
use crate::validate;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything needed to start a session.
#[derive(Debug, Clone)]
pub struct SessionSpec {
    /// Session id ("t1").
    pub id: String,
    /// The agent that owns it.
    pub owner: String,
    /// Display name (may be empty).
    pub name: String,
    /// Terminal type name.
    pub type_name: String,
    /// Program and arguments, integration already applied.
    pub argv: Vec<String>,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
    /// Prompt-mark recipe in use.
    pub integration: Integration,
    /// The secret the integration's marks carry (handed to it in `env`); marks without it are
    /// output's, not the shell's. The shell keeps printing it for its whole life, so it is part
    /// of what a daemon adopting the session must keep.
    pub mark_key: MarkKey,
    /// History bound in lines.
    pub history_lines: u64,
    /// History bound in bytes.
    pub history_bytes: usize,
    /// Deadline for the session to become ready.
    pub startup_timeout: Duration,
    /// Output silence that counts as ready.
    pub startup_idle: Duration,
    /// Grace period of the polite close signal.
    pub close_grace: Duration,
    /// How Close finds the session's processes (resolved by `serve`; `Auto` is resolved at
    /// spawn).
    pub process_tracking: crate::process::ProcessTracking,
    /// The sandbox in force, if any.
    pub sandbox: Option<Sandbox>,
    /// What the session's helper enforces of it (`Sandbox::helper_lines`); `None` for an
    /// adopted session, whose processes hold it already.
    pub sandbox_plan: Option<String>,
}

/// An `Open` request's session settings, as the caller gave them (0 and empty: the default).
pub(crate) struct OpenParams<'a> {
    /// Terminal type name; empty: `shell`.
    pub(crate) type_name: &'a str,
    /// Display name.
    pub(crate) name: &'a str,
    /// Absolute, or relative to the workspace root; empty: the workspace root.
    pub(crate) cwd: &'a str,
    pub(crate) cols: u32,
    pub(crate) rows: u32,
    /// Environment overrides.
    pub(crate) env: &'a HashMap<String, String>,
    /// A sandbox, or a tightening of the type's.
    pub(crate) sandbox: Option<SandboxRequest>,
}

/// An `Open` request's settings, checked: what is left to do once the session has an id.
pub(crate) struct CheckedOpen<'c> {
    ty: &'c TerminalType,
    name: String,
    cwd: PathBuf,
    cols: u16,
    rows: u16,
    env: HashMap<String, String>,
    sandbox: Option<SandboxRequest>,
}

impl SessionSpec {
    /// Checks `params` against `config` (every bad field named); nothing is started, and no id
    /// is taken, until `CheckedOpen::spec`.
    pub(crate) fn for_open<'c>(
        config: &'c Config,
        params: &OpenParams<'_>,
    ) -> Result<CheckedOpen<'c>> {
        let cols = validate::size("cols", params.cols, config.cols, validate::COLS)?;
        let rows = validate::size("rows", params.rows, config.rows, validate::ROWS)?;
        validate::session_name(params.name)?;
        let type_name = match params.type_name {
            "" => "shell",
            name => name,
        };
        let ty = config.find_type(type_name).ok_or_else(|| {
            Error::invalid(format!(
                "type {} is not registered; known types: {}",
                validate::quoted(type_name),
                config.type_names()
            ))
        })?;
        let cwd = resolve_cwd(&config.workspace_root, params.cwd)?;
        for (name, value) in params.env {
            validate::env_var(name, value)?;
        }
        Ok(CheckedOpen {
            ty,
            name: params.name.to_owned(),
            cwd,
            cols,
            rows,
            env: params.env.clone(),
            sandbox: params.sandbox.clone(),
        })
    }

    /// The record that lets a later daemon adopt this session.
    pub(crate) fn record(
        &self,
        created_unix_ms: i64,
        pid: u32,
        process_tag: Option<String>,
    ) -> SessionRecord {
        SessionRecord {
            id: self.id.clone(),
            owner: self.owner.clone(),
            name: self.name.clone(),
            type_name: self.type_name.clone(),
            cols: self.cols,
            rows: self.rows,
            created_unix_ms,
            cwd: self.cwd.clone(),
            integration: self.integration.name().to_owned(),
            mark_key: self.mark_key.text().map(str::to_owned),
            history_lines: self.history_lines,
            history_bytes: self.history_bytes,
            close_grace_ms: self.close_grace.as_millis() as u64,
            pid,
            process_tag,
            jobs: Vec::new(),
            sandbox: self.sandbox.clone(),
        }
    }

    /// The spec of a session a previous daemon left: what its record kept. Nothing is started
    /// from it (the processes run already), so it has no program, environment or startup wait.
    pub(crate) fn from_record(
        record: &SessionRecord,
        process_tracking: crate::process::ProcessTracking,
    ) -> SessionSpec {
        SessionSpec {
            id: record.id.clone(),
            owner: record.owner.clone(),
            name: record.name.clone(),
            type_name: record.type_name.clone(),
            argv: Vec::new(),
            env: Vec::new(),
            cwd: record.cwd.clone(),
            cols: record.cols,
            rows: record.rows,
            integration: Integration::from_name(&record.integration).unwrap_or(Integration::None),
            mark_key: record
                .mark_key
                .as_deref()
                .map_or_else(MarkKey::unverified, MarkKey::from_saved),
            history_lines: record.history_lines,
            history_bytes: record.history_bytes,
            startup_timeout: Duration::ZERO,
            startup_idle: Duration::ZERO,
            close_grace: Duration::from_millis(record.close_grace_ms),
            process_tracking,
            sandbox: record.sandbox.clone(),
            sandbox_plan: None,
        }
    }
}

impl CheckedOpen<'_> {
    /// The type the session runs.
    pub(crate) fn type_name(&self) -> &str {
        &self.ty.name
    }

    /// The spec of session `id` of agent `owner`: its environment by the config's policy (the daemon's own
    /// start-up variables never among it), a new mark key, and the type's shell integration.
    pub(crate) fn spec(
        self,
        id: String,
        owner: String,
        config: &Config,
        integration: &IntegrationFiles,
    ) -> Result<SessionSpec> {
        let daemon_env =
            std::env::vars().filter(|(name, _)| !crate::config::daemon_env::is_handover_var(name));
        let mut env = config.session_env(&id, self.ty, &self.env, daemon_env);
        let mut argv = self.ty.argv.clone();
        // Every session gets a key, one without integration too: then no mark counts.
        let mark_key = MarkKey::generate()
            .map_err(|e| Error::Internal(format!("cannot make the session's mark key: {e}")))?;
        integration.apply(
            self.ty.integration,
            &mark_key,
            self.ty.history_expansion,
            &mut argv,
            &mut env,
        );
        let sandbox = self.sandbox_in_force(&env, config)?;
        let sandbox_plan = sandbox.as_ref().map(|s| {
            s.helper_lines(
                &config.sandbox_hidden,
                &[integration.dir().to_path_buf()],
                &self.cwd,
            )
        });
        Ok(SessionSpec {
            id,
            owner,
            name: self.name,
            type_name: self.ty.name.clone(),
            argv,
            env,
            cwd: self.cwd,
            cols: self.cols,
            rows: self.rows,
            integration: self.ty.integration,
            mark_key,
            history_lines: config.history_lines,
            history_bytes: config.history_bytes,
            startup_timeout: config.startup_timeout,
            startup_idle: config.startup_idle,
            close_grace: config.close_grace,
            process_tracking: config.process_tracking,
            sandbox,
            sandbox_plan,
        })
    }

    /// The type's sandbox tightened by the request's, resolved for this session's places
    /// (`env` gives `$HOME` and `$TMPDIR`); refused when this daemon cannot enforce it.
    fn sandbox_in_force(
        &self,
        env: &[(String, String)],
        config: &Config,
    ) -> Result<Option<Sandbox>> {
        let var = |name: &str| {
            env.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| PathBuf::from(v))
        };
        let home = var("HOME");
        let tmpdir = var("TMPDIR").unwrap_or_else(|| "/tmp".into());
        let places = Places {
            cwd: &self.cwd,
            home: home.as_deref(),
            tmpdir: &tmpdir,
        };
        let canonical = |p: &Path| std::fs::canonicalize(p);
        let of_type = match &self.ty.sandbox {
            Some(req) => Some(
                req.resolve(
                    &format!("the type's sandbox ({})", self.ty.name),
                    places,
                    canonical,
                )
                .map_err(Error::FailedPrecondition)?,
            ),
            None => None,
        };
        let requested = match &self.sandbox {
            Some(req) => Some(
                req.resolve("sandbox", places, canonical)
                    .map_err(Error::InvalidArgument)?,
            ),
            None => None,
        };
        let network = self.sandbox.as_ref().and_then(|r| r.network);
        let Some(sandbox) = sandbox::combine(of_type.as_ref(), requested.as_ref(), network)
            .map_err(Error::InvalidArgument)?
        else {
            return Ok(None);
        };
        if let Some(why) = crate::process::sandbox::kernel_refusal() {
            return Err(Error::FailedPrecondition(format!("sandbox: {why}")));
        }
        if sandbox.has_limits()
            && config.process_tracking != crate::process::ProcessTracking::Cgroup
        {
            return Err(Error::FailedPrecondition(format!(
                "sandbox: memory_max, pids_max and cpu_max are cgroup v2 limits and need cgroup \
                 process tracking; this daemon tracks processes by {} (process_tracking in the \
                 config, or a delegated cgroup v2 subtree for auto)",
                config.process_tracking
            )));
        }
        Ok(Some(sandbox))
    }
}

/// A requested cwd resolved against the workspace root; it must be a directory.
fn resolve_cwd(workspace_root: &Path, requested: &str) -> Result<PathBuf> {
    let path = if requested.is_empty() {
        workspace_root.to_path_buf()
    } else if Path::new(requested).is_absolute() {
        PathBuf::from(requested)
    } else {
        workspace_root.join(requested)
    };
    if !path.is_dir() {
        return Err(Error::invalid(format!(
            "cwd {} does not exist or is not a directory",
            validate::quoted(&path.display().to_string())
        )));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params<'a>(env: &'a HashMap<String, String>) -> OpenParams<'a> {
        OpenParams {
            type_name: "",
            name: "",
            cwd: "/",
            cols: 0,
            rows: 0,
            env,
            sandbox: None,
        }
    }

    #[test]
    fn an_open_is_checked_field_by_field_with_the_defaults_for_zero_and_empty() {
        let config = Config::default();
        let no_env = HashMap::new();
        let bad_env: HashMap<String, String> = [("A=B".to_string(), "x".to_string())].into();
        let checked = SessionSpec::for_open(&config, &params(&no_env)).unwrap();
        assert_eq!(checked.type_name(), "shell");
        assert_eq!((checked.cols, checked.rows), (config.cols, config.rows));
        // (what differs from the defaults, the field the refusal names)
        type Case<'a> = (OpenParams<'a>, &'a str);
        let cases: Vec<Case> = vec![
            (
                OpenParams {
                    cols: 19,
                    ..params(&no_env)
                },
                "cols",
            ),
            (
                OpenParams {
                    rows: 1001,
                    ..params(&no_env)
                },
                "rows",
            ),
            (
                OpenParams {
                    name: "a\nb",
                    ..params(&no_env)
                },
                "name",
            ),
            (
                OpenParams {
                    type_name: "nope",
                    ..params(&no_env)
                },
                "type",
            ),
            (
                OpenParams {
                    cwd: "/no/such/dir",
                    ..params(&no_env)
                },
                "cwd",
            ),
            (params(&bad_env), "env"),
        ];
        for (bad, field) in cases {
            let refused = SessionSpec::for_open(&config, &bad).err().expect(field);
            assert!(matches!(refused, Error::InvalidArgument(_)), "{field}");
            assert!(refused.to_string().contains(field), "{field}: {refused}");
        }
        let largest = OpenParams {
            cols: 1000,
            rows: 1000,
            ..params(&no_env)
        };
        assert!(SessionSpec::for_open(&config, &largest).is_ok());
    }

    #[test]
    fn an_adopted_session_has_the_settings_its_record_kept() {
        let config = Config::default();
        let no_env = HashMap::new();
        let opened = OpenParams {
            name: "build",
            cols: 1000,
            rows: 900,
            ..params(&no_env)
        };
        let dir = tempfile::tempdir().unwrap();
        let files = IntegrationFiles::install(dir.path()).unwrap();
        let spec = SessionSpec::for_open(&config, &opened)
            .unwrap()
            .spec("t7".into(), "agent-a".into(), &config, &files)
            .unwrap();
        let record = spec.record(1, 42, None);
        let adopted = SessionSpec::from_record(&record, spec.process_tracking);
        let kept = |s: &SessionSpec| {
            (
                s.id.clone(),
                s.name.clone(),
                s.type_name.clone(),
                s.cwd.clone(),
                (s.cols, s.rows),
                s.integration,
                s.mark_key.text().map(str::to_owned),
                (s.history_lines, s.history_bytes),
                s.close_grace,
            )
        };
        assert_eq!(kept(&adopted), kept(&spec));
        let mut repaired = record.clone();
        assert!(
            repaired.repair().is_empty(),
            "Open's largest size is a valid record"
        );
    }
}
