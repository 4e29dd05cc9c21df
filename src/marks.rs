//! Shell integration: the startup wrappers that make bash, zsh and fish emit prompt marks
//! (OSC 133 A/B/C/D with the exit status, OSC 7 with the cwd) while still running the user's own
//! rc files, the per-session key those marks carry so that output cannot forge them, and the
//! parser that turns OSC parameters into `Mark`s. The parsing half is pure.

use std::path::{Path, PathBuf};

/// Which shell-integration recipe a terminal type uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integration {
    /// bash through an `--rcfile` wrapper.
    Bash,
    /// zsh through a `ZDOTDIR` wrapper.
    Zsh,
    /// fish through `--init-command`.
    Fish,
    /// No marks: waiting relies on stdin detection and output silence.
    None,
}

impl Integration {
    /// The name used in config files and the Types RPC.
    pub fn name(self) -> &'static str {
        match self {
            Integration::Bash => "bash",
            Integration::Zsh => "zsh",
            Integration::Fish => "fish",
            Integration::None => "none",
        }
    }

    /// Parses a config name.
    pub fn from_name(name: &str) -> Option<Integration> {
        Some(match name {
            "bash" => Integration::Bash,
            "zsh" => Integration::Zsh,
            "fish" => Integration::Fish,
            "none" => Integration::None,
            _ => return None,
        })
    }
}

/// A shell-integration mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// OSC 133;A: the prompt starts.
    PromptStart,
    /// OSC 133;B: the prompt ended, input starts.
    InputStart,
    /// OSC 133;C: a command line was accepted; its output follows.
    CommandStart,
    /// `OSC 133;D[;status]`: the command finished.
    CommandEnd(Option<i32>),
    /// OSC 7: the shell's working directory (a `file://host/path` URL, kept as sent).
    Cwd(String),
    /// ptyd's own OSC 133;ptyd-rejected: the shell refused the line (a syntax error) and keeps
    /// it in its editor, where the next input would be appended to it (fish does this).
    LineRejected,
}

/// The parameter that carries the session's secret in ptyd's own OSC 133 marks:
/// `OSC 133;D;0;ptyd=<key>`.
const KEY_PARAM: &[u8] = b"ptyd=";

/// The environment variable that hands a session's mark key to its integration; the wrapper
/// reads it into a shell variable and unsets it before anything else runs, so the session's
/// programs (and shells nested in it) never see it.
pub(crate) const KEY_ENV: &str = "PTYD_MARK_KEY";

/// The environment variable that asks the bash or zsh wrapper to leave history expansion on
/// (the type's `history_expansion`); read and unset like the key.
pub(crate) const HISTORY_EXPANSION_ENV: &str = "PTYD_HISTORY_EXPANSION";

/// The per-session secret that tells the marks ptyd's integration prints from marks in a
/// program's output (a nested integrated shell, `ssh` to a host with shell integration, `cat` of
/// a recording). It guards against accidents, not against a program that sets out to
/// impersonate the shell: that program runs as the same user as the shell.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct MarkKey(Option<Box<str>>);

impl std::fmt::Debug for MarkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Some(_) => "MarkKey(<secret>)",
            None => "MarkKey(unverified)",
        })
    }
}

