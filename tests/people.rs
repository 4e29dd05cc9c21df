//! People in the loop: `Attach` over gRPC (keys in, screen out, one holder, the agent refused
//! meanwhile and told afterwards, the size given back), `Watch` starting with the screen,
//! `ptyd attach` under a real PTY (raw mode, Ctrl-], the terminal restored), and password
//! prompts that say `input_hidden` and whose secret reaches nothing the daemon writes.

mod support;

use ptyd::pb::{AttachInput, CommandsRequest, SearchRequest, WaitReason, WatchRequest};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::users::OtherUser;
use support::*;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

const A: &str = "agent-a";

/// A person attached over gRPC: what they type goes in, what the session prints is collected.
struct Person {
    keys: Option<mpsc::Sender<AttachInput>>,
    output: Arc<Mutex<Vec<u8>>>,
    ended: Arc<Mutex<bool>>,
    task: tokio::task::JoinHandle<()>,
}

/// Attaches to `sid` as `holder` with a window of `cols` x `rows` (0 x 0: none given).
async fn attach(
    socket: &Path,
    sid: &str,
    holder: &str,
    size: (u32, u32),
) -> Result<Person, tonic::Status> {
    let mut c = ptyd::client::connect(socket).await.expect("connect");
    let (tx, rx) = mpsc::channel(16);
    tx.send(AttachInput {
        agent_id: A.into(),
        session_id: sid.into(),
        holder: holder.into(),
        cols: size.0,
        rows: size.1,
        ..Default::default()
    })
    .await
    .unwrap();
    let mut stream = c.attach(ReceiverStream::new(rx)).await?.into_inner();
    let output = Arc::new(Mutex::new(Vec::new()));
    let ended = Arc::new(Mutex::new(false));
    let (o, e) = (output.clone(), ended.clone());
    let task = tokio::spawn(async move {
        while let Ok(Some(event)) = stream.message().await {
            o.lock().unwrap().extend_from_slice(&event.output);
        }
        *e.lock().unwrap() = true;
        drop(c);
    });
    Ok(Person {
        keys: Some(tx),
        output,
        ended,
        task,
    })
}

impl Person {
    async fn type_keys(&self, keys: &str) {
        let input = AttachInput {
            keys: keys.as_bytes().to_vec(),
            ..Default::default()
        };
        self.keys.as_ref().unwrap().send(input).await.unwrap();
    }

