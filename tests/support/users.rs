//! A system user made for one test (useradd) and removed after it (userdel): the other user
//! of the private-directory tests, and a user with a password who may use sudo for the
//! password-prompt test.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A system user that exists while this lives.
pub struct OtherUser {
    pub name: String,
    pub uid: u32,
    /// The sudoers drop-in that lets this user use sudo (with their password), if any.
    sudoers: Option<PathBuf>,
}

impl OtherUser {
    /// Creates one: needs root, which CI has. Elsewhere the test says why it cannot run, and
    /// under CI that is a failure, not a skip.
    pub fn create(tag: &str) -> Option<OtherUser> {
        if !nix::unistd::getuid().is_root() {
            super::cannot_run_here(tag, "creating another user needs root");
            return None;
        }
        let name = format!("ptyd-{tag}-{}", std::process::id());
        let made = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg(&name)
            .status()
            .expect("run useradd");
        assert!(made.success(), "useradd {name}");
        let uid = nix::unistd::User::from_name(&name)
            .expect("read the user database")
            .expect("the new user")
            .uid
            .as_raw();
        Some(OtherUser {
            name,
            uid,
            sudoers: None,
        })
    }

    /// Gives `path` to this user.
    pub fn own(&self, path: &Path) {
        nix::unistd::chown(path, Some(self.uid.into()), None).expect("chown");
    }

    /// Sets the user's password and lets them run anything with sudo after typing it.
    pub fn allow_sudo_with_password(&mut self, password: &str) {
        let mut chpasswd = Command::new("chpasswd")
            .stdin(Stdio::piped())
            .spawn()
            .expect("run chpasswd");
        use std::io::Write;
        let line = format!("{}:{password}\n", self.name);
        chpasswd
            .stdin
            .take()
            .expect("chpasswd's stdin")
            .write_all(line.as_bytes())
            .expect("write to chpasswd");
        assert!(chpasswd.wait().expect("chpasswd").success(), "chpasswd");
        let path = PathBuf::from("/etc/sudoers.d").join(&self.name);
        std::fs::write(&path, format!("{} ALL=(ALL) ALL\n", self.name)).expect("sudoers drop-in");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o440)).unwrap();
        self.sudoers = Some(path);
    }
}

impl Drop for OtherUser {
    fn drop(&mut self) {
        if let Some(path) = &self.sudoers {
            let _ = std::fs::remove_file(path);
        }
        // --force: a test that failed may have left a process of this user running.
        let _ = Command::new("userdel")
            .arg("--force")
            .arg(&self.name)
            .status();
    }
}
