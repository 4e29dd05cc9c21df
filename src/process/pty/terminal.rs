//! The terminal pair itself: opening it with the locale's IUTF8, its slave's path, and a
//! non-controlling handle on the slave.

use crate::process::fd;
use nix::sys::termios::{InputFlags, SetArg, tcgetattr, tcsetattr};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;

/// Whether the locale `env` gives its programs is UTF-8: the first of `LC_ALL`, `LC_CTYPE` and
/// `LANG` that is set and not empty decides, as in setlocale(3); none means the C locale.
pub(super) fn locale_is_utf8(env: &[(String, String)]) -> bool {
    let get = |name: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    };
    let Some(locale) = get("LC_ALL")
        .or_else(|| get("LC_CTYPE"))
        .or_else(|| get("LANG"))
    else {
        return false;
    };
    // `lang_TERRITORY.codeset@modifier`: the codeset names the encoding.
    let codeset = locale
        .split_once('.')
        .map_or("", |(_, rest)| rest.split('@').next().unwrap_or(""));
    let normalized: String = codeset
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    normalized == "utf8"
}

/// A new PTY pair of the given size, both ends close-on-exec; the line discipline treats input
/// as UTF-8 (IUTF8: erase takes a whole character) when `utf8`.
pub(super) fn open_pty(cols: u16, rows: u16, utf8: bool) -> io::Result<(OwnedFd, OwnedFd)> {
    let size = nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pair = nix::pty::openpty(&size, None)?;
    fd::set_cloexec(&pair.master)?;
    fd::set_cloexec(&pair.slave)?;
    if utf8 {
        let mut termios = tcgetattr(&pair.slave)?;
        termios.input_flags.insert(InputFlags::IUTF8);
        tcsetattr(&pair.slave, SetArg::TCSANOW, &termios)?;
    }
    Ok((pair.master, pair.slave))
}

/// The slave device of the master `master` (`/dev/pts/N`).
pub(super) fn pts_path(master: &OwnedFd) -> Option<String> {
    let name = rustix::pty::ptsname(master, Vec::new()).ok()?;
    name.into_string().ok()
}

/// A non-controlling, non-blocking handle on the slave at `path` (std opens it close-on-exec).
pub(super) fn open_slave_probe(path: &str) -> Option<OwnedFd> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
        .ok()
        .map(OwnedFd::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_utf8_locale_is_recognised_as_setlocale_picks_it() {
        let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        for (pairs, want) in [
            (env(&[]), false),
            (env(&[("LANG", "C.UTF-8")]), true),
            (env(&[("LANG", "en_US.utf8")]), true),
            (env(&[("LANG", "de_DE.UTF-8@euro")]), true),
            (env(&[("LANG", "C")]), false),
            (env(&[("LANG", "POSIX")]), false),
            (env(&[("LANG", "en_US.ISO-8859-1")]), false),
            (env(&[("LANG", "UTF-8")]), false),
            (env(&[("LANG", "C.UTF-8"), ("LC_ALL", "C")]), false),
            (env(&[("LANG", "C"), ("LC_CTYPE", "C.UTF-8")]), true),
            (env(&[("LC_CTYPE", "C"), ("LC_ALL", "en_GB.UTF-8")]), true),
            (env(&[("LC_ALL", ""), ("LANG", "C.UTF-8")]), true),
            (env(&[("LC_MESSAGES", "C.UTF-8")]), false),
        ] {
            assert_eq!(locale_is_utf8(&pairs), want, "{pairs:?}");
        }
    }

    #[test]
    fn the_pty_takes_iutf8_from_the_locale() {
        for utf8 in [true, false] {
            let (_master, slave) = open_pty(80, 24, utf8).expect("openpty");
            let termios = tcgetattr(&slave).expect("tcgetattr");
            assert_eq!(
                termios.input_flags.contains(InputFlags::IUTF8),
                utf8,
                "utf8 = {utf8}"
            );
        }
    }
}
