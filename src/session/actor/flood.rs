//! A flood's output taken in off the actor's thread. Once output comes faster than a slice
//! takes in (see `pacing.rs`), the actor hands the terminal's output side (a reader on the
//! master, the journal, the terminal model) to a worker thread for a turn. There one thread
//! reads, as a program draining a terminal would, straight into the journal, and a second one
//! emulates what it read meanwhile, until the output pauses, a mark or a query's answer needs
//! the actor, a command for the session comes, or the turn's time is up. Every other session's
//! actor and the RPCs keep the actor's thread, and sessions flooding at once take in their
//! output on as many cores.
//!
//! The journal's compaction goes with a turn too (`compact.rs`): at the end of a flood's turn,
//! or in a turn of its own when no flood is on. A turn's reader gives way to another session's
//! send that waits for its answer (`give_way.rs`).
//!
//! A turn is a larger read, nothing more: the raw bytes go to watchers and a streaming caller,
//! and the marks, answers and modes are handled, when it comes back, as after any read. While
//! the output side is away the actor handles nothing that reads it: a command waits for the
//! turn (which it ends), the timers and the program's exit wait too.

use super::Actor;
use super::compact::{Compacted, Compaction};
use super::give_way;
use crate::process::pty::OutputReader;
use crate::screen::Terminal;
use crate::session::capture::Capture;
use crate::session::core::Event;
use crate::session::pacing::{MIN_READ, TURN};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// The most one read of a turn takes (the kernel rarely has more than 4 KiB ready).
const TURN_READ: usize = 64 << 10;
/// Output a turn reads before it hands it to the emulating thread: the terminal model reads
/// larger pieces faster (more of a progress bar's redraws fall in one), and each hand-over
/// costs a wake-up. Smaller when output is dear to emulate (see `Pacing::batch_limit`).
const PIECE: usize = 32 << 10;
/// Pieces on their way to the emulating thread, at most: beyond, the reader waits for it.
const PIECES: usize = 8;
/// How long a turn waits for more output before it gives the output side back: the kernel
/// hands a terminal's output over 4 KiB at a time, each moved by a kernel worker that the
/// read wakes, so a busy program's next bytes come within tens of microseconds.
const TURN_PAUSE: Duration = Duration::from_millis(1);
/// How often a turn waiting for output looks whether the emulated output needs the actor.
const PAUSE_STEP: Duration = Duration::from_micros(100);
/// The nice value of a turn's emulating thread: emulating a flood is bulk work, and the
/// actor's thread (every RPC) and other sessions' programs should get a core first. The flood
/// loses little: its program blocks once the terminal's buffer is full, and the turn runs then.
/// Measured (`agent-streams`, 2 cores): another session's send during a flood 0.40-0.46 ms p50
/// at 10, 0.45-0.57 ms at 0, the flood's own throughput the same within the noise.
const FLOOD_NICE: i32 = 10;

/// What a worker takes for a turn and brings back.
pub(super) struct Turn {
    terminal: Terminal,
    capture: Capture,
    reader: Arc<OutputReader>,
    /// The bytes read in the turn, for watchers and a streaming caller.
    bytes: Vec<u8>,
    /// How many bytes a read takes, and a piece at most (what `TURN` emulates at the cost
    /// measured so far).
    read_limit: usize,
    /// The actor has a command for the session: end the turn.
    wanted: Arc<AtomicBool>,
    /// Time spent emulating.
    emulation: Duration,
    /// The master hung up.
    eof: bool,
    /// The output paused: the turn found none for `TURN_PAUSE`.
    paused: bool,
    /// No emulating thread could be started: the turn read nothing.
    no_thread: bool,
    /// A flood is on: the turn reads. Without one it only compacts the journal.
    read: bool,
    /// The journal's compaction, due at the turn's end (see `compact.rs`), and how it went.
    compaction: Option<Compaction>,
    compacted: Option<Compacted>,
}

impl Turn {
    /// Reads and emulates while the flood lasts (when one is on), then compacts the journal
    /// when that is due.
    fn run(mut self, session: &str) -> Turn {
        if self.read {
            self.read_and_emulate(session);
        } else {
            self.paused = true;
        }
        if let Some(compaction) = self.compaction.take() {
            self.compacted = Some(compaction.run(&mut self.terminal, &mut self.capture));
        }
        self
    }

