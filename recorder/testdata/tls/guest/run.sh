#!/bin/sh
# A real TLS client in the guest: the guest has only loopback, so an
# address outside 127.0.0.0/8 is added to lo (the recorded program runs
# unsandboxed, as root, in the throwaway guest); a listener there reads
# the ClientHello; client.py sends it for Api.Example.TEST.
set -e
ip addr add 192.0.2.2/32 dev lo
python3 -c 'import socket; s=socket.socket(); s.bind(("192.0.2.2", 4433)); s.listen(); print("listening", flush=True); c, _ = s.accept(); c.recv(65536); c.close()' &
sleep 1
python3 client.py
wait
