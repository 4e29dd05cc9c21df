//! The bounded, paged line history of one session: plain lines numbered from 1 since the session
//! started, stored in pages of concatenated text so 100 000 lines cost little more than their
//! bytes. The oldest pages are dropped first; line numbers never shift. Pure: no I/O.

use std::collections::VecDeque;

/// Lines per page: small enough that dropping a page loses little, large enough that the
/// per-page overhead is negligible.
const PAGE_LINES: usize = 256;
/// Text bytes per page before a new page is started, so the byte bound is kept in steps of this.
const PAGE_BYTES: usize = 64 * 1024;
/// One logical line is force-split past this many bytes, so `base64 -w0` or `yes | tr -d '\n'`
/// cannot grow a single unbounded line.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// A run of consecutive lines stored as one string plus end offsets.
#[derive(Debug, Default)]
struct Page {
    /// Number of the page's first line.
    first: u64,
    /// The lines' text, concatenated without separators.
    text: String,
    /// End offset in `text` of each line.
    ends: Vec<u32>,
}

impl Page {
    fn line(&self, index: usize) -> &str {
        let start = if index == 0 {
            0
        } else {
            self.ends[index - 1] as usize
        };
        &self.text[start..self.ends[index] as usize]
    }

    fn is_full(&self) -> bool {
        self.ends.len() >= PAGE_LINES || self.text.len() >= PAGE_BYTES
    }
}

/// The history: retained lines `first_line..=total_lines`.
#[derive(Debug)]
pub struct History {
    /// Pages, oldest first.
    pages: VecDeque<Page>,
    /// Lines ever pushed (the number of the newest line).
    total: u64,
    /// Text bytes currently retained.
    bytes: usize,
    /// Retention bound in lines.
    max_lines: u64,
    /// Retention bound in text bytes.
    max_bytes: usize,
}

impl History {
    /// An empty history keeping at most `max_lines` lines and about `max_bytes` bytes of text.
    pub fn new(max_lines: u64, max_bytes: usize) -> History {
        History {
            pages: VecDeque::new(),
            total: 0,
            bytes: 0,
            max_lines: max_lines.max(1),
            max_bytes: max_bytes.max(1),
        }
    }

    /// Numbers the next line `line + 1`: a history rebuilt from a checkpoint continues the
    /// numbering of the one it was taken from. Only for a history that holds no line yet.
    pub fn continue_after(&mut self, line: u64) {
        if self.pages.is_empty() {
            self.total = line;
        }
    }

    /// The retention bounds: lines and text bytes.
    pub fn bounds(&self) -> (u64, usize) {
        (self.max_lines, self.max_bytes)
    }

    /// Number of the newest line (0 when empty).
    pub fn total_lines(&self) -> u64 {
        self.total
    }

    /// Number of the oldest retained line (`total_lines + 1` when nothing is retained).
    pub fn first_line(&self) -> u64 {
        self.pages.front().map_or(self.total + 1, |p| p.first)
    }

    /// Text bytes retained.
    pub fn retained_bytes(&self) -> usize {
        self.bytes
    }

    /// Heap bytes used by the stored pages (text plus offsets), for memory accounting.
    pub fn heap_bytes(&self) -> usize {
        self.pages
            .iter()
            .map(|p| p.text.capacity() + p.ends.capacity() * 4)
            .sum()
    }

    /// Appends a new line.
    pub fn push(&mut self, line: &str) {
        let line = clip_line(line);
        if self.pages.back().is_none_or(Page::is_full) {
            self.pages.push_back(Page {
                first: self.total + 1,
                text: String::with_capacity(line.len().max(1024)),
                ends: Vec::with_capacity(PAGE_LINES),
            });
        }
        let page = self.pages.back_mut().expect("a page was just ensured");
        page.text.push_str(line);
        page.ends.push(page.text.len() as u32);
        self.total += 1;
        self.bytes += line.len();
        self.evict();
    }

    /// Extends the newest line (a wrapped row's continuation). Returns false, changing nothing,
    /// when the line would pass `MAX_LINE_BYTES` or there is no line: the caller then pushes.
    pub fn extend_last(&mut self, more: &str) -> bool {
        let Some(page) = self.pages.back_mut() else {
            return false;
        };
        let Some(&end) = page.ends.last() else {
            return false;
        };
        let len = page.line(page.ends.len() - 1).len();
        if len + more.len() > MAX_LINE_BYTES
            || page.first + page.ends.len() as u64 - 1 != self.total
        {
            return false;
        }
        debug_assert_eq!(end as usize, page.text.len());
        page.text.push_str(more);
        *page.ends.last_mut().expect("checked above") = page.text.len() as u32;
        self.bytes += more.len();
        self.evict();
        true
    }

