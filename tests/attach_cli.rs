//! `ptyd attach` under a real PTY, as a person runs it: keys in and the screen out, the
//! session at the person's window size (and following a resize), the agent refused meanwhile,
//! Ctrl-] detaching with the size given back, and the person's terminal restored (echo and
//! line mode back) after a detach and after SIGTERM.

mod support;

use nix::sys::termios::LocalFlags;
use portable_pty::{CommandBuilder, PtySize, native_pty_system};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;
use tonic::Code;

const A: &str = "agent-a";

/// `ptyd attach SESSION` running on a PTY of its own, its screen collected.
struct AttachCli {
    master: Box<dyn portable_pty::MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    screen: Arc<Mutex<Vec<u8>>>,
    /// The PTY hung up: `ptyd attach` exited. (Its exit status is not read: the in-process
    /// daemon's reaper may collect it first.)
    hung_up: Arc<Mutex<bool>>,
}

impl AttachCli {
    fn start(socket: &std::path::Path, sid: &str, cols: u16, rows: u16) -> AttachCli {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_ptyd"));
        cmd.args(["attach", sid, "--agent", A, "--socket"]);
        cmd.arg(socket);
        cmd.env("HOME", clean_home());
        let child = pair.slave.spawn_command(cmd).expect("spawn ptyd attach");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let screen = Arc::new(Mutex::new(Vec::new()));
        let hung_up = Arc::new(Mutex::new(false));
        let (s, h) = (screen.clone(), hung_up.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().extend_from_slice(&buf[..n]);
            }
            *h.lock().unwrap() = true;
        });
        let writer = pair.master.take_writer().unwrap();
        AttachCli {
            master: pair.master,
            writer,
            child,
            screen,
            hung_up,
        }
    }

    fn type_keys(&mut self, keys: &[u8]) {
        self.writer.write_all(keys).unwrap();
        self.writer.flush().unwrap();
    }

    async fn sees(&self, needle: &str, what: &str) {
        let screen = self.screen.clone();
        wait_until(Duration::from_secs(20), what, || {
            let found = String::from_utf8_lossy(&screen.lock().unwrap()).contains(needle);
            async move { found }
        })
        .await;
    }

    /// Whether the person's terminal echoes and reads lines again, as before the attach.
    fn restored(&self) -> bool {
        let t = self.master.get_termios().expect("termios");
        t.local_flags.contains(LocalFlags::ECHO) && t.local_flags.contains(LocalFlags::ICANON)
    }

    /// Waits until `ptyd attach` has exited and said `said` last.
    async fn exits_saying(&self, said: &str, what: &str) {
        let (screen, hung_up) = (self.screen.clone(), self.hung_up.clone());
        wait_until(Duration::from_secs(20), what, || {
            let done = *hung_up.lock().unwrap();
            async move { done }
        })
        .await;
        let text = String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
        let last = text
            .trim_end()
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned();
        assert!(last.contains(said), "{what}: {text:?}");
    }
}

/// Waits until List shows `sid` at `cols` x `rows`; returns who holds its keyboard.
async fn wait_for_size(c: &mut Client, sid: &str, want: (u32, u32), what: &str) -> String {
    wait_for_info(c, A, sid, what, |i| (i.cols, i.rows) == want)
        .await
        .attached
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ptyd_attach_types_shows_resizes_and_gives_everything_back() {
    timed(async {
        let mut d = start_daemon().await;
        let socket = d.socket.clone();
        let c = &mut d.client;
        let sid = open(c, A).await;
        run_ok(c, A, &sid, "echo shown-$((1+1))").await;

        let mut cli = AttachCli::start(&socket, &sid, 90, 25);
        cli.sees("Ctrl-] detaches", "the attach says how to detach")
            .await;
        cli.sees("shown-2", "the screen is drawn first").await;
        let holder = wait_for_size(c, &sid, (90, 25), "the person's size").await;
        assert!(holder.starts_with("ptyd attach"), "{holder}");
        assert!(!cli.restored(), "raw mode while attached");

        cli.type_keys(b"echo cli-$((2+3))\r");
        cli.sees("cli-5", "the typed command ran").await;
        let e = c
            .send(send_request(A, &sid, "echo agent"))
            .await
            .expect_err("the agent waits");
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");

        cli.master
            .resize(PtySize {
                rows: 30,
                cols: 100,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        wait_for_size(c, &sid, (100, 30), "the window resized").await;
        // Ctrl-C goes to the session, not to ptyd attach.
        cli.type_keys(b"sleep 30\r");
        cli.sees("sleep 30", "the sleep was typed").await;
        cli.type_keys(b"\x03");
        cli.type_keys(b"echo still-$((3+4))\r");
        cli.sees("still-7", "Ctrl-C reached the session, not the CLI")
            .await;

        cli.type_keys(b"\x1d");
        cli.exits_saying(&format!("[ptyd: detached from {sid}]"), "Ctrl-] detaches")
            .await;
        assert!(
            cli.restored(),
            "the terminal is back in line mode with echo"
        );
        wait_for_size(c, &sid, (120, 40), "the size given back").await;
        let (_, rendered) = send_with(c, send_request(A, &sid, "echo agent")).await;
        assert!(
            rendered.contains("[a person typed in this session: c"),
            "{rendered}"
        );

        // SIGTERM to the CLI restores the terminal too.
        let cli = AttachCli::start(&socket, &sid, 90, 25);
        wait_for_size(c, &sid, (90, 25), "attached again").await;
        let pid = cli.child.process_id().expect("pid");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        cli.exits_saying(&format!("SIGTERM: detached from {sid}"), "SIGTERM ends it")
            .await;
        assert!(cli.restored(), "the terminal is restored after SIGTERM");
        wait_for_size(c, &sid, (120, 40), "the size given back after SIGTERM").await;
    })
    .await;
}