impl MarkKey {
    /// A fresh random key: 128 bits as 32 hex digits (nothing a shell would quote or expand).
    pub fn generate() -> Result<MarkKey, getrandom::Error> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(MarkKey(Some(hex.into())))
    }

    /// A key from its text (as the integration prints it).
    #[cfg(test)]
    pub(crate) fn from_text(text: &str) -> MarkKey {
        MarkKey(Some(text.into()))
    }

    /// The key that accepts every well-formed mark, signed or not: the emulator's default when
    /// used on its own. Sessions always set a generated key.
    pub fn unverified() -> MarkKey {
        MarkKey(None)
    }

    /// The key a previous daemon saved (its `text`), for a session adopted from it.
    pub(crate) fn from_saved(text: &str) -> MarkKey {
        MarkKey(Some(text.into()))
    }

    /// The key's text, handed to the integration; `None` for `unverified`.
    pub(crate) fn text(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// Whether the parameters after an OSC 133 mark's kind carry this key.
    fn signs(&self, rest: &[&[u8]]) -> bool {
        let Some(key) = self.0.as_deref() else {
            return true;
        };
        rest.iter().any(|param| {
            param
                .strip_prefix(KEY_PARAM)
                .is_some_and(|given| given == key.as_bytes())
        })
    }

    /// Parses the `;`-separated parameters of an OSC sequence into a mark, if it is one. An
    /// OSC 133 mark counts only when it carries this key; one without it is not a mark (the
    /// emulator drops it from the text like any other OSC). OSC 7 is taken as sent: nothing
    /// trusts it (a session's cwd is read from `/proc`).
    pub fn parse_osc(&self, params: &[&[u8]]) -> Option<Mark> {
        match params {
            [b"133", kind, rest @ ..] => {
                let mark = match *kind {
                    b"A" => Mark::PromptStart,
                    b"B" => Mark::InputStart,
                    b"C" => Mark::CommandStart,
                    b"D" => Mark::CommandEnd(
                        rest.first()
                            .and_then(|s| std::str::from_utf8(s).ok()?.parse().ok()),
                    ),
                    b"ptyd-rejected" => Mark::LineRejected,
                    _ => return None,
                };
                self.signs(rest).then_some(mark)
            }
            [b"7", url, ..] => Some(Mark::Cwd(String::from_utf8_lossy(url).into_owned())),
            _ => None,
        }
    }

    /// Parses ptyd's own `OSC 133;E;ptyd=<key>;<line>`: the command line a shell (zsh, fish)
    /// is about to run, percent-encoded (`%`, `;` and controls at least), printed just before
    /// the command-start mark. Like the other marks, it counts only with this key.
    pub fn parse_command_line(&self, params: &[&[u8]]) -> Option<String> {
        match params {
            [b"133", b"E", rest @ .., line] if self.signs(rest) => Some(percent_decode(line)),
            _ => None,
        }
    }
}

/// Decodes `%XX` escapes (a `%` not followed by two hex digits stays as it is), then reads the
/// bytes as UTF-8, replacing what is not.
pub(crate) fn percent_decode(text: &[u8]) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                text.get(i + 1).copied().and_then(hex),
                text.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// bash: sourced through `--rcfile`. First takes the session's mark key (and the type's
/// history-expansion choice) out of the environment into unexported variables, before the user's
/// `.bashrc` starts anything; then loads the `.bashrc`, turns history expansion off unless the
/// type asked for it, and puts ptyd's hooks first and last in `PROMPT_COMMAND` so the D mark
/// sees the real `$?` and prompt frameworks that rebuild `PS1` do not lose the A/B marks. The
/// cwd goes out with the D mark, in one write, so the send that settles on D reports the cwd the
/// command left. `PS1` and `PS0` name the key variable rather than hold its value: a `PS1` the
/// user exports then carries no key into nested shells.
const BASH_RC: &str = r#"# ptyd shell integration for bash (generated; safe to delete)
__ptyd_key=$PTYD_MARK_KEY; __ptyd_histexpand=$PTYD_HISTORY_EXPANSION
unset PTYD_MARK_KEY PTYD_HISTORY_EXPANSION
[ -r "$HOME/.bashrc" ] && . "$HOME/.bashrc"
if [ "$__ptyd_histexpand" = 1 ]; then set -H; else set +H; fi
__ptyd_pre() {
  __ptyd_ec=$?
  local p=${PWD//%/%25}; p=${p// /%20}
  printf '\033]133;D;%s;ptyd=%s\007\033]7;file://%s%s\007' "$__ptyd_ec" "$__ptyd_key" "$HOSTNAME" "$p"
  return $__ptyd_ec
}
__ptyd_post() {
  case "$PS1" in *'133;A'*) ;; *) PS1='\[\033]133;A;ptyd=${__ptyd_key}\007\]'"$PS1"'\[\033]133;B;ptyd=${__ptyd_key}\007\]';; esac
  # A hook that reassigns PROMPT_COMMAND (lazy initialisers do) would drop ptyd's first entry:
  # put it back in front, keeping the user's entries once each.
  if [ "${BASH_VERSINFO[0]}${BASH_VERSINFO[1]}" -ge 51 ] && [ "${PROMPT_COMMAND[0]}" != __ptyd_pre ]; then
    local entry; local -a kept=()
    for entry in "${PROMPT_COMMAND[@]}"; do
      case " ${kept[*]} " in *" $entry "*) ;; *) [ "$entry" = __ptyd_pre ] || [ "$entry" = __ptyd_post ] || kept+=("$entry");; esac
    done
    PROMPT_COMMAND=(__ptyd_pre "${kept[@]}" __ptyd_post)
  fi
  return $__ptyd_ec
}
PS0='\e]133;C;ptyd=${__ptyd_key}\a'
if [ "${BASH_VERSINFO[0]}${BASH_VERSINFO[1]}" -ge 51 ]; then
  PROMPT_COMMAND=(__ptyd_pre "${PROMPT_COMMAND[@]}" __ptyd_post)