    /// Removes trailing spaces from the newest line (done when it is known to be complete).
    pub fn trim_last(&mut self) {
        let Some(page) = self.pages.back_mut() else {
            return;
        };
        let Some(last) = page.ends.len().checked_sub(1) else {
            return;
        };
        let start = if last == 0 {
            0
        } else {
            page.ends[last - 1] as usize
        };
        let trimmed = page.text[start..].trim_end_matches(' ').len();
        let removed = page.text.len() - start - trimmed;
        page.text.truncate(start + trimmed);
        page.ends[last] = page.text.len() as u32;
        self.bytes -= removed;
    }

    /// The line numbered `n`, if retained.
    pub fn line(&self, n: u64) -> Option<&str> {
        if n < self.first_line() || n > self.total {
            return None;
        }
        let idx = self.pages.partition_point(|p| p.first <= n) - 1;
        let page = &self.pages[idx];
        Some(page.line((n - page.first) as usize))
    }

    /// Retained lines `from..=to` (clamped), oldest first.
    pub fn lines(&self, from: u64, to: u64) -> impl Iterator<Item = &str> + '_ {
        let from = from.max(self.first_line());
        let to = to.min(self.total);
        (from..=to).filter_map(move |n| self.line(n))
    }

    fn evict(&mut self) {
        while self.pages.len() > 1
            && (self.total + 1 - self.first_line() > self.max_lines || self.bytes > self.max_bytes)
        {
            let page = self.pages.pop_front().expect("len > 1");
            self.bytes -= page.text.len();
        }
    }
}

/// Cuts a line to `MAX_LINE_BYTES` at a character boundary.
fn clip_line(line: &str) -> &str {
    if line.len() <= MAX_LINE_BYTES {
        return line;
    }
    let mut end = MAX_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_lines_from_one() {
        let mut h = History::new(1000, 1 << 20);
        assert_eq!((h.first_line(), h.total_lines()), (1, 0));
        h.push("a");
        h.push("b");
        assert_eq!(h.line(1), Some("a"));
        assert_eq!(h.line(2), Some("b"));
        assert_eq!(h.line(3), None);
        assert_eq!(h.line(0), None);
    }

    #[test]
    fn a_continued_history_numbers_on_from_where_it_was_told() {
        let mut h = History::new(1000, 1 << 20);
        h.continue_after(41);
        assert_eq!((h.first_line(), h.total_lines()), (42, 41));
        h.push("a");
        assert_eq!((h.first_line(), h.total_lines()), (42, 42));
        assert_eq!(h.line(42), Some("a"));
        // Once it holds lines, its numbering is fixed.
        h.continue_after(7);
        assert_eq!((h.first_line(), h.total_lines()), (42, 42));
    }

    #[test]
    fn drops_oldest_pages_without_renumbering() {
        let mut h = History::new(1000, 1 << 30);
        for i in 1..=5000 {
            h.push(&i.to_string());
        }
        assert_eq!(h.total_lines(), 5000);
        let retained = h.total_lines() - h.first_line() + 1;
        assert!(
            retained <= 1000 && retained > 1000 - PAGE_LINES as u64,
            "{retained}"
        );
        assert_eq!(h.line(5000), Some("5000"));
        assert_eq!(
            h.line(h.first_line()),
            Some(h.first_line().to_string().as_str())
        );
        assert_eq!(h.line(10), None);
        let page: Vec<_> = h.lines(4990, 9999).collect();
        assert_eq!(page.len(), 11);
        assert_eq!(page[0], "4990");
    }

    #[test]
    fn bounds_bytes() {
        let mut h = History::new(1_000_000, 200_000);
        let line = "x".repeat(100);
        for _ in 0..10_000 {
            h.push(&line);
        }
        assert!(h.retained_bytes() <= 200_000 + PAGE_BYTES);
        assert_eq!(h.total_lines(), 10_000);
    }

    #[test]
    fn extends_and_trims_the_newest_line() {
        let mut h = History::new(100, 1 << 20);
        h.push("abc");
        assert!(h.extend_last("def  "));
        h.trim_last();
        assert_eq!(h.line(1), Some("abcdef"));
        h.push("next");
        assert_eq!(h.line(2), Some("next"));
        assert_eq!(h.line(1), Some("abcdef"));
    }

    #[test]
    fn splits_overlong_lines() {
        let mut h = History::new(100, 1 << 30);
        let chunk = "é".repeat(MAX_LINE_BYTES / 4);
        h.push(&chunk);
        assert!(h.extend_last(&chunk));
        assert!(!h.extend_last(&chunk));
        assert!(!h.extend_last(&chunk));
        h.push(&"é".repeat(MAX_LINE_BYTES));
        assert!(h.line(2).unwrap().len() <= MAX_LINE_BYTES);
    }

    #[test]
    fn memory_is_close_to_the_text() {
        let mut h = History::new(200_000, 64 << 20);
        let line = "0123456789".repeat(6);
        for _ in 0..100_000 {
            h.push(&line);
        }
        let raw = 100_000 * 60;
        assert!(h.heap_bytes() < raw * 2, "{} vs {}", h.heap_bytes(), raw);
    }
}
