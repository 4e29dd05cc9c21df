//! The model-facing text of every response, byte-capped: at most `max_result_bytes` of UTF-8,
//! never split inside a character, keeping the newest output (the tail) and the metadata lines.
//! Pure: strings in, strings out.

/// The line appended when output was cut.
pub const TRUNCATED_LINE: &str = "[output truncated]";

/// A capped rendering: the full text plus the part of the body that made it in.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capped {
    /// The complete model-facing text, at most the cap in bytes.
    pub rendered: String,
    /// The body as kept (the typed output field).
    pub body: String,
    /// True when the body was cut.
    pub truncated: bool,
}

/// The longest suffix of `s` of at most `budget` bytes that starts on a character boundary.
pub fn tail_fit(s: &str, budget: usize) -> &str {
    if s.len() <= budget {
        return s;
    }
    let mut start = s.len() - budget;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// The longest prefix of `s` of at most `budget` bytes that ends on a character boundary.
pub fn head_fit(s: &str, budget: usize) -> &str {
    if s.len() <= budget {
        return s;
    }
    let mut end = budget;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Renders `body` (or `placeholder` when it is empty) followed by `meta` lines, within `cap`
/// bytes. When the whole does not fit, the body keeps its tail and `[output truncated]` is added.
/// At the smallest caps the metadata alone may not fit: then the body is dropped, then
/// `[output truncated]` (the typed `truncated` flag still says it), then the text is cut at the
/// cap, keeping its head where the ids are.
pub fn with_meta(body: &str, placeholder: &str, meta: &[String], cap: usize) -> Capped {
    let shown = if body.is_empty() { placeholder } else { body };
    let full = join(shown, meta);
    if full.len() <= cap {
        return Capped {
            rendered: full,
            body: body.to_owned(),
            truncated: false,
        };
    }
    let mut meta_cut: Vec<String> = meta.to_vec();
    meta_cut.push(TRUNCATED_LINE.to_owned());
    let meta_len = joined_len(&meta_cut);
    // One byte for the newline between body and metadata.
    if let Some(budget) = cap.checked_sub(meta_len + 1).filter(|b| *b > 0) {
        let kept = tail_fit(body, budget);
        return Capped {
            rendered: join(kept, &meta_cut),
            body: kept.to_owned(),
            truncated: true,
        };
    }
    // No room for any body: metadata only, dropping the truncation line first if needed.
    let mut rendered = meta_cut.join("\n");
    if rendered.len() > cap {
        rendered = meta.join("\n");
    }
    let rendered = head_fit(&rendered, cap).to_owned();
    Capped {
        rendered,
        body: String::new(),
        truncated: true,
    }
}

/// Like `with_meta` for a page of lines: cuts at line boundaries where it can, so the first kept
/// line is whole unless even the newest line alone does not fit. Returns the capped text and how
/// many leading lines were dropped entirely.
pub fn lines_with_meta(
    lines: &[String],
    placeholder: &str,
    meta: impl Fn(usize) -> Vec<String>,
    cap: usize,
) -> (Capped, usize) {
    let body = lines.join("\n");
    let attempt = with_meta(&body, placeholder, &meta(0), cap);
    if !attempt.truncated {
        return (attempt, 0);
    }
    // Budget with the metadata as it reads for the worst case (all but the last line dropped),
    // which is never shorter than the real one.
    let worst = meta(lines.len().saturating_sub(1));
    let mut meta_cut = worst;
    meta_cut.push(TRUNCATED_LINE.to_owned());
    let budget = cap.saturating_sub(joined_len(&meta_cut) + 1);
    let mut used = 0usize;
    let mut first = lines.len();
    while first > 0 {
        let add = lines[first - 1].len() + usize::from(first < lines.len());
        if used + add > budget {
            break;
        }
        used += add;
        first -= 1;
    }
    let dropped = if first == lines.len() {
        lines.len().saturating_sub(1)
    } else {
        first
    };
    let kept_body = lines[dropped..].join("\n");
    let mut capped = with_meta(&kept_body, placeholder, &meta(dropped), cap);
    capped.truncated = true;
    if !capped.rendered.ends_with(TRUNCATED_LINE) && capped.rendered.len() + 19 <= cap {
        capped.rendered.push('\n');
        capped.rendered.push_str(TRUNCATED_LINE);
    }
    (capped, dropped)
}

/// Cuts a list of independent lines (List, Types) to the cap, keeping the newest (last) ones.
pub fn list(lines: &[String], empty: &str, cap: usize) -> String {
    if lines.is_empty() {
        return head_fit(empty, cap).to_owned();
    }
    let mut first = lines.len();
    let mut used = 0;
    while first > 0 {
        let add = lines[first - 1].len() + usize::from(first < lines.len());
        if used + add > cap {
            break;
        }
        used += add;
        first -= 1;
    }
    if first == lines.len() {
        return head_fit(&lines[lines.len() - 1], cap).to_owned();
    }
    lines[first..].join("\n")
}

/// Cuts a single-line message (Signal, Close, ...) to the cap, keeping its head.
pub fn line(text: String, cap: usize) -> String {
    if text.len() <= cap {
        text
    } else {
        head_fit(&text, cap).to_owned()
    }
}

fn join(body: &str, meta: &[String]) -> String {
    let mut out = String::with_capacity(body.len() + joined_len(meta) + 1);
    out.push_str(body);
    for m in meta {
        out.push('\n');
        out.push_str(m);
    }
    out
}

fn joined_len(lines: &[String]) -> usize {
    lines.iter().map(String::len).sum::<usize>() + lines.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Vec<String> {
        vec![
            "[wait: prompt]".into(),
            "[exit code: 0]".into(),
            "[session: running]".into(),
        ]
    }

    #[test]
    fn fits_untouched() {
        let c = with_meta("hi", "(no new output)", &meta(), 1000);
        assert_eq!(
            c.rendered,
            "hi\n[wait: prompt]\n[exit code: 0]\n[session: running]"
        );
        assert!(!c.truncated);
        let c = with_meta("", "(no new output)", &meta(), 1000);
        assert!(c.rendered.starts_with("(no new output)\n"));
    }

    #[test]
    fn keeps_the_tail_and_the_metadata_at_every_cut() {
        let body: String = "日本語テキスト😀abc\n".repeat(40);
        for cap in 64..=1200 {
            let c = with_meta(&body, "(no new output)", &meta(), cap);
            assert!(c.rendered.len() <= cap, "cap {cap}: {}", c.rendered.len());
            assert!(c.rendered.contains("[wait: prompt]"), "cap {cap}");
            assert!(c.rendered.contains("[session: running]"), "cap {cap}");
            assert!(c.truncated);
            assert!(body.ends_with(&c.body), "cap {cap}");
            if !c.body.is_empty() {
                assert!(c.rendered.contains(TRUNCATED_LINE), "cap {cap}");
            }
        }
    }

    #[test]
    fn tiny_caps_never_overflow() {
        let long_meta = vec!["x".repeat(100)];
        for cap in 0..120 {
            let c = with_meta("body", "(none)", &long_meta, cap);
            assert!(c.rendered.len() <= cap);
        }
    }

    #[test]
    fn pages_cut_at_line_boundaries() {
        let lines: Vec<String> = (1..=100).map(|i| format!("line {i}")).collect();
        let meta = |dropped: usize| vec![format!("[lines: {}-100 of 100]", 1 + dropped)];
        for cap in 64..=800 {
            let (c, dropped) = lines_with_meta(&lines, "(no retained output)", meta, cap);
            assert!(c.rendered.len() <= cap, "cap {cap}");
            assert!(c.body.ends_with("line 100"), "cap {cap}: {:?}", c.body);
            assert!(
                c.rendered
                    .contains(&format!("[lines: {}-100 of 100]", 1 + dropped))
            );
            if dropped < 99 {
                assert!(
                    c.body.starts_with(&format!("line {}", dropped + 1)),
                    "cap {cap}"
                );
            }
        }
    }

    #[test]
    fn lists_keep_the_newest_lines() {
        let lines: Vec<String> = (1..=10).map(|i| format!("t{i} [shell] running")).collect();
        let out = list(&lines, "(none)", 64);
        assert!(out.len() <= 64);
        assert!(out.ends_with("t10 [shell] running"));
        assert_eq!(
            list(&[], "(no terminal sessions)", 100),
            "(no terminal sessions)"
        );
    }
}
