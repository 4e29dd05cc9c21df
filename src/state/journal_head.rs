//! The head of a session's output journal: a version line, then what a new daemon restores
//! before it replays the output that follows, once the journal was compacted: a terminal
//! checkpoint (history lines and the bytes that redraw the screen, see `screen::Checkpoint`)
//! and the shell-integration marks that bring a new shell state where the old one was.
//!
//! Layout: `ptyd-journal 1\n`, a JSON line (`null` for a journal that was never compacted),
//! the checkpoint's history text and screen bytes (lengths in the JSON line), then the output.

use crate::marks::{Mark, MarkKey};
use crate::screen::{Checkpoint, MarkEvent, Position};
use serde::{Deserialize, Serialize};
use std::io;

const VERSION_LINE: &[u8] = b"ptyd-journal 1\n";

/// What a compacted journal restores before its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Restored {
    pub(crate) terminal: Checkpoint,
    /// Marks to give the shell state, in order, before those of the output.
    pub(crate) marks: Vec<MarkEvent>,
}

/// The JSON line.
#[derive(Serialize, Deserialize)]
struct Line {
    line_base: u64,
    cols: u16,
    rows: u16,
    history_bytes: usize,
    screen_bytes: usize,
    /// Each mark as the parameters of its OSC sequence, and where it was (line, column).
    marks: Vec<(String, u64, u32)>,
    /// The checkpoint was taken inside a control string past its bound (`Some(whether BEL
    /// ends it)`); absent from heads written before there was a bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dropping_string: Option<bool>,
    /// Bytes of output the terminal had taken; absent (0) from heads written before commands
    /// were counted.
    #[serde(default)]
    output_bytes: u64,
}

/// The head of a journal that restores `restored` first (`None`: a journal from the start).
pub(crate) fn encode(restored: Option<&Restored>) -> Vec<u8> {
    let mut out = VERSION_LINE.to_vec();
    let line = restored.map(|r| Line {
        line_base: r.terminal.line_base,
        cols: r.terminal.cols,
        rows: r.terminal.rows,
        history_bytes: r.terminal.history.len(),
        screen_bytes: r.terminal.screen.len(),
        marks: r
            .marks
            .iter()
            .map(|m| (osc_params(&m.mark), m.at.line, m.at.col))
            .collect(),
        dropping_string: r.terminal.dropping_string,
        output_bytes: r.terminal.output_bytes,
    });
    // Serialising plain numbers and strings into a Vec cannot fail.
    serde_json::to_writer(&mut out, &line).expect("a journal head serialises");
    out.push(b'\n');
    if let Some(r) = restored {
        out.extend_from_slice(r.terminal.history.as_bytes());
        out.extend_from_slice(&r.terminal.screen);
    }
    out
}

/// Reads the head at the start of `journal`: what it restores, and where the output starts.
pub(crate) fn decode(journal: &[u8]) -> io::Result<(Option<Restored>, usize)> {
    let invalid =
        |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("journal head: {what}"));
    let rest = journal
        .strip_prefix(VERSION_LINE)
        .ok_or_else(|| invalid("not a ptyd journal of this version"))?;
    let end = rest
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| invalid("no header line"))?;
    let line: Option<Line> =
        serde_json::from_slice(&rest[..end]).map_err(|e| invalid(&e.to_string()))?;
    let mut at = VERSION_LINE.len() + end + 1;
    let Some(line) = line else {
        return Ok((None, at));
    };
    let mut take = |len: usize| {
        let bytes = journal.get(at..at.checked_add(len)?).map(<[u8]>::to_vec);
        at += len;
        bytes
    };
    let history = take(line.history_bytes)
        .and_then(|h| String::from_utf8(h).ok())
        .ok_or_else(|| invalid("history cut short or not UTF-8"))?;
    let screen = take(line.screen_bytes).ok_or_else(|| invalid("screen cut short"))?;
    let marks = line
        .marks
        .iter()
        .map(|(params, line, col)| {
            let params: Vec<&[u8]> = params.split(';').map(str::as_bytes).collect();
            let mark = MarkKey::unverified()
                .parse_osc(&params)
                .ok_or_else(|| invalid("a mark it cannot read"))?;
            let at = Position {
                line: *line,
                col: *col,
            };
            Ok(MarkEvent {
                mark,
                at,
                line: None,
                command: None,
                bytes: (0, 0),
            })
        })
        .collect::<io::Result<_>>()?;
    let terminal = Checkpoint {
        line_base: line.line_base,
        history,
        screen,
        cols: line.cols,
        rows: line.rows,
        dropping_string: line.dropping_string,
        output_bytes: line.output_bytes,
    };
    Ok((Some(Restored { terminal, marks }), at))
}

/// A mark as the parameters of the OSC sequence that carries it (without the key).
fn osc_params(mark: &Mark) -> String {
    match mark {
        Mark::PromptStart => "133;A".into(),
        Mark::InputStart => "133;B".into(),
        Mark::CommandStart => "133;C".into(),
        Mark::CommandEnd(Some(code)) => format!("133;D;{code}"),
        Mark::CommandEnd(None) => "133;D".into(),
        Mark::Cwd(url) => format!("7;{url}"),
        Mark::LineRejected => "133;ptyd-rejected".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_reads_back_as_written() {
        let at = |line, col| Position { line, col };
        let restored = Restored {
            terminal: Checkpoint {
                line_base: 41,
                history: "one\ntwo\n".into(),
                screen: b"\x1b[H$ ".to_vec(),
                cols: 100,
                rows: 30,
                dropping_string: Some(true),
                output_bytes: 123_456,
            },
            marks: [
                Mark::CommandStart,
                Mark::CommandEnd(Some(3)),
                Mark::CommandEnd(None),
                Mark::Cwd("file://host/tmp/a%20b".into()),
                Mark::PromptStart,
                Mark::InputStart,
                Mark::LineRejected,
            ]
            .into_iter()
            .enumerate()
            .map(|(i, mark)| MarkEvent {
                mark,
                at: at(44 + i as u64, i as u32),
                line: None,
                command: None,
                bytes: (0, 0),
            })
            .collect(),
        };
        for restored in [None, Some(restored)] {
            let mut journal = encode(restored.as_ref());
            let head = journal.len();
            journal.extend_from_slice(b"output");
            assert_eq!(decode(&journal).unwrap(), (restored, head));
        }
    }

    #[test]
    fn a_damaged_head_is_an_error_not_a_guess() {
        let good = encode(Some(&Restored {
            terminal: Checkpoint {
                line_base: 0,
                history: "one\n".into(),
                screen: b"$ ".to_vec(),
                cols: 80,
                rows: 24,
                dropping_string: None,
                output_bytes: 0,
            },
            marks: Vec::new(),
        }));
        for (name, bytes) in [
            ("another format", b"raw output\r\n".to_vec()),
            ("no header line", VERSION_LINE.to_vec()),
            ("cut short", good[..good.len() - 1].to_vec()),
        ] {
            assert!(decode(&bytes).is_err(), "{name}");
        }
    }
}
