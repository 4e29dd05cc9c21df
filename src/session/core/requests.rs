//! A caller's request: each answered at once from the core's state, or begun (a send, a
//! signal aimed at its command, a job's kill).

use super::{Core, Cx, REST_AFTER};
use crate::marks::Integration;
use crate::session::{Command, PageScreen};

impl Core {
    pub(super) fn on_command(&mut self, cx: &mut Cx<'_>, cmd: Command) {
        self.rest_due = Some(cx.now + REST_AFTER);
        match cmd {
            Command::Ready(reply) => {
                if let Some(reply) = self.lifecycle.wait_for(reply) {
                    let _ = reply.send(self.ready_info());
                }
            }
            Command::Read(query, reply) => {
                let _ = reply.send(self.read(cx, query));
            }
            Command::Commands(query, reply) => {
                let _ = reply.send(self.list_commands(cx, query));
            }
            Command::Search(query, reply) => {
                let _ = reply.send(self.search(&query));
            }
            Command::Send(input, sink) => self.on_send(cx, input, sink),
            Command::Watch(replay, reply) => {
                let _ = reply.send(self.watch(replay));
            }
            Command::Screen(reply) => {
                let _ = reply.send(PageScreen {
                    screen: self.terminal.styled_screen(),
                    password_prompt: cx.tty.input_hidden(),
                });
            }
            Command::Attach(request, reply) => {
                let _ = reply.send(self.attach(cx, request));
            }
            Command::Keys(token, keys) => self.keyboard.queue(token, &keys),
            Command::AttachSize(token, cols, rows) => self.attach_size(cx, token, cols, rows),
            Command::Detach(token) => self.detach(cx, token),
            Command::JobOutput(id, cap, reply) => {
                let integrated = self.spec.integration != Integration::None;
                let report = self.jobs.report(&id, cap, &self.terminal, integrated);
                let _ = reply.send(report);
                self.save_jobs(cx);
            }
            Command::JobKill(id, reply) => self.job_kill(cx, &id, reply),
            Command::Signal(signal, reply) => {
                self.signals.push(signal, reply, cx.now);
                self.deliver_signals(cx);
            }
        }
    }
}
