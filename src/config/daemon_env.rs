//! The daemon's own start-up variables: the hand-over of its listeners to the next image of an
//! upgrade in place, and systemd's socket activation. They describe how this process started,
//! so neither a session nor the next image inherits them as they are.

/// Environment variable through which a daemon tells its next image which descriptors are its
/// listeners: `unix=<fd>` and, with `--listen-tcp`, `,tcp=<fd>`.
pub(crate) const HANDOVER_ENV: &str = "PTYD_UPGRADE_FDS";
/// systemd's socket-activation variables: they describe the first image's start, so the next
/// image must not see them (its listeners come through [`HANDOVER_ENV`]).
const ACTIVATION_ENV: [&str; 3] = ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"];

/// Whether the daemon's variable `name` is one of the hand-over variables, which describe the
/// daemon's own start and are never passed on to sessions.
pub(crate) fn is_handover_var(name: &str) -> bool {
    name == HANDOVER_ENV || ACTIVATION_ENV.contains(&name)
}