else
  PROMPT_COMMAND="__ptyd_pre;${PROMPT_COMMAND:+$PROMPT_COMMAND;}__ptyd_post"
fi
"#;

/// zsh: `ZDOTDIR` points here; `.zshenv` first takes the mark key and the history-expansion
/// choice out of the environment (as for bash), then loads the user's `.zshenv`; `.zshrc` loads
/// the user's `.zshrc`, turns history expansion off unless the type asked for it, then registers
/// ptyd's hooks (precmd first, so it sees the real `$?`). zsh expands no variables in `PS1`
/// unless `PROMPT_SUBST` is set, so its marks hold the key's value.
const ZSH_ENV: &str = r#"# ptyd shell integration for zsh (generated; safe to delete)
__ptyd_key=$PTYD_MARK_KEY; __ptyd_histexpand=$PTYD_HISTORY_EXPANSION
unset PTYD_MARK_KEY PTYD_HISTORY_EXPANSION
__ptyd_zdot=$ZDOTDIR; ZDOTDIR=${PTYD_USER_ZDOTDIR:-$HOME}
[ -r "$ZDOTDIR/.zshenv" ] && . "$ZDOTDIR/.zshenv"
ZDOTDIR=$__ptyd_zdot
"#;

const ZSH_RC: &str = r#"# ptyd shell integration for zsh (generated; safe to delete)
ZDOTDIR=${PTYD_USER_ZDOTDIR:-$HOME}
[ -r "$ZDOTDIR/.zshrc" ] && . "$ZDOTDIR/.zshrc"
if [[ $__ptyd_histexpand = 1 ]]; then setopt BANG_HIST; else unsetopt BANG_HIST; fi
autoload -Uz add-zsh-hook
__ptyd_precmd() {
  local ec=$?
  printf '\033]133;D;%s;ptyd=%s\007\033]7;file://%s%s\007' $ec "$__ptyd_key" "$HOST" "$PWD"
  case "$PS1" in *'133;A'*) ;; *) PS1=$'%{\e]133;A;ptyd='"$__ptyd_key"$'\a%}'"$PS1"$'%{\e]133;B;ptyd='"$__ptyd_key"$'\a%}';; esac
}
__ptyd_preexec() {
  local c=${1//\%/%25}; c=${c//;/%3B}; c=${c//$'\n'/%0A}; c=${c//$'\r'/%0D}; c=${c//$'\a'/%07}; c=${c//$'\e'/%1B}
  printf '\033]133;E;ptyd=%s;%s\007\033]133;C;ptyd=%s\007' "$__ptyd_key" "$c" "$__ptyd_key"
}
add-zsh-hook precmd __ptyd_precmd
add-zsh-hook preexec __ptyd_preexec
precmd_functions=(__ptyd_precmd ${precmd_functions:#__ptyd_precmd})
# The missing-newline marker (PROMPT_SP) is printed before precmd, so it would land inside the
# command's output region; agents do not need it.
unsetopt PROMPT_SP
"#;

/// fish: sourced through `--init-command` after fish's own config (fish offers no earlier
/// hook), which takes the mark key out of the environment first thing. fish has no history
/// expansion.
const FISH_INIT: &str = r#"# ptyd shell integration for fish (generated; safe to delete)
set -g __ptyd_key "$PTYD_MARK_KEY"; set -e -g PTYD_MARK_KEY; set -e -g PTYD_HISTORY_EXPANSION
function __ptyd_prompt --on-event fish_prompt; printf '\e]133;A;ptyd=%s\a\e]7;file://%s%s\a' "$__ptyd_key" (hostname) $PWD; end
function __ptyd_preexec --on-event fish_preexec; printf '\e]133;E;ptyd=%s;%s\a\e]133;C;ptyd=%s\a' "$__ptyd_key" (string escape --style=url -- $argv[1]) "$__ptyd_key"; end
function __ptyd_postexec --on-event fish_postexec; printf '\e]133;D;%s;ptyd=%s\a' $status "$__ptyd_key"; end
function __ptyd_posterror --on-event fish_posterror; printf '\e]133;E;ptyd=%s;%s\a\e]133;ptyd-rejected;ptyd=%s\a' "$__ptyd_key" (string escape --style=url -- $argv[1]) "$__ptyd_key"; end
"#;

/// Where the integration files live, written once per daemon.
#[derive(Debug, Clone)]
pub struct IntegrationFiles {
    dir: PathBuf,
}

impl IntegrationFiles {
    /// The directory the wrappers are in (readable in a sandbox that restricts reading).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes the wrappers into `dir` (created with mode 0700).
    pub fn install(dir: &Path) -> std::io::Result<IntegrationFiles> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir.join("zsh"))?;
        std::fs::write(dir.join("ptyd.bash"), BASH_RC)?;
        std::fs::write(dir.join("zsh/.zshenv"), ZSH_ENV)?;
        std::fs::write(dir.join("zsh/.zshrc"), ZSH_RC)?;
        std::fs::write(dir.join("ptyd.fish"), FISH_INIT)?;
        Ok(IntegrationFiles {
            dir: dir.to_owned(),
        })
    }

    /// Extra arguments and environment that make `program` load the integration, with `key` for
    /// its marks and history expansion on only when `history_expansion` (bash and zsh). The
    /// environment a request gave cannot override either.
    pub fn apply(
        &self,
        integration: Integration,
        key: &MarkKey,
        history_expansion: bool,
        argv: &mut Vec<String>,
        env: &mut Vec<(String, String)>,
    ) {
        env.retain(|(k, _)| k != KEY_ENV && k != HISTORY_EXPANSION_ENV);
        if integration != Integration::None {
            if let Some(key) = key.text() {
                env.push((KEY_ENV.to_owned(), key.to_owned()));
            }
            if history_expansion {
                env.push((HISTORY_EXPANSION_ENV.to_owned(), "1".to_owned()));
            }
        }
        match integration {
            Integration::Bash => {
                argv.splice(
                    1..1,
                    [
                        "--rcfile".to_owned(),
                        self.dir.join("ptyd.bash").display().to_string(),
                    ],
                );
                if !argv.iter().any(|a| a == "-i") {
                    argv.push("-i".to_owned());
                }
            }
            Integration::Zsh => {
                let user = env
                    .iter()
                    .find(|(k, _)| k == "ZDOTDIR")
                    .or_else(|| env.iter().find(|(k, _)| k == "HOME"))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                env.retain(|(k, _)| k != "ZDOTDIR");
                env.push(("PTYD_USER_ZDOTDIR".to_owned(), user));
                env.push((
                    "ZDOTDIR".to_owned(),
                    self.dir.join("zsh").display().to_string(),
                ));
                if !argv.iter().any(|a| a == "-i") {
                    argv.push("-i".to_owned());
                }
            }
            Integration::Fish => {
                let init = format!("source {}", shell_quote(&self.dir.join("ptyd.fish")));
                argv.splice(1..1, ["--init-command".to_owned(), init]);
                if !argv.iter().any(|a| a == "-i") {
                    argv.push("-i".to_owned());
                }
            }
            Integration::None => {}
        }
    }
}

fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_marks() {
        let cases: &[(&[&[u8]], Option<Mark>)] = &[
            (&[b"133", b"A"], Some(Mark::PromptStart)),
            (&[b"133", b"B"], Some(Mark::InputStart)),
            (&[b"133", b"C"], Some(Mark::CommandStart)),
            (&[b"133", b"D", b"42"], Some(Mark::CommandEnd(Some(42)))),
            (&[b"133", b"D"], Some(Mark::CommandEnd(None))),
            (&[b"133", b"D", b"x"], Some(Mark::CommandEnd(None))),
            (
                &[b"7", b"file://h/tmp"],
                Some(Mark::Cwd("file://h/tmp".into())),
            ),
            (&[b"133", b"ptyd-rejected"], Some(Mark::LineRejected)),
            (&[b"133", b"Z"], None),
            (&[b"8", b""], None),
        ];
        for (params, want) in cases {
            assert_eq!(MarkKey::unverified().parse_osc(params), *want, "{params:?}");
        }
    }

    #[test]
    fn only_marks_with_the_session_key_count() {
        let key = MarkKey::from_text("k3y");
        let cases: &[(&[&[u8]], Option<Mark>)] = &[
            // The integration's own marks.
            (&[b"133", b"A", b"ptyd=k3y"], Some(Mark::PromptStart)),
            (&[b"133", b"B", b"ptyd=k3y"], Some(Mark::InputStart)),
            (&[b"133", b"C", b"ptyd=k3y"], Some(Mark::CommandStart)),
            (
                &[b"133", b"D", b"3", b"ptyd=k3y"],
                Some(Mark::CommandEnd(Some(3))),
            ),
            (&[b"133", b"D", b"ptyd=k3y"], Some(Mark::CommandEnd(None))),
            (
                &[b"133", b"ptyd-rejected", b"ptyd=k3y"],
                Some(Mark::LineRejected),
            ),
            // Other options around the key do not matter.
            (
                &[b"133", b"A", b"aid=7", b"ptyd=k3y"],
                Some(Mark::PromptStart),
            ),
            // Output's marks: none, another session's, an empty or partial key.
            (&[b"133", b"D", b"3"], None),
            (&[b"133", b"A"], None),
            (&[b"133", b"C"], None),
            (&[b"133", b"D", b"3", b"ptyd=other"], None),
            (&[b"133", b"D", b"3", b"ptyd="], None),
            (&[b"133", b"D", b"3", b"ptyd=k3"], None),
            (&[b"133", b"D", b"3", b"ptyd=k3yy"], None),
            (&[b"133", b"D", b"3", b"k3y"], None),
            (&[b"133", b"ptyd-rejected"], None),
            // OSC 7 is trusted for nothing and taken as sent.
            (
                &[b"7", b"file://h/tmp"],
                Some(Mark::Cwd("file://h/tmp".into())),
            ),
        ];
        for (params, want) in cases {
            assert_eq!(key.parse_osc(params), *want, "{params:?}");
        }
    }

    #[test]
    fn command_lines_are_decoded_and_count_only_with_the_key() {
        let key = MarkKey::from_text("k3y");
        let cases: &[(&[&[u8]], Option<&str>)] = &[
            (&[b"133", b"E", b"ptyd=k3y", b"ls -la"], Some("ls -la")),
            (
                &[b"133", b"E", b"ptyd=k3y", b"echo a%3B b%0Aecho %25d"],
                Some("echo a; b\necho %d"),
            ),
            // fish's URL style escapes everything but letters and digits.
            (
                &[b"133", b"E", b"ptyd=k3y", b"git%20log%20%E2%9C%93"],
                Some("git log \u{2713}"),
            ),
            // A stray `%` stays; an empty line is a line.
            (&[b"133", b"E", b"ptyd=k3y", b"50%"], Some("50%")),
            (&[b"133", b"E", b"ptyd=k3y", b""], Some("")),
            // Without the key, with another one, or without a line: not ours.
            (&[b"133", b"E", b"ls"], None),
            (&[b"133", b"E", b"ptyd=other", b"ls"], None),
            (&[b"133", b"E", b"ptyd=k3y"], None),
            (&[b"133", b"C", b"ptyd=k3y"], None),
        ];
        for (params, want) in cases {
            assert_eq!(
                key.parse_command_line(params).as_deref(),
                *want,
                "{params:?}"
            );
        }
    }

    #[test]
    fn generated_keys_are_distinct_hex_and_stay_out_of_debug_output() {
        let a = MarkKey::generate().unwrap();
        let b = MarkKey::generate().unwrap();
        let text = a.text().unwrap();
        assert_eq!(text.len(), 32);
        assert!(text.bytes().all(|c| c.is_ascii_hexdigit()), "{text}");
        assert_ne!(a, b);
        assert!(!format!("{a:?}").contains(text));
    }

    #[test]
    fn the_integration_gets_the_key_and_the_history_choice_and_nothing_overrides_them() {
        let dir = tempfile::tempdir().unwrap();
        let files = IntegrationFiles::install(dir.path()).unwrap();
        let key = MarkKey::from_text("k3y");
        let requested = || {
            vec![
                (KEY_ENV.to_owned(), "forged".to_owned()),
                (HISTORY_EXPANSION_ENV.to_owned(), "1".to_owned()),
                ("KEEP".to_owned(), "me".to_owned()),
            ]
        };
        // (integration, history_expansion, the key and choice handed over)
        let cases = [
            (Integration::Bash, false, vec![(KEY_ENV, "k3y")]),
            (
                Integration::Bash,
                true,
                vec![(KEY_ENV, "k3y"), (HISTORY_EXPANSION_ENV, "1")],
            ),
            (
                Integration::Zsh,
                true,
                vec![(KEY_ENV, "k3y"), (HISTORY_EXPANSION_ENV, "1")],
            ),
            (Integration::Fish, false, vec![(KEY_ENV, "k3y")]),
            (Integration::None, false, vec![]),
        ];
        for (integration, history, want) in cases {
            let mut argv = vec!["/bin/sh".to_owned()];
            let mut env = requested();
            files.apply(integration, &key, history, &mut argv, &mut env);
            let handed: Vec<(&str, &str)> = env
                .iter()
                .filter(|(k, _)| k == KEY_ENV || k == HISTORY_EXPANSION_ENV)
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            assert_eq!(handed, want, "{integration:?} history={history}");
            assert!(env.contains(&("KEEP".to_owned(), "me".to_owned())));
        }
    }

    #[test]
    fn every_integration_signs_every_mark_it_prints() {
        // Each script names the key in every OSC 133 it prints, and unsets the variable that
        // brought it before it runs anything of the user's.
        for (name, script, user_rc) in [
            ("bash", BASH_RC, ".bashrc"),
            ("zsh env", ZSH_ENV, ".zshenv"),
            ("zsh rc", ZSH_RC, ".zshrc"),
            ("fish", FISH_INIT, "function"),
        ] {
            for (at, _) in script.match_indices("133;") {
                let mark = &script[at..];
                let mark = &mark[..mark.find(['\\', '\'']).unwrap()];
                if mark == "133;A" && script[..at].ends_with("*'") {
                    continue; // the `case` pattern that checks PS1 for the marks
                }
                let line = script[at..].lines().next().unwrap();
                assert!(line.contains("ptyd="), "{name}: {mark} in {line:?}");
            }
            if script.contains("PTYD_MARK_KEY") {
                let unset = script
                    .find("unset PTYD_MARK_KEY")
                    .or_else(|| script.find("set -e -g PTYD_MARK_KEY"))
                    .unwrap_or_else(|| panic!("{name} does not unset the key variable"));
                if let Some(user) = script.find(user_rc) {
                    assert!(unset < user, "{name} unsets the key after the user's rc");
                }
            }
        }
        assert!(ZSH_ENV.contains("unset PTYD_MARK_KEY"));
    }

    #[test]
    fn bash_gets_the_rcfile_before_its_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let files = IntegrationFiles::install(dir.path()).unwrap();
        let mut argv = vec!["/bin/bash".to_owned()];
        let mut env = vec![];
        files.apply(
            Integration::Bash,
            &MarkKey::unverified(),
            false,
            &mut argv,
            &mut env,
        );
        assert_eq!(argv[1], "--rcfile");
        assert!(argv[2].ends_with("ptyd.bash"));
        assert_eq!(argv.last().unwrap(), "-i");
        assert!(dir.path().join("ptyd.bash").exists());
    }
}

