//! The core driven by scripted events and a scripted terminal.
