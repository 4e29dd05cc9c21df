//! The gRPC `Terminals` service: validate the request, look up (agent, id) in the registry, ask
//! the session, encode the answer. Also the one place where library errors become gRPC statuses,
//! and where each RPC is logged (agent, session, outcome; never the text).

use crate::config::Config;
use crate::error::{Error, Result};
use crate::marks::IntegrationFiles;
use crate::pb;
use crate::registry::Registry;
use crate::render;
use crate::session::{
    CommandsQuery, DEFAULT_COMMANDS, OpenParams, ReadQuery, SearchQuery, SendInput, SessionHandle,
    SessionSpec, Status,
};
use crate::validate;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response};

mod people;
pub(crate) use people::Held;

/// Default wait deadline of a send.
const DEFAULT_TIMEOUT_MS: u32 = 30_000;
/// Default output silence before `inferred_idle`.
const DEFAULT_IDLE_MS: u32 = 5_000;
/// How long a background send waits for its job's first complete line, by default (contract
/// section 3): long enough for a server to bind and say so, short enough to feel immediate.
const DEFAULT_BACKGROUND_WAIT_MS: u32 = 1_000;
/// The longest `background_wait_ms`.
const MAX_BACKGROUND_WAIT_MS: u32 = 10_000;
/// Stream events buffered per streaming call before the producer waits for the caller.
const STREAM_CHUNKS: usize = 64;

impl From<Error> for tonic::Status {
    fn from(e: Error) -> tonic::Status {
        use tonic::Code;
        let code = match &e {
            Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::NotFound(_) => Code::NotFound,
            Error::FailedPrecondition(_) => Code::FailedPrecondition,
            Error::ResourceExhausted(_) => Code::ResourceExhausted,
            Error::Internal(_) | Error::Io { .. } | Error::Transport(_) => {
                tracing::error!(error = %e, "internal error");
                Code::Internal
            }
        };
        tonic::Status::new(code, e.to_string())
    }
}

/// The service state shared by all requests.
#[derive(Clone)]
pub(crate) struct Terminals {
    registry: Arc<Registry>,
    config: Arc<Config>,
    integration: Arc<IntegrationFiles>,
    /// The web page, once `ptyd serve --web` serves one: its keys and its URL.
    web: Arc<std::sync::OnceLock<(Arc<crate::web::Access>, String)>>,
}

type RpcResult<T> = std::result::Result<Response<T>, tonic::Status>;
type BoxStream<T> = Pin<Box<dyn Stream<Item = std::result::Result<T, tonic::Status>> + Send>>;

/// Logs one RPC's outcome (one event per RPC, at info, as the contract asks) and converts the
/// result.
fn finish<T>(rpc: &str, agent: &str, id: &str, result: Result<T>) -> RpcResult<T> {
    // A caller's fields go into the log at most 200 bytes each (the error's own quotes too).
    let (agent, id) = (&*validate::clipped(agent), &*validate::clipped(id));
    match result {
        Ok(v) => {
            tracing::info!(rpc, agent, id, "ok");
            Ok(Response::new(v))
        }
        Err(e) => {
            tracing::info!(rpc, agent, id, error = %e, "failed");
            Err(e.into())
        }
    }
}

impl Terminals {
    /// A service over `registry` with `config`, using the wrappers in `integration`.
    pub(crate) fn new(
        registry: Arc<Registry>,
        config: Arc<Config>,
        integration: IntegrationFiles,
    ) -> Self {
        Terminals {
            registry,
            config,
            integration: Arc::new(integration),
            web: Arc::default(),
        }
    }

    /// The web page this daemon serves at `url`, with its keys (for `WebLink`).
    pub(crate) fn serve_web(&self, access: Arc<crate::web::Access>, url: String) {
        let _ = self.web.set((access, url));
    }

