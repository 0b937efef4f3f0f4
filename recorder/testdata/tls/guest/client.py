# A TLS client: connects to 192.0.2.2:4433 (this machine's own address,
# where capture.sh listens), sends its ClientHello for api.example.test,
# and gives up on whatever comes back.
import socket, ssl
ctx = ssl.create_default_context()
s = socket.create_connection(("192.0.2.2", 4433))
try:
    ctx.wrap_socket(s, server_hostname="Api.Example.TEST")
except (ssl.SSLError, OSError) as e:
    print("handshake ended:", type(e).__name__)
