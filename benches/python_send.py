#!/usr/bin/env python3
"""Send latency as a Python harness sees it: grpcio with compiled stubs, against its own floor.

Run by `cargo bench --bench compare -- send` (benches/compare.rs hands it the daemon's socket and
a bash command line with the minimal shell integration a user would write: the four OSC 133
marks); it prints one JSON object on stdout. In the same run and interleaved round by round, so that a noisy machine moves all three
alike, it measures:

- `raw_ms`: that bash on a bare PTY that this script opens itself, written `true\\r` and read
  until the command-end mark (OSC 133;D), the shortest way to learn that a command finished;
- `rpc_ms`: one empty RPC (`grpc.health.v1.Health/Check`) on the channel that sends;
- `ptyd_ms`: `Terminals/Send("true")` until the answer says `prompt`.

The floor of a send is `raw + rpc` of the same round: a daemon cannot do less than run the
command and answer one RPC. Stubs are generated with grpcio-tools at start (the example client's
`load_stubs`), nothing generated is committed. Needs `pip install grpcio grpcio-tools`.
"""

import argparse
import fcntl
import json
import os
import pty
import select
import statistics
import struct
import sys
import termios
import tempfile
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "python"))
from ptyd_client import connect, load_stubs  # noqa: E402

MARK_END = b"\x1b]133;D"
MARK_EDITOR = b"\x1b]133;B"
# How long one wait for a mark may take before the run is declared broken.
MARK_TIMEOUT_S = 20.0
# The size the Rust bench gives every terminal (benches/compare.rs COLS, ROWS).
COLS, ROWS = 120, 40


def quantile(samples, q):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


class RawShell:
    """bash on a PTY of its own, driven with plain reads and writes."""

    def __init__(self, argv, env, cwd):
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.chdir(cwd)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.pending = b""
        self.read_until(MARK_EDITOR)

    def read_until(self, mark):
        deadline = time.monotonic() + MARK_TIMEOUT_S
        while True:
            at = self.pending.find(mark)
            if at >= 0:
                self.pending = self.pending[at + len(mark) :]
                return
            # Keep only what could still start the mark.
            self.pending = self.pending[-(len(mark) - 1) :]
            left = deadline - time.monotonic()
            if left <= 0:
                sys.exit(f"error: no {mark!r} on the bare PTY within {MARK_TIMEOUT_S} s")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                self.pending += os.read(self.fd, 65536)

    def run_true(self):
        """Seconds from writing `true` to its end mark; then waits (untimed) for the editor."""
        t0 = time.perf_counter()
        os.write(self.fd, b"true\r")
        self.read_until(MARK_END)
        elapsed = time.perf_counter() - t0
        self.read_until(MARK_EDITOR)
        return elapsed

    def close(self):
        os.close(self.fd)
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)


def measure(pb2, pb2_grpc, args):
    argv = json.loads(args.bash_argv)
    env = json.loads(args.env)
    # The bare shell is forked before grpcio starts its threads (forking beside them is unsafe).
    raw = RawShell(argv, env, args.cwd)
    try:
        return measure_against(pb2, pb2_grpc, args, raw)
    finally:
        raw.close()


def measure_against(pb2, pb2_grpc, args, raw):
    with connect(args.socket) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = pb2_grpc.TerminalsStub(channel)
        # An empty HealthCheckRequest serialises to no bytes; the answer is not needed.
        health = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda _: b"",
            response_deserializer=lambda data: data,
        )
        opened = stub.Open(pb2.OpenRequest(agent_id=args.agent, type="bash", cols=COLS, rows=ROWS))
        sid = opened.session.session_id
        prompt = pb2.WAIT_REASON_PROMPT
        wrong = 0

        def send_true():
            nonlocal wrong
            reply = stub.Send(pb2.SendRequest(agent_id=args.agent, session_id=sid, text="true"))
            # An answer other than prompt is counted, and the time until the real prompt taken.
            while reply.foreground.wait_reason != prompt:
                wrong += 1
                reply = stub.Send(
                    pb2.SendRequest(agent_id=args.agent, session_id=sid, text="", submit=False)
                )

        try:
            for _ in range(20):
                send_true()
                raw.run_true()
                health(None)
            ptyd, floor, rpc_alone = [], [], []
            per_round = max(1, args.sends // args.rounds)
            for _ in range(args.rounds):
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    send_true()
                    ptyd.append((time.perf_counter() - t0) * 1e3)
                for _ in range(per_round):
                    raw_s = raw.run_true()
                    t0 = time.perf_counter()
                    health(None)
                    rpc_s = time.perf_counter() - t0
                    rpc_alone.append(rpc_s * 1e3)
                    floor.append((raw_s + rpc_s) * 1e3)
        finally:
            stub.Close(pb2.CloseRequest(agent_id=args.agent, session_id=sid))

    def summary(samples):
        return {
            "p50": statistics.median(samples),
            "p99": quantile(samples, 0.99),
            "n": len(samples),
        }

    return {
        "grpcio_version": grpc.__version__,
        "ptyd_ms": summary(ptyd),
        "floor_ms": summary(floor),
        "rpc_ms": summary(rpc_alone),
        "wrong_wait_reasons": wrong,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="the daemon's socket")
    parser.add_argument("--agent", default="bench-python", help="agent id")
    parser.add_argument("--bash-argv", required=True, help="JSON array: the raw shell's argv")
    parser.add_argument("--env", required=True, help="JSON object: the raw shell's environment")
    parser.add_argument("--cwd", required=True, help="the raw shell's working directory")
    parser.add_argument("--sends", type=int, default=1000, help="sends of each kind")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ptyd-bench-stubs-") as out_dir:
        pb2, pb2_grpc = load_stubs(out_dir)
        print(json.dumps(measure(pb2, pb2_grpc, args)))


if __name__ == "__main__":
    main()