    /// `WebLink`: a one-time link to the page, opening on a session when one is named.
    fn web_link(&self, req: &pb::WebLinkRequest) -> Result<pb::WebLinkResponse> {
        validate::agent_id(&req.agent_id)?;
        let Some((access, url)) = self.web.get() else {
            return Err(Error::FailedPrecondition(
                "this daemon serves no web page (start it with ptyd serve --web ADDR \
                 --web-token-file F)"
                    .into(),
            ));
        };
        let mut fragment = format!("code={}", access.mint_code(std::time::Instant::now()));
        if !req.session_id.is_empty() {
            self.session(&req.agent_id, &req.session_id)?;
            fragment.push('&');
            fragment.push_str(&session_fragment(&req.agent_id, &req.session_id));
        }
        let url = format!("{url}#{fragment}");
        let expires_in_s = crate::web::CODE_LIFETIME.as_secs() as u32;
        Ok(pb::WebLinkResponse {
            rendered: format!("{url}\n(valid once, for {} minutes)", expires_in_s / 60),
            url,
            expires_in_s,
        })
    }

    /// The page's address opened on session `id` of `agent`, with no sign-in code, when the
    /// page is served.
    fn page_of(&self, agent: &str, id: &str) -> Option<String> {
        let (_, url) = self.web.get()?;
        Some(format!("{url}#{}", session_fragment(agent, id)))
    }

    /// Every agent's sessions (the web page lists them all: a person acts for any agent).
    pub(crate) fn all_sessions(&self) -> Vec<SessionHandle> {
        self.registry.all()
    }

    pub(crate) fn session(&self, agent: &str, id: &str) -> Result<SessionHandle> {
        validate::agent_id(agent)?;
        validate::required_id("session_id", id)?;
        self.registry.get(agent, id)
    }

    async fn open(&self, req: pb::OpenRequest) -> Result<pb::OpenResponse> {
        validate::agent_id(&req.agent_id)?;
        let cap = validate::max_result_bytes(req.max_result_bytes)?;
        let params = OpenParams {
            type_name: &req.r#type,
            name: &req.name,
            cwd: &req.cwd,
            cols: req.cols,
            rows: req.rows,
            env: &req.env,
            sandbox: req
                .sandbox
                .as_ref()
                .map(pb::sandbox::request)
                .transpose()
                .map_err(Error::InvalidArgument)?,
        };
        let checked = SessionSpec::for_open(&self.config, &params)?;
        // The slot is taken before the session starts and given back if it does not.
        let reservation = self.registry.reserve(
            &req.agent_id,
            self.config.limits.sessions_per_agent,
            self.config.limits.sessions_total,
        )?;
        let type_name = checked.type_name().to_owned();
        let spec = checked.spec(
            reservation.id().to_owned(),
            req.agent_id.clone(),
            &self.config,
            &self.integration,
        )?;
        let persist = self.registry.state().map(|state| crate::session::Persist {
            files: state.session(&spec.id),
            grace: self.config.adoption_grace,
        });
        let (handle, not_kept) = SessionHandle::start(spec, persist).await?;
        let ready = handle.ready().await?;
        if let Status::Exited(_) = handle.state().status {
            let detail = render::tail_fit(&ready.motd, 400).to_owned();
            handle.close().await;
            return Err(Error::FailedPrecondition(format!(
                "type {type_name:?} exited during startup: {}",
                if detail.is_empty() {
                    "(no output)"
                } else {
                    &detail
                }
            )));
        }
        self.registry.insert(reservation, handle.clone());
        Ok(pb::open_response(
            info(&handle),
            handle.spec.sandbox.as_ref(),
            &ready.motd,
            not_kept.as_deref(),
            cap,
        ))
    }

    async fn send(&self, req: pb::SendRequest) -> Result<pb::SendResponse> {
        let handle = self.session(&req.agent_id, &req.session_id)?;
        let mut input = send_input(&req)?;
        input.web_page = self.page_of(&req.agent_id, &req.session_id);
        let wait = background_wait(&req)?;
        if !req.run_in_background {
            return Ok(handle.send(input).await?.into());
        }
        if !self.config.allow_background {
            return Err(Error::FailedPrecondition(
                "run_in_background: background sends are switched off on this daemon \
                 (config allow_background = false); send in the foreground"
                    .into(),
            ));
        }
        let job_id = self.registry.insert_job(
            &req.agent_id,
            handle.clone(),
            self.config.limits.jobs_per_agent,
        );
        let header = pb::background_header(&job_id);
        // What the job's first output may take of the cap: the header and its newline go first.
        let cap = input.max_result_bytes.saturating_sub(header.len() + 1);
        if let Err(e) = handle.send_background(input, job_id.clone()).await {
            self.registry.remove_job(&job_id);
            return Err(e);
        }
        // The job's first complete line (or its end) comes back in this call, consumed as
        // JobOutput would consume it: a server's "Serving on ..." or an immediate error is read
        // here instead of by a second call made before the server listens.
        let report = handle.job_output(&job_id, wait, cap).await?;
        Ok(pb::background_response(
            header,
            pb::job_output_response(job_id, handle.spec.id.clone(), report),
        ))
    }

