"""A loopback TCP forwarder that can be cut and restored: a registry or gateway that goes away, then comes back."""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttableProxy:
    """Forwards `127.0.0.1:<port>` to `target` until `cut`, which closes the listener and every open connection
    (new connections are then refused, as by a registry that went down); `restore` listens on the same port again."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._cut = False
        self._start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _start(self) -> None:
        threading.Thread(target=self._accept, args=(self._listener,), name="conformance-proxy", daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _addr = listener.accept()
            except OSError:
                return  # the listener was closed by `cut`
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._cut:
                    client.close()
                    upstream.close()
                    return
                self._open += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Refuse new connections and reset the open ones; idempotent."""
        with self._lock:
            self._cut = True
            conns, self._open = self._open, []
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self._listener.close()
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def restore(self) -> None:
        """Listen on the same port again after `cut` (the outage is over); a no-op while forwarding."""
        with self._lock:
            if not self._cut:
                return
            self._listener = socket.create_server(("127.0.0.1", self.port))
            self._cut = False
        self._start()
