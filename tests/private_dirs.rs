//! Where the socket and state live: a directory another user owns, or one others can write,
//! is refused by the daemon at start (naming it, its owner and mode) and by a client before it
//! connects, so nobody can swap the daemon's socket for their own. The other user is made by
//! the test (useradd) and removed after it.

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};
use support::users::OtherUser;
use support::*;

/// `ptyd serve` with its socket at `socket` and state under `dir`, run until it exits (it is
/// expected to refuse at once).
fn serve_refused(dir: &Path, socket: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ptyd"));
    child
        .args(["serve", "--socket"])
        .arg(socket)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", clean_home())
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_STATE_HOME", dir.join("state"))
        .stdin(std::process::Stdio::null());
    let out = child.output().expect("run ptyd serve");
    assert_eq!(out.status.code(), Some(1), "refused at start: {out:?}");
    out
}

fn mkdir(path: &Path, mode: u32) {
    std::fs::create_dir_all(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn the_daemon_refuses_a_socket_directory_another_user_could_change() {
    let Some(other) = OtherUser::create("sock") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // (directory, its mode, owned by the other user, the reason given)
    let cases = [
        ("theirs", 0o777, true, "another user owns it"),
        ("theirs-private", 0o700, true, "another user owns it"),
        ("open", 0o777, false, "every user can write to it"),
        ("group", 0o770, false, "its group can write to it"),
    ];
    for (name, mode, theirs, reason) in cases {
        let dir = tmp.path().join(name);
        mkdir(&dir, mode);
        if theirs {
            other.own(&dir);
        }
        let socket = dir.join("ptyd.sock");
        let out = serve_refused(tmp.path(), &socket);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("socket directory {}", dir.display())),
            "{name}: names it: {stderr}"
        );
        assert!(stderr.contains(reason), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("mode {mode:04o}")),
            "{name}: {stderr}"
        );
        let owner = if theirs {
            format!("uid {} ({})", other.uid, other.name)
        } else {
            "uid 0 (root)".to_string()
        };
        assert!(stderr.contains(&owner), "{name}: {stderr}");
        assert!(!socket.exists(), "{name}: nothing was bound there");
        // The mode is as it was: refused, not silently changed.
        let now = std::fs::metadata(&dir).unwrap().mode() & 0o7777;
        assert_eq!(now, mode, "{name}");
    }
}

#[test]
fn the_daemon_refuses_a_state_directory_another_user_owns() {
    let Some(other) = OtherUser::create("state") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state/ptyd");
    mkdir(&state, 0o777);
    other.own(&state);
    mkdir(&tmp.path().join("run"), 0o700);
    let out = serve_refused(tmp.path(), &tmp.path().join("run/ptyd.sock"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("state directory {}", state.display()))
            && stderr.contains("another user owns it")
            && stderr.contains(&format!("uid {} ({})", other.uid, other.name)),
        "{stderr}"
    );
    assert!(!tmp.path().join("run/ptyd.sock").exists(), "no socket left");
}

#[tokio::test]
async fn a_client_refuses_a_socket_another_user_could_have_swapped_in() {
    let Some(other) = OtherUser::create("client") else {
        return;
    };
    timed(async {
        let d = start_daemon().await;
        // The daemon's own socket, given to the other user: as if they had bound theirs there.
        other.own(&d.socket);
        // Not blocking: this thread serves the daemon the CLI talks to.
        let cli = |socket: &Path| {
            let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ptyd"));
            cmd.args(["--socket"])
                .arg(socket)
                .arg("list")
                .env_remove("PTYD_SOCKET")
                .kill_on_drop(true);
            async move { cmd.output().await.expect("run ptyd list") }
        };
        let out = cli(&d.socket).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(
            stderr.contains(&format!("refusing the socket {}", d.socket.display()))
                && stderr.contains(&format!("uid {} ({})", other.uid, other.name)),
            "{stderr}"
        );
        // Ours again, in a directory everyone may write to: refused too.
        nix::unistd::chown(&d.socket, Some(nix::unistd::getuid()), None).unwrap();
        std::fs::set_permissions(d.dir(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let out = cli(&d.socket).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("every user can write to it"), "{stderr}");
        // Made private again, the client connects.
        std::fs::set_permissions(d.dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let out = cli(&d.socket).await;
        assert!(out.status.success(), "{out:?}");
        d.stop().await;
    })
    .await;
}