    async fn send_stream(&self, req: pb::SendRequest) -> Result<BoxStream<pb::SendEvent>> {
        let handle = self.session(&req.agent_id, &req.session_id)?;
        if req.run_in_background {
            return Err(Error::invalid(
                "run_in_background is not allowed with SendStream; use Send for background jobs",
            ));
        }
        let mut input = send_input(&req)?;
        input.web_page = self.page_of(&req.agent_id, &req.session_id);
        let (chunks_tx, mut chunks) = mpsc::channel::<Vec<u8>>(STREAM_CHUNKS);
        let (events_tx, events) = mpsc::channel(STREAM_CHUNKS);
        tokio::spawn(async move {
            let send = handle.send_stream(input, chunks_tx);
            tokio::pin!(send);
            let result = loop {
                tokio::select! {
                    biased;
                    // The caller hung up: dropping `send` releases the session.
                    _ = events_tx.closed() => return,
                    Some(chunk) = chunks.recv() => {
                        let event = pb::send_event::Event::Output(chunk);
                        if events_tx.send(Ok(pb::SendEvent { event: Some(event) })).await.is_err() {
                            return; // the caller hung up; dropping `send` releases the session
                        }
                    }
                    result = &mut send => break result,
                }
            };
            // Chunks still queued go out before the result.
            while let Ok(chunk) = chunks.try_recv() {
                let event = pb::send_event::Event::Output(chunk);
                let _ = events_tx
                    .send(Ok(pb::SendEvent { event: Some(event) }))
                    .await;
            }
            let last = match result {
                Ok(outcome) => Ok(pb::SendEvent {
                    event: Some(pb::send_event::Event::Done(outcome.into())),
                }),
                Err(e) => Err(tonic::Status::from(e)),
            };
            let _ = events_tx.send(last).await;
        });
        Ok(Box::pin(ReceiverStream::new(events)))
    }

    async fn job_output(&self, req: pb::JobOutputRequest) -> Result<pb::JobOutputResponse> {
        validate::agent_id(&req.agent_id)?;
        validate::required_id("job_id", &req.job_id)?;
        let wait = validate::ranged("wait_ms", req.wait_ms, 0, 0, 600_000)?;
        let cap = validate::max_result_bytes(req.max_result_bytes)?;
        let job = self.registry.job(&req.agent_id, &req.job_id)?;
        let report = job
            .handle
            .job_output(&req.job_id, Duration::from_millis(u64::from(wait)), cap)
            .await?;
        Ok(pb::job_output_response(
            req.job_id,
            job.handle.spec.id.clone(),
            report,
        ))
    }

    async fn job_kill(&self, req: pb::JobKillRequest) -> Result<pb::JobKillResponse> {
        validate::agent_id(&req.agent_id)?;
        validate::required_id("job_id", &req.job_id)?;
        let job = self.registry.job(&req.agent_id, &req.job_id)?;
        let status = job.handle.job_kill(&req.job_id).await?;
        Ok(pb::job_kill_response(req.job_id, status))
    }

    async fn read(&self, req: pb::ReadRequest) -> Result<pb::ReadResponse> {
        let handle = self.session(&req.agent_id, &req.session_id)?;
        let count = validate::ranged("count", req.count, 500, 1, 10_000)?;
        let max_result_bytes = validate::max_result_bytes(req.max_result_bytes)?;
        let command_id = validate::command_id(&req.command_id)?;
        if command_id.is_some() && (req.screen || req.from_line.is_some()) {
            return Err(Error::invalid(
                "command_id pages its command's output: not with screen or from_line",
            ));
        }
        let page = handle
            .read(ReadQuery {
                offset: req.offset,
                count: u64::from(count),
                from_line: req.from_line,
                screen: req.screen,
                max_result_bytes,
                command_id,
            })
            .await?;
        Ok(page.into())
    }