/// Picks the bytes of a command's output region (between the C and D marks) out of a raw PTY
/// stream, across chunk boundaries. Used for `SendStream` on integrated shells.
#[derive(Debug, Default)]
pub struct RegionScanner {
    /// Inside a command's output (after C, before D).
    inside: bool,
    /// Drop the terminal housekeeping fish prints after its command-start mark.
    fish: bool,
    /// Right after a C mark, while fish's housekeeping may still follow.
    skipping: bool,
    /// Bytes held back because they may start a mark that the next chunk completes.
    held: Vec<u8>,
    /// Only marks carrying this key open or close the region.
    key: MarkKey,
}

/// Longest OSC 133 sequence worth holding back; anything longer is not a mark (ptyd's longest,
/// a D mark with a 32-digit key and a negative status, is under 64 bytes).
const MAX_MARK_LEN: usize = 128;
/// What fish 3 writes between its command-start mark and the command's output: bracketed paste
/// off, colour and charset resets, a carriage return (plus a window title, handled apart).
const FISH_HOUSEKEEPING: [&[u8]; 5] = [b"\x1b[?2004l", b"\x1b[30m", b"\x1b(B", b"\x1b[m", b"\r"];
/// Longest window title worth holding back while looking for its end.
const MAX_TITLE_LEN: usize = 4096;

