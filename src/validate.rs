//! Request validation: ranges, defaults and names from the contract, each failure a one-line
//! message naming the field. Pure.

use crate::error::{Error, Result};
use nix::sys::signal::Signal;

/// Default `max_result_bytes`.
pub(crate) const DEFAULT_MAX_RESULT_BYTES: usize = 262_144;
/// Smallest allowed `max_result_bytes`.
pub(crate) const MIN_RESULT_BYTES: u32 = 64;
/// Largest allowed `max_result_bytes` (16 MiB).
pub(crate) const MAX_RESULT_BYTES: u32 = 16 << 20;
/// Largest `text` accepted by a send (1 MiB).
pub(crate) const MAX_TEXT_BYTES: usize = 1 << 20;
/// The kernel's canonical-mode line limit: bytes of one line beyond it are discarded.
pub(crate) const KERNEL_LINE_LIMIT: usize = 4095;

/// Checks `agent_id`: 1 to 128 bytes, no control characters.
pub(crate) fn agent_id(id: &str) -> Result<()> {
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
pub(crate) fn required_id(field: &str, id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid(format!("{field} is required")));
    }
    Ok(())
}

/// A value in `min..=max`, with 0 meaning `default`.
pub(crate) fn ranged(field: &str, value: u32, default: u32, min: u32, max: u32) -> Result<u32> {
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

/// The terminal sizes a session may have (docs/api.md).
pub(crate) const COLS: std::ops::RangeInclusive<u16> = 20..=1000;
pub(crate) const ROWS: std::ops::RangeInclusive<u16> = 5..=1000;

/// A terminal dimension in `range`, with 0 meaning `default`.
pub(crate) fn size(
    field: &str,
    value: u32,
    default: u16,
    range: std::ops::RangeInclusive<u16>,
) -> Result<u16> {
    let value = ranged(
        field,
        value,
        u32::from(default),
        u32::from(*range.start()),
        u32::from(*range.end()),
    )?;
    // In range, so it fits.
    Ok(value as u16)
}

/// A session's display name: at most 128 bytes, no control characters.
pub(crate) fn session_name(name: &str) -> Result<()> {
    if name.len() > 128 || name.chars().any(char::is_control) {
        return Err(Error::invalid(
            "name must be at most 128 bytes without control characters",
        ));
    }
    Ok(())
}

/// A value whose range starts at 0 (so 0 is a value, not "the default"): `field` must be at most
/// `max`.
pub(crate) fn ranged_from_zero(field: &str, value: u32, max: u32) -> Result<u32> {
    if value > max {
        return Err(Error::invalid(format!(
            "{field} must be between 0 and {max}, got {value}"
        )));
    }
    Ok(value)
}

/// A command id (`c12`, canonical: no leading zeros) or `last`; empty is none.
pub(crate) fn command_id(id: &str) -> Result<Option<String>> {
    if id.is_empty() {
        return Ok(None);
    }
    let canonical = id == "last"
        || id.strip_prefix('c').is_some_and(|n| {
            !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit())
        });
    if !canonical {
        return Err(Error::invalid(format!(
            "command_id {} is not a command id: c1, c2, ... (Commands lists them) or last",
            quoted(id)
        )));
    }
    Ok(Some(id.to_owned()))
}

/// The longest search pattern taken, in bytes.
pub(crate) const MAX_PATTERN: usize = 4096;

/// A search pattern compiled (`ignore_case`: folding case). A pattern the regex crate refuses
/// is refused with its reason, on one line.
pub(crate) fn pattern(pattern: &str, ignore_case: bool) -> Result<regex::Regex> {
    if pattern.is_empty() {
        return Err(Error::invalid("pattern is required"));
    }
    if pattern.len() > MAX_PATTERN {
        return Err(Error::invalid(format!(
            "pattern is {} bytes; at most {MAX_PATTERN}",
            pattern.len()
        )));
    }
    regex::RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .build()
        .map_err(|e| {
            let reason = match e {
                regex::Error::Syntax(text) => {
                    let last = text.lines().rev().find(|l| l.starts_with("error:"));
                    last.unwrap_or(&text)
                        .trim_start_matches("error: ")
                        .to_owned()
                }
                other => other.to_string(),
            };
            Error::invalid(format!(
                "pattern {} is not a regular expression: {reason}",
                quoted(pattern)
            ))
        })
}