    async fn commands(&self, req: pb::CommandsRequest) -> Result<pb::CommandsResponse> {
        let handle = self.session(&req.agent_id, &req.session_id)?;
        let count = validate::ranged("count", req.count, DEFAULT_COMMANDS as u32, 1, 10_000)?;
        let max_result_bytes = validate::max_result_bytes(req.max_result_bytes)?;
        let page = handle
            .commands(CommandsQuery {
                offset: req.offset,
                count: u64::from(count),
                max_result_bytes,
            })
            .await?;
        Ok(page.into())
    }

    async fn search(&self, req: pb::SearchRequest) -> Result<pb::SearchResponse> {
        let handle = self.session(&req.agent_id, &req.session_id)?;
        let pattern = validate::pattern(&req.pattern, req.ignore_case)?;
        let max_matches = validate::ranged("max_matches", req.max_matches, 100, 1, 10_000)?;
        let context = validate::ranged_from_zero("context", req.context, 100)?;
        let found = handle
            .search(SearchQuery {
                pattern,
                command_id: validate::command_id(&req.command_id)?,
                from_line: req.from_line,
                max_matches: max_matches as usize,
                context: u64::from(context),
                max_result_bytes: validate::max_result_bytes(req.max_result_bytes)?,
            })
            .await?;
        Ok(found.into())
    }

    async fn signal(&self, req: pb::SignalRequest) -> Result<pb::SignalResponse> {
        let handle = self.session(&req.agent_id, &req.session_id)?;
        let signal = validate::signal(&req.signal)?;
        // The session's actor owns the PTY: it reads the foreground group from the master and
        // signals only while the session's program runs.
        let pgid = handle.signal(signal).await?;
        Ok(pb::SignalResponse {
            delivered: true,
            target_pgid: pgid,
            rendered: format!(
                "delivered {} to foreground process group {pgid}",
                signal.as_str()
            ),
        })
    }

    async fn close(&self, req: pb::CloseRequest) -> Result<pb::CloseResponse> {
        validate::agent_id(&req.agent_id)?;
        validate::required_id("session_id", &req.session_id)?;
        let id = req.session_id;
        let already = |id| pb::close_response(id, pb::CloseOutcome::AlreadyClosing);
        if self.registry.is_closing(&req.agent_id, &id) {
            return Ok(already(id));
        }
        let handle = self.registry.get(&req.agent_id, &id)?;
        if !self.registry.begin_close(&req.agent_id, &id) {
            return Ok(already(id));
        }
        handle.close().await;
        self.registry.remove(&id);
        Ok(pb::close_response(id, pb::CloseOutcome::Closed))
    }

    async fn list(&self, req: pb::ListRequest) -> Result<pb::ListResponse> {
        validate::agent_id(&req.agent_id)?;
        let handles = self.registry.list(&req.agent_id);
        // Three /proc reads a session: on the blocking pool, so that an agent listing many
        // sessions does not hold up every other session's answers on the runtime's one thread.
        let sessions = tokio::task::spawn_blocking(move || handles.iter().map(info).collect())
            .await
            .map_err(|e| Error::Internal(format!("listing the sessions failed: {e}")))?;
        Ok(pb::list_response(sessions))
    }

    fn types(&self) -> pb::TypesResponse {
        pb::types_response(&self.config.types)
    }