impl RegionScanner {
    /// A scanner for a shell of `integration` whose marks carry `key`.
    pub fn new(integration: Integration, key: MarkKey) -> RegionScanner {
        RegionScanner {
            fish: integration == Integration::Fish,
            key,
            ..RegionScanner::default()
        }
    }

    /// How many leading bytes of `data` are fish housekeeping; `None` when they may continue
    /// past the end of `data` (hold them back).
    fn housekeeping_len(data: &[u8]) -> Option<usize> {
        let mut i = 0;
        loop {
            let rest = &data[i..];
            if rest.is_empty() {
                return None;
            }
            if let Some(seq) = FISH_HOUSEKEEPING.iter().find(|s| rest.starts_with(s)) {
                i += seq.len();
                continue;
            }
            if rest.starts_with(b"\x1b]0;") {
                match osc_end_within(rest, MAX_TITLE_LEN) {
                    Some(end) => {
                        i += end;
                        continue;
                    }
                    None if rest.len() < MAX_TITLE_LEN => return None,
                    None => return Some(i),
                }
            }
            let partial = FISH_HOUSEKEEPING
                .iter()
                .chain([&&b"\x1b]0;"[..]])
                .any(|s| s.starts_with(rest));
            return if partial { None } else { Some(i) };
        }
    }