    async fn resize(&self, cols: u32, rows: u32) {
        let input = AttachInput {
            cols,
            rows,
            ..Default::default()
        };
        self.keys.as_ref().unwrap().send(input).await.unwrap();
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    async fn sees(&self, needle: &str, what: &str) {
        let output = self.output.clone();
        wait_until(Duration::from_secs(20), what, || {
            let found = String::from_utf8_lossy(&output.lock().unwrap()).contains(needle);
            async move { found }
        })
        .await;
    }

    /// Closes the person's side of the stream: the detach.
    fn detach(&mut self) {
        self.keys = None;
    }
}

impl Drop for Person {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until List shows `sid` held by `holder` ("": nobody) at `cols` x `rows`.
async fn wait_for_state(c: &mut Client, sid: &str, want: (&str, u32, u32), what: &str) {
    wait_for_info(c, A, sid, what, |i| {
        (i.attached.as_str(), i.cols, i.rows) == want
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_takes_the_keyboard_and_the_agent_is_told_afterwards() {
    timed(async {
        let mut d = start_daemon().await;
        let socket = d.socket.clone();
        let c = &mut d.client;
        let sid = open(c, A).await;
        run_ok(c, A, &sid, "echo before-$((40+2))").await;

        let mut person = attach(&socket, &sid, "test person", (100, 30))
            .await
            .expect("Attach");
        person
            .sees("before-42", "the redraw shows the screen")
            .await;
        wait_for_state(c, &sid, ("test person", 100, 30), "the person's size").await;
        let list = list(c, A).await.rendered;
        assert!(list.contains("(attached: test person)"), "{list}");

        // One holder at a time; the agent's input waits for the person.
        let second = attach(&socket, &sid, "someone else", (0, 0)).await;
        let e = second.err().expect("a second Attach is refused");
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("test person"), "{e:?}");
        let refused = c.send(send_request(A, &sid, "echo agent")).await;
        let e = refused.expect_err("a send with input is refused");
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        assert!(
            e.message()
                .contains(&format!("a person is typing in {sid}")),
            "{e:?}"
        );
        let mut wait = send_request(A, &sid, "");
        wait.submit = Some(false);
        let (fr, _) = send_with(c, wait.clone()).await;
        assert_eq!(
            fr.wait_reason(),
            WaitReason::Prompt,
            "an empty send waits: {fr:?}"
        );

        person.type_keys("echo typed-by-$((6*7))\r").await;
        person.sees("typed-by-42", "the person's command ran").await;
        person.resize(90, 20).await;
        wait_for_state(c, &sid, ("test person", 90, 20), "the window resized").await;
        let records = commands(c, &sid).await;
        let typed = records
            .iter()
            .find(|r| r.command.contains("typed-by"))
            .unwrap_or_else(|| panic!("the person's command has a record: {records:?}"));
        assert_eq!(typed.typed_by, "person", "{typed:?}");
        let number = typed.command_id.clone();

        person.detach();
        wait_for_state(c, &sid, ("", 120, 40), "the detach gave the size back").await;
        let (fr, rendered) = send_with(c, send_request(A, &sid, "echo after")).await;
        assert_eq!(fr.viewport, "after", "{rendered}");
        let note = format!("[a person typed in this session: {number}]");
        assert!(rendered.contains(&note), "{rendered}");
        let (_, rendered) = send_with(c, send_request(A, &sid, "echo again")).await;
        assert!(
            !rendered.contains("a person typed"),
            "said once: {rendered}"
        );
        let agents = commands(c, &sid).await;
        assert_eq!(agents.last().unwrap().typed_by, "agent", "{agents:?}");

        // A person who only looks in starts with the screen too.
        let watched = watch_first(&socket, &sid).await;
        assert!(watched.contains("typed-by-42"), "{watched:?}");
        assert!(watched.contains("again"), "{watched:?}");
        // And once the session ends, so does the person's stream.
        let person = attach(&socket, &sid, "last", (0, 0)).await.expect("Attach");
        person.type_keys("exit\r").await;
        let ended = person.ended.clone();
        wait_until(
            Duration::from_secs(20),
            "the stream ends with the session",
            || {
                let e = *ended.lock().unwrap();
                async move { e }
            },
        )
        .await;
        assert!(person.text().contains("exit"), "{}", person.text());
    })
    .await;
}

/// A person who attaches to an unknown or another agent's session finds nothing, and a bad
/// window size names its field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_refuses_what_is_not_the_agents_and_bad_sizes() {
    timed(async {
        let mut d = start_daemon().await;
        let socket = d.socket.clone();
        let sid = open(&mut d.client, A).await;
        let mut c = ptyd::client::connect(&socket).await.unwrap();
        let foreign = |agent: &str, cols, rows| AttachInput {
            agent_id: agent.into(),
            session_id: sid.clone(),
            cols,
            rows,
            ..Default::default()
        };
        for (input, code, words) in [
            (foreign("agent-b", 0, 0), Code::NotFound, sid.as_str()),
            (foreign(A, 80, 0), Code::InvalidArgument, "rows"),
            (foreign(A, 1, 24), Code::InvalidArgument, "cols"),
            (foreign("", 0, 0), Code::InvalidArgument, "agent_id"),
        ] {
            let stream = tokio_stream::iter([input.clone()]);
            let e = c.attach(stream).await.expect_err("refused");
            assert_eq!(e.code(), code, "{input:?}: {e:?}");
            assert!(e.message().contains(words), "{input:?}: {e:?}");
        }
        let info = session_info(&mut d.client, A, &sid).await.unwrap();
        assert_eq!(info.attached, "", "no refused attach holds the keyboard");
    })
    .await;
}

/// The first event of a Watch of `sid`.
async fn watch_first(socket: &Path, sid: &str) -> String {
    let mut c = ptyd::client::connect(socket).await.unwrap();
    let mut stream = c
        .watch(WatchRequest {
            agent_id: A.into(),
            session_id: sid.into(),
            replay_lines: 0,
        })
        .await
        .expect("Watch")
        .into_inner();
    let first = stream.message().await.expect("an event").expect("one");
    String::from_utf8_lossy(&first.output).into_owned()
}

async fn commands(c: &mut Client, sid: &str) -> Vec<ptyd::pb::CommandRecord> {
    c.commands(CommandsRequest {
        agent_id: A.into(),
        session_id: sid.into(),
        ..Default::default()
    })
    .await
    .expect("Commands")
    .into_inner()
    .commands
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if std::fs::read(&path)
            .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
        {
            found.push(path.display().to_string());
        }
    }
    found
}

/// `read -s`, python's getpass and sudo end with `input_hidden` and say how a person answers; the
/// secret typed through Attach lets the command go on and is nowhere the daemon keeps it
/// (history, search, records, the state directory's journal and records).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_prompt_is_answered_by_a_person_and_the_secret_is_kept_nowhere() {
    timed(async {
        // sudo asks for the password of the user who runs it (root is never asked): a user
        // made for this test, with the password the person will type (the third secret).
        // Made first, so that it is removed after the daemon has ended its sessions.
        let mut sudoer = OtherUser::create("sudo").expect("a user for sudo");
        sudoer.allow_sudo_with_password("hunter2-secret2");
        let mut d = start_daemon().await;
        let socket = d.socket.clone();
        let state = d.dir().join("state");
        let c = &mut d.client;
        let sid = open(c, A).await;
        let sudo = format!(
            "setpriv --reuid={u} --regid={u} --init-groups sh -c 'sudo -k; sudo true && echo sudo-$((6*7))'",
            u = sudoer.name
        );
        // (what the prompt needs installed, the command, what it prints once answered)
        let prompts = [
            ("bash", "read -s -p 'Password: ' X; echo \"got ${#X}\"", "got 15"),
            (
                "python3",
                "python3 -c 'import getpass; s = getpass.getpass(\"Secret: \"); print(\"got\", len(s))'",
                "got 15",
            ),
            ("sudo", sudo.as_str(), "sudo-42"),
        ];
        for (i, (program, command, answer)) in prompts.into_iter().enumerate() {
            if !needs(program) {
                continue;
            }
            // The person's screen starts with the command line: what shows that the command
            // went on must not be in it.
            assert!(!command.contains(answer), "{command}");
            let (fr, rendered) = send_with(c, send_request(A, &sid, command)).await;
            assert_eq!(fr.wait_reason(), WaitReason::StdinRead, "{rendered}");
            assert!(fr.input_hidden, "{command}: {fr:?}");
            let hint = format!(
                "[wait: stdin_read (input hidden: a password prompt; a person can type it: \
                 ptyd attach {sid} --agent {A})]"
            );
            assert!(rendered.contains(&hint), "{rendered}");

            let mut person = attach(&socket, &sid, "admin", (0, 0)).await.expect("Attach");
            let secret = format!("hunter2-secret{i}");
            person.type_keys(&format!("{secret}\r")).await;
            person.sees(answer, "the command went on").await;
            person.detach();
            wait_for_state(c, &sid, ("", 120, 40), "detached").await;
            let mut wait = send_request(A, &sid, "");
            wait.submit = Some(false);
            let (fr, rendered) = send_with(c, wait).await;
            assert_eq!(fr.wait_reason(), WaitReason::Prompt, "{rendered}");
            assert!(rendered.contains("[a person typed in this session]"), "{rendered}");
            assert!(!fr.input_hidden, "{fr:?}");
        }
        // An ordinary read echoes, and is not a password prompt.
        let (fr, _) = send_with(c, send_request(A, &sid, "read Y")).await;
        assert_eq!(fr.wait_reason(), WaitReason::StdinRead, "{fr:?}");
        assert!(!fr.input_hidden, "{fr:?}");
        send_with(c, send_request(A, &sid, "visible")).await;

        let found = c
            .search(SearchRequest {
                agent_id: A.into(),
                session_id: sid.clone(),
                pattern: "hunter2".into(),
                ..Default::default()
            })
            .await
            .expect("Search")
            .into_inner();
        assert_eq!(found.total_matches, 0, "{}", found.rendered);
        assert!(
            !history(c, A, &sid).await.join("\n").contains("hunter2"),
            "history"
        );
        let records = commands(c, &sid).await;
        assert!(!format!("{records:?}").contains("hunter2"), "{records:?}");
        assert_eq!(files_holding(&state, b"hunter2"), Vec::<String>::new());
        assert!(!files_holding(&state, b"visible").is_empty(), "the journal is there");
    })
    .await;
}