    /// Serves every session a previous daemon left in the state directory under its id and
    /// owner; returns how many.
    pub(crate) async fn adopt_all(&self) -> usize {
        let Some(state) = self.registry.state().cloned() else {
            return 0;
        };
        let mut adopting = tokio::task::JoinSet::new();
        for (files, record, end) in state.left_sessions() {
            let tracking = self.config.process_tracking;
            adopting.spawn(async move {
                let owner = record.owner.clone();
                let jobs: Vec<String> = record.jobs.iter().map(|j| j.id.clone()).collect();
                let handle = SessionHandle::adopt(files, record, tracking).await?;
                if end {
                    // Taken over only to be ended: its processes and files go now.
                    handle.close().await;
                    tracing::info!(session = %handle.spec.id, "ended");
                    return None;
                }
                Some((owner, handle, jobs))
            });
        }
        let mut adopted = 0;
        while let Some(done) = adopting.join_next().await {
            if let Ok(Some((owner, handle, jobs))) = done {
                tracing::info!(session = %handle.spec.id, agent = %owner,
                    status = %crate::session::status_text(handle.state().status), "adopted");
                self.registry.adopt(&owner, handle, &jobs);
                adopted += 1;
            }
        }
        adopted
    }

    /// Closes every session (daemon shutdown).
    pub(crate) async fn close_all(&self) {
        let mut closing = tokio::task::JoinSet::new();
        for handle in self.registry.all() {
            let registry = self.registry.clone();
            closing.spawn(async move {
                handle.close().await;
                registry.remove(&handle.spec.id);
            });
        }
        while closing.join_next().await.is_some() {}
    }
}

/// Validates a send request into what the session writes and how it waits.
/// `background_wait_ms`: unset is 1000; 0 returns at once.
fn background_wait(req: &pb::SendRequest) -> Result<Duration> {
    let ms = match req.background_wait_ms {
        None => DEFAULT_BACKGROUND_WAIT_MS,
        Some(ms) => validate::ranged_from_zero("background_wait_ms", ms, MAX_BACKGROUND_WAIT_MS)?,
    };
    Ok(Duration::from_millis(u64::from(ms)))
}

fn send_input(req: &pb::SendRequest) -> Result<SendInput> {
    validate::text(&req.text)?;
    let timeout = validate::ranged("timeout_ms", req.timeout_ms, DEFAULT_TIMEOUT_MS, 1, 600_000)?;
    let idle = validate::ranged("idle_ms", req.idle_ms, DEFAULT_IDLE_MS, 50, 600_000)?;
    let max_result_bytes = validate::max_result_bytes(req.max_result_bytes)?;
    let mut keys = Vec::new();
    for key in &req.keys {
        keys.extend(validate::key_bytes(key)?);
    }
    Ok(SendInput {
        text: req.text.clone(),
        // Unset `submit` presses Enter after text; a keys-only send (no text) does not, so
        // `keys: ["Escape"]` sends just Escape.
        submit: req
            .submit
            .unwrap_or(!req.text.is_empty() || req.keys.is_empty()),
        keys,
        timeout: Duration::from_millis(u64::from(timeout)),
        idle: Duration::from_millis(u64::from(idle)),
        max_result_bytes,
        typeahead: req.typeahead,
        web_page: None,
    })
}

/// `s=agent%2Ft1`: the page's fragment that opens on session `id` of `agent`.
fn session_fragment(agent: &str, id: &str) -> String {
    let encoded: String = format!("{agent}/{id}")
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                char::from(b).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect();
    format!("s={encoded}")
}

#[tonic::async_trait]
impl pb::terminals_server::Terminals for Terminals {
    async fn open(&self, request: Request<pb::OpenRequest>) -> RpcResult<pb::OpenResponse> {
        let req = request.into_inner();
        let agent = req.agent_id.clone();
        let result = self.open(req).await;
        let id = result
            .as_ref()
            .ok()
            .and_then(|r| r.session.as_ref())
            .map(|s| s.session_id.clone());
        finish("Open", &agent, id.as_deref().unwrap_or(""), result)
    }

    async fn send(&self, request: Request<pb::SendRequest>) -> RpcResult<pb::SendResponse> {
        let req = request.into_inner();
        let (agent, id) = (req.agent_id.clone(), req.session_id.clone());
        finish("Send", &agent, &id, self.send(req).await)
    }

    type SendStreamStream = BoxStream<pb::SendEvent>;

    async fn send_stream(
        &self,
        request: Request<pb::SendRequest>,
    ) -> RpcResult<Self::SendStreamStream> {
        let req = request.into_inner();
        let (agent, id) = (req.agent_id.clone(), req.session_id.clone());
        finish("SendStream", &agent, &id, self.send_stream(req).await)
    }