    /// Appends to `out` the bytes of `chunk` that lie inside a command's output region.
    pub fn scan(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let mut data = std::mem::take(&mut self.held);
        data.extend_from_slice(chunk);
        let mut i = 0;
        while i < data.len() {
            if self.skipping {
                match Self::housekeeping_len(&data[i..]) {
                    Some(n) => {
                        i += n;
                        self.skipping = false;
                    }
                    None => {
                        self.held = data[i..].to_vec();
                        return;
                    }
                }
                continue;
            }
            let Some(esc) = data[i..].iter().position(|b| *b == 0x1b).map(|p| p + i) else {
                self.emit(&data[i..], out);
                return;
            };
            self.emit(&data[i..esc], out);
            let rest = &data[esc..];
            const PREFIX: &[u8] = b"\x1b]133;";
            if rest.len() < PREFIX.len() && PREFIX.starts_with(rest) {
                self.held = rest.to_vec();
                return;
            }
            if !rest.starts_with(PREFIX) {
                self.emit(&rest[..1], out);
                i = esc + 1;
                continue;
            }
            let Some(end) = osc_end(rest) else {
                if rest.len() < MAX_MARK_LEN {
                    self.held = rest.to_vec();
                    return;
                }
                self.emit(&rest[..1], out);
                i = esc + 1;
                continue;
            };
            // Every OSC 133 sequence is left out of the region; only the shell's own (with the
            // key) move its bounds.
            match self.key.parse_osc(&osc_params(&rest[..end])) {
                Some(Mark::CommandStart) => {
                    self.inside = true;
                    self.skipping = self.fish;
                }
                Some(Mark::CommandEnd(_)) => self.inside = false,
                _ => {}
            }
            i = esc + end;
        }
    }