/// The most bytes of a request field that a message or a log line quotes (docs/security.md):
/// a 3 MiB session id must not come back whole, nor fill the log.
pub(crate) const MAX_QUOTED: usize = 200;

/// `value` quoted for a message or a log line: as `{:?}` shows it, at most `MAX_QUOTED` bytes of
/// it (cut at a character boundary), then `…` when cut.
pub(crate) fn quoted(value: &str) -> String {
    let head = head(value);
    if head.len() == value.len() {
        format!("{value:?}")
    } else {
        format!("{head:?}…")
    }
}

/// `value` as a log field: itself up to `MAX_QUOTED` bytes, else its head and `…`.
pub(crate) fn clipped(value: &str) -> std::borrow::Cow<'_, str> {
    let head = head(value);
    if head.len() == value.len() {
        std::borrow::Cow::Borrowed(value)
    } else {
        std::borrow::Cow::Owned(format!("{head}…"))
    }
}

/// The first `MAX_QUOTED` bytes of `value`, fewer to end at a character boundary.
fn head(value: &str) -> &str {
    let mut end = value.len().min(MAX_QUOTED);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

/// `max_result_bytes`, defaulted.
pub(crate) fn max_result_bytes(value: u32) -> Result<usize> {
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
pub(crate) fn signal(name: &str) -> Result<Signal> {
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
                "signal {} is not supported; use one of SIGINT, SIGTERM, SIGKILL, SIGTSTP, SIGHUP",
                quoted(name)
            )));
        }
    })
}

/// The bytes a named key sends (normal cursor mode).
pub(crate) fn key_bytes(name: &str) -> Result<Vec<u8>> {
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
        "keys: unknown key {}; known keys are Enter, Tab, Escape, Backspace, Delete, Up, \
         Down, Left, Right, Home, End, PageUp, PageDown, F1..F12, C-a..C-z",
        quoted(name)
    )))
}

/// What an environment variable name may be, for messages: POSIX's portable names, the only
/// ones every shell can read back (`$A-B` is `$A` followed by `-B`).
pub(crate) const ENV_NAME_RULE: &str = "letters, digits and _, not starting with a digit";

/// Whether `name` is an environment variable name ([`ENV_NAME_RULE`]). The one rule for names in
/// requests and in the config file.
pub(crate) fn is_env_name(name: &str) -> bool {
    name.bytes().next().is_some_and(|b| !b.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Checks one entry of a request's `env`: a name by [`ENV_NAME_RULE`], a value without NUL (the
/// kernel's environment is NUL-separated).
pub(crate) fn env_var(name: &str, value: &str) -> Result<()> {
    if !is_env_name(name) {
        return Err(Error::invalid(format!(
            "env name {} is invalid: names are {ENV_NAME_RULE}",
            quoted(name)
        )));
    }
    if value.contains('\0') {
        return Err(Error::invalid(format!(
            "env value of {name} contains a NUL byte"
        )));
    }
    Ok(())
}

/// Checks a send's `text` size.
pub(crate) fn text(text: &str) -> Result<()> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(Error::invalid(format!(
            "text is {} bytes; at most {MAX_TEXT_BYTES} (1 MiB) may be sent at once",
            text.len()
        )));
    }
    Ok(())
}

/// The longest line (between `\r`/`\n`) in `bytes`.
pub(crate) fn longest_line(bytes: &[u8]) -> usize {
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
    fn env_names_follow_one_rule() {
        for (name, ok) in [
            ("PATH", true),
            ("_", true),
            ("LC_ALL", true),
            ("x1", true),
            ("", false),
            ("1X", false),
            ("A-B", false),
            ("A=B", false),
            ("A B", false),
            ("A\0B", false),
            ("É", false),
        ] {
            assert_eq!(is_env_name(name), ok, "{name:?}");
            assert_eq!(env_var(name, "v").is_ok(), ok, "{name:?}");
        }
        let message = env_var("A-B", "v").unwrap_err().to_string();
        assert!(message.starts_with("env name \"A-B\""), "{message}");
        assert!(
            env_var("A", "x\0y")
                .unwrap_err()
                .to_string()
                .contains("NUL")
        );
    }

    #[test]
    fn agent_ids() {
        assert!(agent_id("").is_err());
        assert!(agent_id(&"a".repeat(129)).is_err());
        assert!(agent_id("a\u{7}b").is_err());
        assert!(agent_id(&"a".repeat(128)).is_ok());
    }
}