    async fn read(&self, request: Request<pb::ReadRequest>) -> RpcResult<pb::ReadResponse> {
        let req = request.into_inner();
        let (agent, id) = (req.agent_id.clone(), req.session_id.clone());
        finish("Read", &agent, &id, self.read(req).await)
    }

    async fn signal(&self, request: Request<pb::SignalRequest>) -> RpcResult<pb::SignalResponse> {
        let req = request.into_inner();
        finish(
            "Signal",
            &req.agent_id,
            &req.session_id,
            self.signal(req.clone()).await,
        )
    }

    async fn close(&self, request: Request<pb::CloseRequest>) -> RpcResult<pb::CloseResponse> {
        let req = request.into_inner();
        let (agent, id) = (req.agent_id.clone(), req.session_id.clone());
        finish("Close", &agent, &id, self.close(req).await)
    }

    async fn web_link(
        &self,
        request: Request<pb::WebLinkRequest>,
    ) -> RpcResult<pb::WebLinkResponse> {
        let req = request.into_inner();
        finish(
            "WebLink",
            &req.agent_id,
            &req.session_id,
            self.web_link(&req),
        )
    }

    async fn list(&self, request: Request<pb::ListRequest>) -> RpcResult<pb::ListResponse> {
        let req = request.into_inner();
        finish("List", &req.agent_id, "", self.list(req.clone()).await)
    }

    type WatchStream = BoxStream<pb::WatchEvent>;

    async fn watch(&self, request: Request<pb::WatchRequest>) -> RpcResult<Self::WatchStream> {
        let req = request.into_inner();
        let (agent, id) = (req.agent_id.clone(), req.session_id.clone());
        finish("Watch", &agent, &id, self.watch(req).await)
    }

    type AttachStream = BoxStream<pb::AttachEvent>;

    async fn attach(
        &self,
        request: Request<tonic::Streaming<pb::AttachInput>>,
    ) -> RpcResult<Self::AttachStream> {
        let (agent, id, started) = self.attach(request.into_inner()).await;
        finish("Attach", &agent, &id, started)
    }

    async fn job_output(
        &self,
        request: Request<pb::JobOutputRequest>,
    ) -> RpcResult<pb::JobOutputResponse> {
        let req = request.into_inner();
        let (agent, id) = (req.agent_id.clone(), req.job_id.clone());
        finish("JobOutput", &agent, &id, self.job_output(req).await)
    }

    async fn job_kill(
        &self,
        request: Request<pb::JobKillRequest>,
    ) -> RpcResult<pb::JobKillResponse> {
        let req = request.into_inner();
        let (agent, id) = (req.agent_id.clone(), req.job_id.clone());
        finish("JobKill", &agent, &id, self.job_kill(req).await)
    }

    async fn types(&self, _request: Request<pb::TypesRequest>) -> RpcResult<pb::TypesResponse> {
        finish("Types", "", "", Ok(self.types()))
    }

    async fn commands(
        &self,
        request: Request<pb::CommandsRequest>,
    ) -> RpcResult<pb::CommandsResponse> {
        let req = request.into_inner();
        let (agent, id) = (req.agent_id.clone(), req.session_id.clone());
        finish("Commands", &agent, &id, self.commands(req).await)
    }

    async fn search(&self, request: Request<pb::SearchRequest>) -> RpcResult<pb::SearchResponse> {
        let req = request.into_inner();
        let (agent, id) = (req.agent_id.clone(), req.session_id.clone());
        finish("Search", &agent, &id, self.search(req).await)
    }
}

/// The SessionInfo of `handle`, with cwd and foreground read live from /proc.
fn info(handle: &SessionHandle) -> pb::SessionInfo {
    let state = handle.state();
    let pid = handle.pid as i32;
    let running = state.status == Status::Running;
    let cwd = crate::process::procfs::cwd(pid)
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let foreground = crate::process::procfs::tpgid(pid)
        .filter(|&fg| running && fg != pid)
        .and_then(crate::process::procfs::comm)
        .unwrap_or_default();
    pb::session_info(handle, state, cwd, foreground)
}
