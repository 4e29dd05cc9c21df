#!/usr/bin/env python3
"""A ptyd client in Python: opens a session, runs a command, pages its history, closes it.

Stubs are generated at start from the repository's proto/ with grpcio-tools into a temporary
directory (nothing generated is committed). Needs `pip install grpcio grpcio-tools`.

    python3 examples/python/ptyd_client.py [--socket PATH] [--agent ID]

Exits non-zero when the daemon's answers are not what the contract promises, so CI can run it.
"""

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

import grpc
from grpc_tools import protoc

# proto/ at the repository root, two levels up from this file.
PROTO_ROOT = Path(__file__).resolve().parents[2] / "proto"
PROTO_FILE = PROTO_ROOT / "ptyd" / "v1" / "ptyd.proto"


def load_stubs(out_dir):
    """Generates ptyd_pb2 / ptyd_pb2_grpc into out_dir and imports them."""
    # grpc_tools ships the well-known types; their include path keeps imports such as
    # google/protobuf/*.proto resolvable should the proto use them.
    well_known = Path(protoc.__file__).resolve().parent / "_proto"
    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            str(PROTO_FILE),
        ]
    )
    if status != 0:
        sys.exit(f"error: protoc failed on {PROTO_FILE} (status {status})")
    # The generated modules import each other as ptyd.v1.ptyd_pb2 (namespace packages).
    sys.path.insert(0, str(out_dir))
    pb2 = importlib.import_module("ptyd.v1.ptyd_pb2")
    pb2_grpc = importlib.import_module("ptyd.v1.ptyd_pb2_grpc")
    return pb2, pb2_grpc


def default_socket():
    """The daemon's default socket, the same rule the ptyd CLI follows."""
    if os.environ.get("PTYD_SOCKET"):
        return os.environ["PTYD_SOCKET"]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "ptyd", "ptyd.sock")
    return f"/tmp/ptyd-{os.getuid()}/ptyd.sock"


def connect(socket_path):
    """A channel over the Unix socket.

    grpc.default_authority: grpcio (since 1.57) otherwise sends the socket path as the HTTP/2
    :authority, which the h2 crate under tonic rejects as malformed (RST_STREAM
    PROTOCOL_ERROR). "localhost" is what every gRPC server accepts.
    """
    return grpc.insecure_channel(
        f"unix:{socket_path}",
        options=[("grpc.default_authority", "localhost")],
    )


def check(condition, what):
    if not condition:
        sys.exit(f"error: unexpected answer: {what}")


def run(pb2, pb2_grpc, socket_path, agent):
    with connect(socket_path) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = pb2_grpc.TerminalsStub(channel)

        types = stub.Types(pb2.TypesRequest())
        names = [t.name for t in types.types]
        print("types:", ", ".join(names))
        check("shell" in names, f"Types lists shell: {names}")

        opened = stub.Open(
            pb2.OpenRequest(agent_id=agent, type="shell", name="python-example")
        )
        sid = opened.session.session_id
        print(opened.rendered)
        try:
            # Run a command: Send returns when the prompt is back, with the exit code.
            sent = stub.Send(
                pb2.SendRequest(
                    agent_id=agent,
                    session_id=sid,
                    text="for i in $(seq 1 25); do echo line $i; done",
                    timeout_ms=30000,
                )
            )
            print(sent.rendered)
            result = sent.foreground
            check(sent.WhichOneof("result") == "foreground", "a foreground result")
            check(
                result.wait_reason == pb2.WAIT_REASON_PROMPT,
                f"the wait ended at the prompt: {pb2.WaitReason.Name(result.wait_reason)}",
            )
            check(
                result.HasField("exit_code") and result.exit_code == 0,
                f"exit code 0: {result}",
            )
            check("line 25" in result.viewport, f"the output is there: {result.viewport!r}")

            # A failing command reports its exit code (a result, not an error).
            failed = stub.Send(
                pb2.SendRequest(agent_id=agent, session_id=sid, text="false")
            ).foreground
            check(failed.exit_code == 1, f"false exits 1: {failed}")

            # Page the history backwards, 10 lines at a time, by absolute line number.
            newest = stub.Read(
                pb2.ReadRequest(agent_id=agent, session_id=sid, count=10)
            )
            print(f"history: lines {newest.first_line}..{newest.total_lines}")
            pages, begin, seen = 0, newest.line_begin, newest.text.split("\n")
            while begin > newest.first_line and pages < 10:
                start = max(newest.first_line, begin - 10)
                page = stub.Read(
                    pb2.ReadRequest(
                        agent_id=agent,
                        session_id=sid,
                        from_line=start,
                        count=begin - start,
                    )
                )
                print(page.rendered)
                seen = page.text.split("\n") + seen
                begin, pages = page.line_begin, pages + 1
            check(pages >= 2, f"paged more than one page back ({pages})")
            check("line 1" in seen and "line 25" in seen, "every line is in the history")
        finally:
            closed = stub.Close(pb2.CloseRequest(agent_id=agent, session_id=sid))
            print(closed.rendered)

        # Errors are gRPC status codes; a closed session is NOT_FOUND.
        try:
            stub.Read(pb2.ReadRequest(agent_id=agent, session_id=sid))
            check(False, "a closed session is gone")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.NOT_FOUND, f"NOT_FOUND: {e}")
            print(f"after close: {e.code().name}: {e.details()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", default=default_socket(), help="daemon socket")
    parser.add_argument("--agent", default="python-example", help="agent id")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ptyd-stubs-") as out_dir:
        pb2, pb2_grpc = load_stubs(out_dir)
        run(pb2, pb2_grpc, args.socket, args.agent)
    print("ok")


if __name__ == "__main__":
    main()