    /// Reads until the output pauses, the emulated output needs the actor, a command comes or
    /// `TURN` is up; a second thread emulates the pieces read meanwhile.
    fn read_and_emulate(&mut self, session: &str) {
        let started = Instant::now();
        self.bytes.clear();
        let needs_actor = AtomicBool::new(false);
        let (to_emulator, pieces) = mpsc::sync_channel::<Vec<u8>>(PIECES);
        let (to_reader, emptied) = mpsc::channel::<Vec<u8>>();
        let piece_limit = self.read_limit.min(PIECE);
        let Turn {
            terminal,
            capture,
            reader,
            bytes,
            read_limit,
            wanted,
            emulation,
            eof,
            paused,
            no_thread,
            ..
        } = self;
        std::thread::scope(|scope| {
            let emulating = std::thread::Builder::new()
                .name("ptyd-emulate".into())
                .spawn_scoped(scope, || {
                    emulate_pieces(terminal, bytes, pieces, to_reader, &needs_actor)
                });
            let Ok(emulating) = emulating else {
                *no_thread = true;
                return;
            };
            let mut piece = Vec::new();
            let hand_over = |piece: &mut Vec<u8>| {
                if !piece.is_empty() {
                    let next = emptied.try_recv().unwrap_or_default();
                    let _ = to_emulator.send(std::mem::replace(piece, next));
                    piece.clear();
                }
            };
            // Time spent giving way to another session's send (see `give_way.rs`).
            let mut given = Duration::ZERO;
            loop {
                if give_way::now(started.elapsed(), given) {
                    let paused = Instant::now();
                    std::thread::sleep(give_way::STEP);
                    given += paused.elapsed();
                } else {
                    capture.prepare(session);
                    match capture.try_read_from(reader, *read_limit) {
                        Ok(Some(n)) if n > 0 => {
                            capture.take(n, |read| piece.extend_from_slice(read));
                            if piece.len() >= piece_limit {
                                hand_over(&mut piece);
                            }
                        }
                        Ok(None) => {
                            // The emulating thread catches up while the reader waits.
                            hand_over(&mut piece);
                            if !wait_for_output(reader, &needs_actor, wanted) {
                                *paused = true;
                                break;
                            }
                        }
                        Ok(Some(_)) | Err(_) => {
                            *eof = true;
                            break;
                        }
                    }
                }
                if needs_actor.load(Ordering::Relaxed)
                    || wanted.load(Ordering::Relaxed)
                    || started.elapsed() >= TURN
                {
                    break;
                }
            }
            hand_over(&mut piece);
            drop(to_emulator);
            *emulation += emulating
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        });
    }
}

/// A turn's emulating thread: feeds the pieces the reader hands over to the terminal model, in
/// order, keeps their bytes, and says when the output holds a mark or an answer. Returns the
/// time spent emulating.
fn emulate_pieces(
    terminal: &mut Terminal,
    bytes: &mut Vec<u8>,
    pieces: mpsc::Receiver<Vec<u8>>,
    emptied: mpsc::Sender<Vec<u8>>,
    needs_actor: &AtomicBool,
) -> Duration {
    // A thread of its own for each turn, so lowering its priority touches no other work.
    let thread = rustix::thread::gettid();
    let _ = rustix::process::setpriority_process(Some(thread), FLOOD_NICE);
    let mut spent = Duration::ZERO;
    for piece in pieces {
        let started = Instant::now();
        terminal.feed(&piece);
        spent += started.elapsed();
        bytes.extend_from_slice(&piece);
        if terminal.has_marks_or_replies() {
            needs_actor.store(true, Ordering::Relaxed);
        }
        let _ = emptied.send(piece);
    }
    spent
}

/// Waits up to `TURN_PAUSE` for output; whether it came (`false` too once the emulated output
/// or a command needs the actor).
fn wait_for_output(reader: &OutputReader, needs_actor: &AtomicBool, wanted: &AtomicBool) -> bool {
    let mut waited = Duration::ZERO;
    while waited < TURN_PAUSE {
        if needs_actor.load(Ordering::Relaxed) || wanted.load(Ordering::Relaxed) {
            return false;
        }
        if reader.wait(PAUSE_STEP) {
            return true;
        }
        waited += PAUSE_STEP;
    }
    false
}

/// The flood's state in the actor.
#[derive(Default)]
pub(super) struct Flood {
    /// Output comes faster than the actor's slice takes in: it is taken in by turns.
    on: bool,
    /// The turn on a worker thread, with the terminal's output side.
    away: Option<JoinHandle<Turn>>,
    /// A reader on the master for the workers, made at the first flood.
    reader: Option<Arc<OutputReader>>,
    /// Set when a command comes during a turn: the turn ends at its next read.
    wanted: Arc<AtomicBool>,
    /// What stands in for the terminal model while it is away (never read: the actor handles
    /// nothing that reads it until it is back), and the turn's byte buffer to reuse.
    stand_in: Option<Terminal>,
    bytes: Vec<u8>,
}

