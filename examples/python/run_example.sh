#!/usr/bin/env bash
# Runs the Python example against a daemon built from this checkout: `cargo build`, start
# `target/debug/ptyd serve` on a socket in a temp dir, run ptyd_client.py, stop the daemon with
# SIGTERM and require a clean exit. Installs grpcio and grpcio-tools with pip when missing.
# Called by .ci/run; works the same by hand: bash examples/python/run_example.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! python3 -c 'import grpc, grpc_tools' 2>/dev/null; then
  python3 -m pip install --quiet grpcio grpcio-tools
fi
cargo build --locked --quiet

tmp=$(mktemp -d -t ptyd-python-example.XXXXXX)
socket="$tmp/ptyd.sock"
# No user config file: XDG_CONFIG_HOME points into the temp dir.
XDG_CONFIG_HOME="$tmp/config" target/debug/ptyd serve --socket "$socket" 2>"$tmp/serve.log" &
daemon=$!
stop_daemon() {
  local status=$?
  if kill -0 "$daemon" 2>/dev/null; then
    kill -TERM "$daemon"
    if ! wait "$daemon"; then
      echo "ptyd serve did not exit cleanly after SIGTERM" >&2
      status=1
    fi
  fi
  if [ "$status" -ne 0 ]; then
    echo "--- ptyd serve log" >&2
    cat "$tmp/serve.log" >&2
  fi
  rm -rf "$tmp"
  exit "$status"
}
trap stop_daemon EXIT

# The client waits (with a deadline) until the daemon answers on the socket.
python3 examples/python/ptyd_client.py --socket "$socket"
