#!/bin/sh
# Captures trace: client.py under strace with the options `lockstep record
# run` traces a session with (evidence/strace.Command), the trace set cut to
# the network calls and write (the full set reads every library into a
# 2 MB trace), against a listener on 192.0.2.2:4433 that reads the
# ClientHello and closes.
set -e
cd "$(dirname "$0")"
python3 -c 'import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("192.0.2.2", 4433)); s.listen(); c, _ = s.accept(); c.recv(65536); c.close()' &
sleep 1
# The interpreter itself, not a version manager's wrapper script.
strace -f -qq -y -s 4096 -e trace=%network,write -o trace "$(python3 -c 'import sys; print(sys.executable)')" client.py >/dev/null
wait