impl Flood {
    /// Whether output is taken in by turns (a turn away or the next one due).
    pub(super) fn is_on(&self) -> bool {
        self.on
    }

    /// Whether the output side is on a worker.
    pub(super) fn away(&self) -> bool {
        self.away.is_some()
    }

    /// Output came faster than a slice takes in: the next read is a turn's.
    pub(super) fn start(&mut self) {
        self.on = true;
    }

    /// Ends the turn away at its next read (a command waits for it).
    pub(super) fn call_back(&self) {
        self.wanted.store(true, Ordering::Relaxed);
    }

    /// Waits for the turn on the worker (only while one is away; cancel-safe). A panic in the
    /// emulation goes on in the actor, as it would have had the actor emulated the output.
    pub(super) async fn back(&mut self) -> Turn {
        let Some(handle) = self.away.as_mut() else {
            return std::future::pending().await;
        };
        let done = handle.await;
        self.away = None;
        match done {
            Ok(turn) => turn,
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // Cancelled: only as the runtime shuts down, which drops this actor too.
                Err(_) => std::future::pending().await,
            },
        }
    }
}

impl Actor {
    /// Whether a turn should start now: for a flood, or for the journal's compaction.
    pub(super) fn turn_due(&self) -> bool {
        !self.flood.away() && (self.flood.on || self.compaction_due())
    }

    /// Hands the output side to a worker thread for a turn.
    pub(super) fn start_turn(&mut self) {
        let reader = match &self.flood.reader {
            Some(reader) => reader.clone(),
            None => match self.pty.output_reader() {
                Ok(reader) => self.flood.reader.insert(Arc::new(reader)).clone(),
                Err(e) => {
                    // No worker then: the actor takes the flood in itself, a slice at a time,
                    // and the journal is not compacted before a bound of output more.
                    tracing::debug!(session = %self.spec.id, error = %e, "no output reader for a worker");
                    self.flood.on = false;
                    if self.compaction_due() {
                        self.compacted(Compacted::Failed(e));
                    }
                    return;
                }
            },
        };
        let stand_in = self
            .flood
            .stand_in
            .take()
            .unwrap_or_else(|| Terminal::new(1, 1, 1, 1));
        self.flood.wanted.store(false, Ordering::Relaxed);
        // Asked before the capture goes with the turn.
        let compaction = self.compaction();
        let turn = Turn {
            terminal: self.core.swap_terminal(stand_in),
            capture: std::mem::take(&mut self.capture),
            reader,
            bytes: std::mem::take(&mut self.flood.bytes),
            read_limit: self.pacing.batch_limit().clamp(MIN_READ, TURN_READ),
            wanted: self.flood.wanted.clone(),
            emulation: Duration::ZERO,
            eof: false,
            paused: false,
            no_thread: false,
            read: self.flood.on,
            compaction,
            compacted: None,
        };
        // The worker reads: the runtime's thread need not wake for every 4 KiB it takes.
        self.pty.unwatch_output();
        let session = self.spec.id.clone();
        self.flood.away = Some(tokio::task::spawn_blocking(move || turn.run(&session)));
    }

    /// The turn came back: the output side is home, and what the turn read is handled as
    /// after any read.
    pub(super) fn on_turn_back(&mut self, turn: Turn) {
        let Turn {
            terminal,
            capture,
            bytes,
            emulation,
            eof,
            paused,
            no_thread,
            compacted,
            ..
        } = turn;
        self.capture = capture;
        if let Some(outcome) = compacted {
            self.compacted(outcome);
        }
        self.eof |= eof;
        if paused || eof || no_thread {
            // Without a thread the actor takes the output in itself, until the next flood.
            self.end_flood();
        }
        self.pacing.emulated_elsewhere(bytes.len(), emulation);
        self.flood.stand_in = Some(self.core.swap_terminal(terminal));
        self.handle(Event::TurnBack(&bytes));
        self.flood.bytes = bytes;
        if let Some(cmd) = self.held.take() {
            self.handle(Event::Request(cmd));
        }
    }

    /// The output paused (or the master hung up): the actor reads it again.
    fn end_flood(&mut self) {
        match self.pty.watch_output() {
            Ok(()) => self.flood.on = false,
            // Turns go on: a worker keeps reading, and the next end tries again.
            Err(e) => tracing::warn!(session = %self.spec.id, error = %e,
                "cannot watch the terminal's output; a worker reads it meanwhile"),
        }
    }

    /// Brings the output side home before the actor ends.
    pub(super) async fn flood_home(&mut self) {
        if self.flood.away() {
            self.flood.call_back();
            let turn = self.flood.back().await;
            self.on_turn_back(turn);
        }
    }
}