    fn emit(&self, bytes: &[u8], out: &mut Vec<u8>) {
        if self.inside {
            out.extend_from_slice(bytes);
        }
    }
}

/// Length of the OSC sequence at the start of `s` including its terminator (BEL or ESC \).
fn osc_end(s: &[u8]) -> Option<usize> {
    osc_end_within(s, MAX_MARK_LEN)
}

/// The `;`-separated parameters of the complete OSC sequence `seq` (introducer and terminator
/// included), as the emulator hands them to its callbacks.
fn osc_params(seq: &[u8]) -> Vec<&[u8]> {
    let body = seq
        .strip_suffix(b"\x07")
        .or_else(|| seq.strip_suffix(b"\x1b\\"))
        .unwrap_or(seq);
    body.get(2..)
        .unwrap_or_default()
        .split(|b| *b == b';')
        .collect()
}

/// Like `osc_end`, looking at most `max` bytes far.
fn osc_end_within(s: &[u8], max: usize) -> Option<usize> {
    let limit = s.len().min(max);
    (2..limit).find_map(|i| match s[i] {
        0x07 => Some(i + 1),
        0x1b if s.get(i + 1) == Some(&b'\\') => Some(i + 2),
        _ => None,
    })
}

/// Splits a byte stream only at UTF-8 character boundaries, holding back an incomplete trailing
/// character until the next chunk completes it.
#[derive(Debug, Default)]
pub struct Utf8Splitter {
    carry: Vec<u8>,
}

