//! Request validation: ranges, defaults and names from the contract, each failure a one-line
//! message naming the field. Pure.

use crate::error::{Error, Result};
use nix::sys::signal::Signal;

/// Default `max_result_bytes`.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 262_144;
/// Smallest allowed `max_result_bytes`.
pub const MIN_RESULT_BYTES: u32 = 64;
/// Largest allowed `max_result_bytes` (16 MiB).
pub const MAX_RESULT_BYTES: u32 = 16 << 20;
/// Largest `text` accepted by a send (1 MiB).
pub const MAX_TEXT_BYTES: usize = 1 << 20;
/// The kernel's canonical-mode line limit: bytes of one line beyond it are discarded.
pub const KERNEL_LINE_LIMIT: usize = 4095;

/// Checks `agent_id`: 1 to 128 bytes, no control characters.
pub fn agent_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid("agent_id is required (1 to 128 bytes)"));
    }
    if id.len() > 128 {
        return Err(Error::invalid(format!(
            "agent_id is {} bytes; at most 128 are allowed",
            id.len()
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid(
            "agent_id must not contain control characters",
        ));
    }
    Ok(())
}

/// Checks that an id field is present.
pub fn required_id(field: &str, id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid(format!("{field} is required")));
    }
    Ok(())
}

/// A value in `min..=max`, with 0 meaning `default`.
pub fn ranged(field: &str, value: u32, default: u32, min: u32, max: u32) -> Result<u32> {
    if value == 0 {
        return Ok(default);
    }
    if value < min || value > max {
        return Err(Error::invalid(format!(
            "{field} must be between {min} and {max}, got {value}"
        )));
    }
    Ok(value)
}

/// `max_result_bytes`, defaulted.
pub fn max_result_bytes(value: u32) -> Result<usize> {
    ranged(
        "max_result_bytes",
        value,
        DEFAULT_MAX_RESULT_BYTES as u32,
        MIN_RESULT_BYTES,
        MAX_RESULT_BYTES,
    )
    .map(|v| v as usize)
}

/// Parses a signal name: one of INT, TERM, KILL, TSTP, HUP, with optional `SIG` prefix, any case.
pub fn signal(name: &str) -> Result<Signal> {
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    Ok(match bare {
        "INT" => Signal::SIGINT,
        "TERM" => Signal::SIGTERM,
        "KILL" => Signal::SIGKILL,
        "TSTP" => Signal::SIGTSTP,
        "HUP" => Signal::SIGHUP,
        _ => {
            return Err(Error::invalid(format!(
                "signal {name:?} is not supported; use one of SIGINT, SIGTERM, SIGKILL, SIGTSTP, SIGHUP"
            )));
        }
    })
}

/// The bytes a named key sends (normal cursor mode).
pub fn key_bytes(name: &str) -> Result<Vec<u8>> {
    let lower = name.to_ascii_lowercase();
    let fixed: Option<&[u8]> = match lower.as_str() {
        "enter" => Some(b"\r"),
        "tab" => Some(b"\t"),
        "escape" | "esc" => Some(b"\x1b"),
        "backspace" => Some(b"\x7f"),
        "delete" => Some(b"\x1b[3~"),
        "up" => Some(b"\x1b[A"),
        "down" => Some(b"\x1b[B"),
        "right" => Some(b"\x1b[C"),
        "left" => Some(b"\x1b[D"),
        "home" => Some(b"\x1b[H"),
        "end" => Some(b"\x1b[F"),
        "pageup" => Some(b"\x1b[5~"),
        "pagedown" => Some(b"\x1b[6~"),
        "f1" => Some(b"\x1bOP"),
        "f2" => Some(b"\x1bOQ"),
        "f3" => Some(b"\x1bOR"),
        "f4" => Some(b"\x1bOS"),
        "f5" => Some(b"\x1b[15~"),
        "f6" => Some(b"\x1b[17~"),
        "f7" => Some(b"\x1b[18~"),
        "f8" => Some(b"\x1b[19~"),
        "f9" => Some(b"\x1b[20~"),
        "f10" => Some(b"\x1b[21~"),
        "f11" => Some(b"\x1b[23~"),
        "f12" => Some(b"\x1b[24~"),
        _ => None,
    };
    if let Some(bytes) = fixed {
        return Ok(bytes.to_vec());
    }
    if let Some(letter) = lower.strip_prefix("c-")
        && let [c @ b'a'..=b'z'] = letter.as_bytes()
    {
        return Ok(vec![c - b'a' + 1]);
    }
    Err(Error::invalid(format!(
        "keys: unknown key {name:?}; known keys are Enter, Tab, Escape, Backspace, Delete, Up, \
         Down, Left, Right, Home, End, PageUp, PageDown, F1..F12, C-a..C-z"
    )))
}

/// Checks an environment variable name.
pub fn env_name(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(Error::invalid(format!(
            "env name {name:?} is invalid: names must be non-empty and contain no '=' or NUL"
        )));
    }
    Ok(())
}

/// Checks a send's `text` size.
pub fn text(text: &str) -> Result<()> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(Error::invalid(format!(
            "text is {} bytes; at most {MAX_TEXT_BYTES} (1 MiB) may be sent at once",
            text.len()
        )));
    }
    Ok(())
}

/// The longest line (between `\r`/`\n`) in `bytes`.
pub fn longest_line(bytes: &[u8]) -> usize {
    bytes
        .split(|b| *b == b'\n' || *b == b'\r')
        .map(<[u8]>::len)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names() {
        for name in ["INT", "sigint", "SIGINT", " SigInt "] {
            assert_eq!(signal(name).unwrap(), Signal::SIGINT);
        }
        assert!(signal("SIGFOO").unwrap_err().to_string().contains("signal"));
    }

    #[test]
    fn keys() {
        assert_eq!(key_bytes("C-c").unwrap(), vec![3]);
        assert_eq!(key_bytes("Enter").unwrap(), b"\r".to_vec());
        assert_eq!(key_bytes("F12").unwrap(), b"\x1b[24~".to_vec());
        assert!(
            key_bytes("C-1")
                .unwrap_err()
                .to_string()
                .starts_with("keys")
        );
        assert!(key_bytes("Bogus").is_err());
    }

    #[test]
    fn ranges() {
        assert_eq!(ranged("cols", 0, 120, 20, 1000).unwrap(), 120);
        assert!(
            ranged("cols", 19, 120, 20, 1000)
                .unwrap_err()
                .to_string()
                .contains("cols")
        );
        assert!(max_result_bytes(63).is_err());
        assert_eq!(max_result_bytes(64).unwrap(), 64);
    }

    #[test]
    fn agent_ids() {
        assert!(agent_id("").is_err());
        assert!(agent_id(&"a".repeat(129)).is_err());
        assert!(agent_id("a\u{7}b").is_err());
        assert!(agent_id(&"a".repeat(128)).is_ok());
    }
}
