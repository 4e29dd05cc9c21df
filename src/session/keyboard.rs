//! Who holds a session's keyboard: the person attached (`Attach`), the keys they typed that
//! wait to be written, the window size the session had before they attached, and what they
//! did that the agent's next result reports. Pure: the actor writes the keys and resizes.

use super::records::TypedBy;

/// The session's keyboard: free for the agent, or held by one person.
#[derive(Default)]
pub(super) struct Keyboard {
    holder: Option<Holder>,
    /// Tokens already given out: a stale attach's keys never reach a later holder's session.
    issued: u64,
    /// What a person did since the agent's last result.
    typed: PersonTyped,
}

/// The person holding the keyboard.
struct Holder {
    token: u64,
    name: String,
    /// The size the session had before the person's window gave it theirs.
    own_size: (u16, u16),
    /// Their keys not yet written.
    keys: Vec<u8>,
}

/// What a person typed since the agent's last result.
#[derive(Default)]
struct PersonTyped {
    /// Some key reached the terminal.
    any: bool,
    /// Numbers of the records of the commands they ran, in order.
    commands: Vec<u64>,
}

impl Keyboard {
    /// The person `name` takes the keyboard of a session of `own_size`: their token, or the
    /// name of who holds it already.
    pub(super) fn take(&mut self, name: String, own_size: (u16, u16)) -> Result<u64, &str> {
        if self.holder.is_some() {
            return Err(self.holder().unwrap_or_default());
        }
        self.issued += 1;
        self.holder = Some(Holder {
            token: self.issued,
            name,
            own_size,
            keys: Vec::new(),
        });
        Ok(self.issued)
    }

    /// Who holds the keyboard, if anyone.
    pub(super) fn holder(&self) -> Option<&str> {
        self.holder.as_ref().map(|h| h.name.as_str())
    }

    /// Whether `token` is the current holder's.
    pub(super) fn holds(&self, token: u64) -> bool {
        self.holder.as_ref().is_some_and(|h| h.token == token)
    }

    /// Queues the holder's keys (a stale token's are dropped).
    pub(super) fn queue(&mut self, token: u64, keys: &[u8]) {
        if let Some(h) = self.holder.as_mut().filter(|h| h.token == token) {
            h.keys.extend_from_slice(keys);
        }
    }

    /// The keys waiting to be written.
    pub(super) fn pending(&self) -> &[u8] {
        self.holder.as_ref().map_or(&[], |h| &h.keys)
    }

    /// `n` of the waiting keys were written.
    pub(super) fn written(&mut self, n: usize) {
        if let Some(h) = self.holder.as_mut() {
            h.keys.drain(..n.min(h.keys.len()));
            self.typed.any |= n > 0;
        }
    }

    /// The waiting keys cannot be written: dropped, nobody can read them.
    pub(super) fn drop_keys(&mut self) {
        if let Some(h) = self.holder.as_mut() {
            h.keys.clear();
        }
    }

    /// The holder of `token` lets go: the size to give the session back.
    pub(super) fn release(&mut self, token: u64) -> Option<(u16, u16)> {
        let holder = self.holder.take_if(|h| h.token == token)?;
        Some(holder.own_size)
    }

    /// Who a command starting now was typed by.
    pub(super) fn typed_by(&self) -> TypedBy {
        match self.holder {
            Some(_) => TypedBy::Person,
            None => TypedBy::Agent,
        }
    }

    /// A person's command got record `number`.
    pub(super) fn person_ran(&mut self, number: u64) {
        if self.typed.commands.last() != Some(&number) {
            self.typed.commands.push(number);
            self.typed.any = true;
        }
    }

    /// The line the agent's next result carries when a person typed since its last one, and
    /// forgets it: `[a person typed in this session: c14-c15]`, or without the records when
    /// they ran no command.
    pub(super) fn take_note(&mut self) -> Option<String> {
        let typed = std::mem::take(&mut self.typed);
        if !typed.any {
            return None;
        }
        Some(match runs(&typed.commands) {
            runs if runs.is_empty() => "[a person typed in this session]".to_owned(),
            runs => format!("[a person typed in this session: {runs}]"),
        })
    }
}

/// The agent the CLI acts for when `--agent` is not given (`cli.rs`).
const CLI_AGENT: &str = "cli";

