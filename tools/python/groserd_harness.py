"""Runs real groserd processes for the protocol tests, and builds the cart
requests of docs/PROTOCOL.md §7 and §8 from the protos.

Written from docs/PROTOCOL.md and Protos/ only. GROSERD names the binary
(default: <repo>/.build/debug/groserd). Each Daemon has a short socket path
under /tmp and its own --data directory (or one given, to restart on it).
"""
from __future__ import annotations

import datetime
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from groser_client import (  # noqa: E402
    Client, ConnectionClosed, StatusCode, encode_frame, service_pb2, status_of,
)
from groser.v1 import cart_pb2  # noqa: E402  (generated next to service_pb2)

REPO = Path(__file__).resolve().parents[2]
GROSERD = os.environ.get("GROSERD") or str(REPO / ".build" / "debug" / "groserd")
READY_TIMEOUT = 10.0


class Daemon:
    """One groserd process. stop() sends SIGTERM and waits; start() again runs a
    new process on the same socket and data directory (a restart)."""

    def __init__(self, *extra_args: str, data: Optional[str] = None, start: bool = True):
        if not os.access(GROSERD, os.X_OK):
            pytest.fail(f"groserd binary not found or not executable: {GROSERD} "
                        "(build it with `swift build`, or set GROSERD)")
        self.tmp = tempfile.mkdtemp(prefix="gp-", dir="/tmp")  # short: sun_path is 108 bytes
        self.socket = os.path.join(self.tmp, "d.sock")
        self.data = data or os.path.join(self.tmp, "data")
        self.db = os.path.join(self.data, "groser.sqlite3")
        self.log_path = os.path.join(self.tmp, "groserd.log")
        self.extra_args = list(extra_args)
        self.proc: Optional[subprocess.Popen] = None
        self._log = None
        if start:
            self.start()

    @property
    def args(self) -> list[str]:
        return [GROSERD, "--socket", self.socket, "--data", self.data, "--log-level", "info",
                *self.extra_args]

    def start(self) -> "Daemon":
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def log(self) -> str:
        if self._log:
            self._log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-4000:]

    def _wait_ready(self) -> None:
        end = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                pytest.fail(f"groserd exited with {self.proc.returncode} before accepting; "
                            f"args {self.args}\nlog:\n{self.log()}")
            if os.path.exists(self.socket):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(self.socket)
                    return
                except OSError:
                    pass
                finally:
                    s.close()
            time.sleep(0.05)
        pytest.fail(f"groserd did not accept on {self.socket} within {READY_TIMEOUT} s\nlog:\n{self.log()}")

    def client(self, timeout: float = 10.0) -> Client:
        return Client(self.socket, timeout=timeout).connect()

    def raw_socket(self, timeout: float = 10.0) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(self.socket)
        return s

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        """Signal the daemon and wait for it to exit; returns its exit status."""
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"groserd still running {timeout} s after signal {sig}\nlog:\n{self.log()}")
        self._log.close()
        return rc

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self._log:
            self._log.close()

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


# -- requests ------------------------------------------------------------------

def request(method: str, request_id: int = 0, deadline_ms: int = 0):
    """A Request with `method` selected (present even when empty); returns
    (request, its method message) to fill in."""
    req = service_pb2.Request(id=request_id, deadline_ms=deadline_ms)
    sub = getattr(req, method)
    sub.SetInParent()
    return req, sub


def _mutation(sub, session: str, store: str, key: str, version: int) -> None:
    sub.cart.session = session
    sub.cart.store_uid = store
    if key:
        sub.cart.idempotency_key = key
    if version:
        sub.cart.expected_version = version
    sub.cart.SetInParent()


def add_item(session, store, product, quantity, key="", version=0, rid=0):
    req, sub = request("add_item", rid)
    _mutation(sub, session, store, key, version)
    sub.product_uid = product
    sub.quantity = quantity
    return req


def set_quantity(session, store, product, quantity, key="", version=0, rid=0):
    req, sub = request("set_quantity", rid)
    _mutation(sub, session, store, key, version)
    sub.product_uid = product
    sub.quantity = quantity
    return req


def remove_item(session, store, product, key="", version=0, rid=0):
    req, sub = request("remove_item", rid)
    _mutation(sub, session, store, key, version)
    sub.product_uid = product
    return req


