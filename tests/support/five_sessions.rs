//! The survival scenario both ways a daemon is replaced share (a `kill -9` and a new daemon in
//! `tests/survival.rs`, an upgrade in place in `tests/upgrade.rs`): five sessions of two agents,
//! each holding something a replacement could lose (vim with unsaved text, python's variables,
//! a flood of output, a shell's cwd and variables, a background job mid-run). `set_up` makes
//! them on the old daemon; `check` asserts, on the new one, that nothing was lost.

use super::{
    Client, history, ids, job_to_end, list, open_in, open_type, read_from, read_page, read_screen,
    run_ok, send, send_request, session_info, settle, wait_until,
};
use ptyd::pb::JobStatus;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const A: &str = "agent-a";
pub const B: &str = "agent-b";
/// Longest wait for a process to start or a file to appear on a loaded CI machine.
const PROCESS_DEADLINE: Duration = Duration::from_secs(30);

/// The five sessions and the job.
pub struct FiveSessions {
    work: PathBuf,
    vim: String,
    python: String,
    flood: String,
    prompt: String,
    job_session: String,
    job: String,
}

impl FiveSessions {
    /// Opens the five sessions in `work` and leaves each in the middle of something: the job's
    /// `sleep` runs and the flood has started when this returns.
    pub async fn set_up(c: &mut Client, work: &Path) -> FiveSessions {
        let vim = open_in(c, A, work).await;
        let python = open_type(c, A, "python", work).await;
        let flood = open_in(c, A, work).await;
        let prompt = open_in(c, B, work).await;
        let job_session = open_in(c, B, work).await;

        run_ok(c, B, &prompt, "cd /tmp; export FOO=bar").await;
        send(c, A, &python, "x = 42").await;
        send(c, A, &vim, "vim -u NONE -n notes.txt").await;
        let mut typing = send_request(A, &vim, "iunsaved text from vim");
        typing.submit = Some(false);
        typing.keys = vec!["Escape".into()];
        c.send(typing).await.expect("type in vim");
        let mut background = send_request(B, &job_session, "sleep 3; echo job-done");
        background.run_in_background = true;
        background.background_wait_ms = Some(0);
        let job = c.send(background).await.unwrap().into_inner().job_id;
        assert!(!job.is_empty(), "a job");
        // The job's command runs when the daemon is replaced.
        let job_shell = session_info(c, B, &job_session).await.unwrap().pid as i32;
        wait_until(
            PROCESS_DEADLINE,
            "the job's sleep runs",
            move || async move {
                ptyd::process::procfs::live_descendants(job_shell)
                    .into_iter()
                    .any(|p| ptyd::process::procfs::comm(p).as_deref() == Some("sleep"))
            },
        )
        .await;
        start(c, A, &flood, "seq 1 60000").await;
        FiveSessions {
            work: work.to_owned(),
            vim,
            python,
            flood,
            prompt,
            job_session,
            job,
        }
    }

    /// Asserts on the new daemon that every session is there, adopted, and lost nothing.
    pub async fn check(&self, c: &mut Client) {
        let (vim, python, flood) = (&self.vim, &self.python, &self.flood);
        let (prompt, job_session) = (&self.prompt, &self.job_session);
        assert_eq!(
            ids(c, A).await,
            [vim.clone(), python.clone(), flood.clone()]
        );
        assert_eq!(ids(c, B).await, [prompt.clone(), job_session.clone()]);
        let listed = list(c, A).await;
        assert!(listed.sessions.iter().all(|s| s.adopted), "{listed:?}");
        assert!(listed.rendered.contains("(adopted)"), "{}", listed.rendered);

        settle(c, A, flood).await;
        let numbers: Vec<u64> = history(c, A, flood)
            .await
            .iter()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        assert!(
            numbers.iter().copied().eq(1..=60000),
            "the flood's history is 1..60000 once each, in order ({} numbers, first {:?}, last \
             {:?})",
            numbers.len(),
            numbers.first(),
            numbers.last()
        );

        let screen = read_screen(c, A, vim).await.text;
        assert!(screen.contains("unsaved text from vim"), "{screen}");
        let mut save = send_request(A, vim, ":wq");
        save.idle_ms = 300;
        c.send(save).await.expect(":wq");
        let file = self.work.join("notes.txt");
        wait_until(PROCESS_DEADLINE, "vim wrote the file", || {
            let file = file.clone();
            async move {
                std::fs::read_to_string(file).is_ok_and(|t| t.contains("unsaved text from vim"))
            }
        })
        .await;

        let out = send(c, A, python, "print(x)").await;
        assert!(out.viewport.contains("42"), "{out:?}");
        let out = run_ok(c, B, prompt, "pwd; echo $FOO").await;
        assert!(out.contains("/tmp") && out.contains("bar"), "{out}");

        let (status, output) = job_to_end(c, B, &self.job, PROCESS_DEADLINE).await;
        assert_eq!(status, JobStatus::Completed, "{output}");
        assert!(output.contains("job-done"), "{output:?}");

        let next = open_in(c, A, &self.work).await;
        assert_eq!(next, "t6", "ids continue after the adopted ones");
    }

    /// The shells of four of the sessions (all but the flood's), for a check that a stop ended
    /// them.
    pub async fn shells(&self, c: &mut Client) -> Vec<u32> {
        let mut shells = Vec::new();
        for (agent, sid) in [
            (A, &self.vim),
            (A, &self.python),
            (B, &self.prompt),
            (B, &self.job_session),
        ] {
            shells.push(session_info(c, agent, sid).await.unwrap().pid);
        }
        shells
    }
}

/// Sends `text` and returns once the shell has echoed it, leaving the command running. The
/// send's caller hangs up then (what was written stays written); a send with a short deadline
/// instead could time out before the shell's prompt took the input, and drop it.
pub async fn start(c: &mut Client, agent: &str, sid: &str, text: &str) {
    let from = read_page(c, agent, sid, 0, 1).await.total_lines.max(1);
    let mut req = send_request(agent, sid, text);
    req.timeout_ms = 600_000;
    let mut sender = c.clone();
    let send = tokio::spawn(async move { sender.send(req).await });
    let (c2, agent2, sid2, text2) = (c.clone(), agent.to_owned(), sid.to_owned(), text.to_owned());
    wait_until(
        PROCESS_DEADLINE,
        "the shell echoes the command",
        move || {
            let (mut c, agent, sid, text) =
                (c2.clone(), agent2.clone(), sid2.clone(), text2.clone());
            async move {
                read_from(&mut c, &agent, &sid, from, 3)
                    .await
                    .text
                    .contains(&text)
            }
        },
    )
    .await;
    send.abort();
}