/// The command a person runs to type into session `id` of agent `owner`: `ptyd attach t1`,
/// naming the owner (quoted for a shell when it needs it) unless it is the CLI's own agent.
pub(crate) fn attach_command(id: &str, owner: &str) -> String {
    if owner == CLI_AGENT {
        return format!("ptyd attach {id}");
    }
    let plain = owner
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.:@/+=,".contains(&b));
    if plain && owner.starts_with('-') {
        // `--agent -x` would read as an option.
        format!("ptyd attach {id} --agent={owner}")
    } else if plain {
        format!("ptyd attach {id} --agent {owner}")
    } else {
        format!(
            "ptyd attach {id} --agent '{}'",
            owner.replace('\'', "'\\''")
        )
    }
}

/// Record numbers as runs: `c14`, `c14-c15`, `c3, c7-c9`.
fn runs(numbers: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < numbers.len() {
        let first = numbers[i];
        let mut last = first;
        while i + 1 < numbers.len() && numbers[i + 1] == last + 1 {
            i += 1;
            last = numbers[i];
        }
        out.push(if first == last {
            format!("c{first}")
        } else {
            format!("c{first}-c{last}")
        });
        i += 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_person_is_told_the_command_that_reaches_the_session() {
        for (owner, want) in [
            ("cli", "ptyd attach t1"),
            ("claude", "ptyd attach t1 --agent claude"),
            ("agent-a.b@host", "ptyd attach t1 --agent agent-a.b@host"),
            ("my agent", "ptyd attach t1 --agent 'my agent'"),
            ("-x", "ptyd attach t1 --agent=-x"),
            ("it's", "ptyd attach t1 --agent 'it'\\''s'"),
        ] {
            assert_eq!(attach_command("t1", owner), want, "{owner}");
        }
    }

    #[test]
    fn record_numbers_are_told_as_runs() {
        for (numbers, want) in [
            (&[][..], ""),
            (&[14][..], "c14"),
            (&[14, 15][..], "c14-c15"),
            (&[3, 7, 8, 9][..], "c3, c7-c9"),
            (&[1, 3, 5][..], "c1, c3, c5"),
        ] {
            assert_eq!(runs(numbers), want, "{numbers:?}");
        }
    }

    #[test]
    fn one_person_holds_the_keyboard_and_gives_the_size_back() {
        let mut k = Keyboard::default();
        assert_eq!(k.typed_by(), TypedBy::Agent);
        let token = k.take("ptyd attach".into(), (120, 40)).unwrap();
        assert_eq!(k.take("the web page".into(), (80, 24)), Err("ptyd attach"));
        assert_eq!(k.holder(), Some("ptyd attach"));
        assert_eq!(k.typed_by(), TypedBy::Person);
        assert_eq!(k.release(token + 1), None, "a stale token lets nothing go");
        assert_eq!(k.release(token), Some((120, 40)));
        assert_eq!(k.holder(), None);
        let again = k.take("the web page".into(), (120, 40)).unwrap();
        assert_ne!(again, token, "a new holder gets a new token");
        assert!(!k.holds(token));
    }

    #[test]
    fn keys_are_written_in_order_and_a_stale_holders_are_dropped() {
        let mut k = Keyboard::default();
        let old = k.take("a".into(), (80, 24)).unwrap();
        k.release(old);
        let token = k.take("b".into(), (80, 24)).unwrap();
        k.queue(old, b"rm -rf");
        assert!(k.pending().is_empty());
        k.queue(token, b"ls");
        k.queue(token, b"\r");
        assert_eq!(k.pending(), b"ls\r");
        k.written(2);
        assert_eq!(k.pending(), b"\r");
    }

    #[test]
    fn the_agents_next_result_says_what_the_person_did_once() {
        let mut k = Keyboard::default();
        assert_eq!(k.take_note(), None, "nobody typed");
        let token = k.take("p".into(), (80, 24)).unwrap();
        k.queue(token, b"x");
        assert_eq!(k.take_note(), None, "keys not yet written are not typed");
        k.written(1);
        assert_eq!(
            k.take_note().as_deref(),
            Some("[a person typed in this session]")
        );
        assert_eq!(k.take_note(), None, "said once");
        k.person_ran(14);
        k.person_ran(14);
        k.person_ran(15);
        k.release(token);
        assert_eq!(
            k.take_note().as_deref(),
            Some("[a person typed in this session: c14-c15]")
        );
    }
}