impl Utf8Splitter {
    /// The complete part of `carry + chunk`; an incomplete character at the end is kept.
    pub fn split(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut data = std::mem::take(&mut self.carry);
        data.extend_from_slice(chunk);
        let keep = incomplete_suffix(&data);
        self.carry = data.split_off(data.len() - keep);
        data
    }
}

/// Length of an incomplete UTF-8 sequence at the end of `data` (0 to 3).
fn incomplete_suffix(data: &[u8]) -> usize {
    for back in 1..=3.min(data.len()) {
        let b = data[data.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // continuation byte: look further back for the lead byte
        }
        let need = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if need > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod stream_tests {
    use super::*;

    /// Scans `stream` cut in two at every place.
    fn region_at_every_split(integration: Integration, stream: &[u8], want: &[u8]) {
        for split in 0..stream.len() {
            let mut scanner = RegionScanner::new(integration, MarkKey::from_text("k3y"));
            let mut out = Vec::new();
            scanner.scan(&stream[..split], &mut out);
            scanner.scan(&stream[split..], &mut out);
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(want),
                "split at {split}"
            );
        }
    }

    #[test]
    fn the_region_ignores_marks_without_the_key() {
        // (stream, region): marks of the command's own output are dropped and move nothing.
        let cases: &[(&[u8], &[u8])] = &[
            (
                b"$ cmd\r\n\x1b]133;C;ptyd=k3y\x07x\x1b]133;D;3\x07y\r\n\x1b]133;D;0;ptyd=k3y\x07$ ",
                b"xy\r\n",
            ),
            (
                b"$ cmd\r\n\x1b]133;C;ptyd=k3y\x07a\x1b]133;A\x07\x1b]133;C\x1b\\b\x1b]133;D;1;ptyd=other\x07c\r\n\x1b]133;D;0;ptyd=k3y\x07",
                b"abc\r\n",
            ),
            // Output before the command's own start mark is not the command's.
            (
                b"\x1b]133;C\x07early\x1b]133;D;0\x07$ cmd\r\n\x1b]133;C;ptyd=k3y\x07out\r\n\x1b]133;D;0;ptyd=k3y\x07",
                b"out\r\n",
            ),
        ];
        for (stream, want) in cases {
            region_at_every_split(Integration::Bash, stream, want);
        }
    }

    #[test]
    fn region_is_between_c_and_d_across_chunks() {
        let stream: &[u8] = b"$ echo hi\r\n\x1b]133;C;ptyd=k3y\x07\x1b[31mhi\x1b[0m\r\n\x1b]133;D;0;ptyd=k3y\x07\x1b]133;A;ptyd=k3y\x07$ ";
        let want: &[u8] = b"\x1b[31mhi\x1b[0m\r\n";
        region_at_every_split(Integration::Bash, stream, want);
    }

    #[test]
    fn fish_housekeeping_stays_out_of_the_region() {
        let stream: &[u8] = b"$ cmd\r\n\x1b]133;C;ptyd=k3y\x07\x1b[?2004l\x1b]0;cmd /tmp\x07\x1b[30m\x1b(B\x1b[m\r\x1b[31mred\x1b[0m\r\n\x1b]133;D;0;ptyd=k3y\x07";
        let want: &[u8] = b"\x1b[31mred\x1b[0m\r\n";
        region_at_every_split(Integration::Fish, stream, want);
    }

    #[test]
    fn utf8_chunks_end_on_character_boundaries() {
        let text = "日本😀a".as_bytes();
        for split in 0..text.len() {
            let mut s = Utf8Splitter::default();
            let a = s.split(&text[..split]);
            let b = s.split(&text[split..]);
            assert!(std::str::from_utf8(&a).is_ok(), "split {split}");
            assert_eq!([a, b].concat(), text);
        }
    }
}
