"""Where the review app listens: the socket bound before the server starts, so the address announced is the one
bound.

* :func:`check_port`: 1-65535, or 0 for any free port (a port beyond 65535 is not wrapped around: refused).
* :func:`listening_socket`: a TCP socket bound to ``(host, port)`` and listening; ``port`` 0 lets the system pick a
  free port. :class:`ListenError` (one line naming the address and why) for a port outside 0-65535, a port in use,
  or a host that is not an address of this machine. The socket is handed to uvicorn (``Server.run(sockets=...)``),
  which serves on it as it is: no second bind, so nothing can listen elsewhere than announced.
* :func:`bound_url`: ``http://HOST:PORT`` of such a socket, with the port it really has (IPv6 hosts in brackets).
"""

from __future__ import annotations

import socket

MAX_PORT = 65535


class ListenError(ValueError):
    """The app cannot listen where asked; the message is one line naming the address and the reason."""


def check_port(port: int) -> int:
    """``port`` when it is a TCP port (1-65535) or 0 (any free port); :class:`ListenError` otherwise."""
    if not 0 <= port <= MAX_PORT:
        raise ListenError(f"port {port} is out of range: use 1-{MAX_PORT}, or 0 for any free port")
    return port


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``(host, port)`` (0: any free port), listening, inheritable by uvicorn's workers."""
    check_port(port)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as error:
        raise ListenError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
        sock.set_inheritable(True)
    except OSError as error:
        sock.close()
        raise ListenError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    return sock


def bound_url(host: str, sock: socket.socket) -> str:
    """``http://HOST:PORT`` for the socket bound to ``host`` (the port it really has)."""
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"