def clear_cart(session, store, key="", version=0, rid=0):
    req, sub = request("clear_cart", rid)
    _mutation(sub, session, store, key, version)
    return req


def get_cart(session, store, rid=0):
    req, sub = request("get_cart", rid)
    sub.session = session
    sub.store_uid = store
    return req


def list_orders(session, rid=0):
    req, sub = request("list_orders", rid)
    sub.session = session
    return req


def valid_card(**override) -> cart_pb2.Card:
    """A Luhn-valid Visa number, expiring in December two years from now."""
    fields = dict(number="4111 1111 1111 1111", expiry_month=12,
                  expiry_year=datetime.date.today().year + 2, cvc="123", holder_name="Anna Ivanova")
    fields.update(override)
    return cart_pb2.Card(**fields)


def checkout(session, store, version, address="Nevsky prospekt 1, St Petersburg", card="valid",
             key="", rid=0):
    """card="valid" sends valid_card(); None sends no card at all; else a Card."""
    req, sub = request("checkout", rid)
    sub.session = session
    sub.store_uid = store
    sub.expected_version = version
    sub.delivery_address = address
    if card == "valid":
        sub.card.CopyFrom(valid_card())
    elif card is not None:
        sub.card.CopyFrom(card)
    if key:
        sub.idempotency_key = key
    return req


def set_product(product, price=None, stock=None, rid=0):
    req, sub = request("set_product", rid)
    sub.product_uid = product
    if price is not None:
        sub.price_minor_units = price
    if stock is not None:
        sub.stock = stock
    return req


def get_store(rid=0, deadline_ms=0, include_products=False, **selector):
    req, sub = request("get_store", rid, deadline_ms)
    for k, v in selector.items():
        setattr(sub, k, v)
    if include_products:
        sub.include_products = True
    return req


# -- answers -------------------------------------------------------------------

def code_of(resp: service_pb2.Response) -> int:
    return status_of(resp)[0]


def ok(req: service_pb2.Request, resp: service_pb2.Response):
    """The body of an OK answer to req (asserting id, status and body case)."""
    code, message = status_of(resp)
    assert resp.id == req.id, f"answer id {resp.id}, request id {req.id}"
    assert code == StatusCode.OK, f"{req.WhichOneof('method')}: {StatusCode.Name(code)}: {message}"
    assert resp.WhichOneof("body") == req.WhichOneof("method")
    return getattr(resp, resp.WhichOneof("body"))


def refused(resp: service_pb2.Response, code: int, request_id: Optional[int] = None) -> str:
    """Assert an error answer with this code and no body; returns its message."""
    got, message = status_of(resp)
    assert got == code, (f"expected {StatusCode.Name(code)}, got "
                         f"{StatusCode.Name(got) if got in StatusCode.values() else got}: {message!r}")
    if request_id is not None:
        assert resp.id == request_id
    assert message.strip(), "an error must carry a message"
    assert resp.WhichOneof("body") is None, "an error answer carries no body"
    return message


def exchange(c: Client, req: service_pb2.Request) -> service_pb2.Response:
    """Send one request and return its raw Response (any status)."""
    return c.wait_for(c.send_request(req))


def call_ok(c: Client, req: service_pb2.Request):
    return ok(req, exchange(c, req))


def open_session(c: Client) -> str:
    req, _ = request("open_session")
    return call_ok(c, req).session


def read_raw_frame(sock: socket.socket, buf: bytearray) -> Optional[bytes]:
    """The next whole frame (prefix and body) from sock; None at end of stream
    (leaving an unfinished frame's bytes in buf)."""
    while True:
        if len(buf) >= 4:
            (n,) = struct.unpack_from(">I", buf)
            if len(buf) >= 4 + n:
                frame = bytes(buf[:4 + n])
                del buf[:4 + n]
                return frame
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return None
        buf += chunk


__all__ = [
    "Client", "ConnectionClosed", "Daemon", "GROSERD", "REPO", "StatusCode", "add_item",
    "call_ok", "cart_pb2", "checkout", "clear_cart", "code_of", "encode_frame", "exchange",
    "get_cart", "get_store", "list_orders", "ok", "open_session", "read_raw_frame", "refused",
    "remove_item", "request", "service_pb2", "set_product", "set_quantity", "status_of",
    "valid_card",
]
