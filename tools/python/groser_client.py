#!/usr/bin/env python3
"""A small client for groserd, written from docs/PROTOCOL.md and Protos/ only.

Library:

    from groser_client import Client, GroserError
    with Client("/run/user/1000/groser/groserd.sock") as c:
        cities = c.list_cities().cities
        store = c.get_store(city_code="SPB", include_products=True).store
        try:
            c.get_store(city_code="XXX")
        except GroserError as e:
            print(e.code, e.message)         # 5 NOT_FOUND, "..."

CLI (prints JSON):

    python3 groser_client.py [--socket PATH] info
    python3 groser_client.py cities
    python3 groser_client.py store --city SPB [--products]
    python3 groser_client.py store --store-uid UID
    python3 groser_client.py shelf SHELF_UID
    python3 groser_client.py search "молоко 3,2" --city SPB [--page-size N] [--in-stock]

The generated protobuf modules are looked up in ./generated (tools/python/gen.sh
writes them there) or in the directory named by GROSER_PY_GENERATED.
"""
from __future__ import annotations

import argparse
import itertools
import os
import selectors
import socket
import struct
import sys
from pathlib import Path
from typing import Callable, Iterable, Optional

_generated = os.environ.get("GROSER_PY_GENERATED") or str(Path(__file__).resolve().parent / "generated")
if _generated not in sys.path:
    sys.path.insert(0, _generated)

try:
    from groser.v1 import catalog_pb2, search_pb2, service_pb2  # noqa: E402
except ImportError as exc:  # pragma: no cover - a setup problem, not a protocol one
    raise ImportError(
        f"groser protobuf modules not found in {_generated}: run tools/python/gen.sh first ({exc})"
    ) from exc

__all__ = [
    "Client", "ConnectionClosed", "GroserError", "ProtocolError", "StatusCode",
    "default_socket_path", "encode_frame", "status_of", "format_money", "catalog_pb2", "search_pb2",
    "service_pb2",
]

StatusCode = service_pb2.StatusCode
DEFAULT_MAX_FRAME_BYTES = 4 * 1024 * 1024
_LEN = struct.Struct(">I")

# Every method's oneof case, read from the compiled .protos (never listed by
# hand: the Swift drift tests check the .protos against groserd's registry).
# A Request's case and the Response body case an OK answer carries are the same.
METHODS = tuple(f.name for f in service_pb2.Request.DESCRIPTOR.oneofs_by_name["method"].fields)


class GroserError(Exception):
    """The server answered with a non-OK status."""

    def __init__(self, code: int, message: str, request_id: int = 0):
        self.code = int(code)
        self.message = message
        self.request_id = request_id
        try:
            self.code_name = StatusCode.Name(self.code)
        except ValueError:
            self.code_name = f"CODE_{self.code}"
        super().__init__(f"{self.code_name} ({self.code}): {message}")


class ProtocolError(Exception):
    """The connection broke or the server sent something this client cannot use."""


class ConnectionClosed(ProtocolError):
    """End of stream: the server closed the connection (end-of-file, or
    ECONNRESET after its last frame, PROTOCOL.md §11). Every frame read before
    it was whole. `truncated` is the number of bytes of an unfinished last
    frame that were discarded (0 when the stream ended between frames): such a
    frame is never an answer, and its request is unanswered (§11, "A truncated
    last frame"; §13)."""

    def __init__(self, truncated: int = 0, reset: bool = False):
        self.truncated = truncated
        self.reset = reset
        how = "reset" if reset else "closed"
        super().__init__(f"connection {how} by the server"
                         + (f" ({truncated} bytes of an unfinished last frame discarded)" if truncated else ""))


def default_socket_path() -> str:
    """The socket groserd uses without --socket: GROSER_SOCKET, then
    $XDG_RUNTIME_DIR/groser/groserd.sock, then /tmp/groser-<uid>/groserd.sock."""
    env = os.environ.get("GROSER_SOCKET")
    if env:
        return env
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "groser", "groserd.sock")
    return f"/tmp/groser-{os.getuid()}/groserd.sock"


def encode_frame(payload: bytes) -> bytes:
    """One frame: a 4-byte big-endian length, then the payload."""
    return _LEN.pack(len(payload)) + payload


def status_of(resp: service_pb2.Response) -> tuple[int, str]:
    """(code, message) of a Response; an absent status is OK."""
    if not resp.HasField("status"):
        return StatusCode.OK, ""
    return resp.status.code, resp.status.message


class Client:
    """One connection to groserd. Not thread-safe: use one Client per thread."""

    def __init__(self, path: Optional[str] = None, timeout: Optional[float] = 30.0,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 on_push: Optional[Callable[[service_pb2.Response], None]] = None):
        self.path = path or default_socket_path()
        self.timeout = timeout
        self.max_frame_bytes = max_frame_bytes
        # Called with every id-0 Response that carries no error status: a frame
        # the server sent unasked (none in protocol v1). Ignored when None.
        self.on_push = on_push
        self._ids = itertools.count(1)
        self._early: dict[int, service_pb2.Response] = {}  # read while waiting for another id
        # Frames of open watches (streams: many frames with one id), read
        # while waiting for something else, by watch id.
        self._streams: dict[int, list[service_pb2.Response]] = {}
        self._buf = bytearray()  # received bytes not yet parsed into frames
        self.sock: Optional[socket.socket] = None

    # -- connection -------------------------------------------------------

    def connect(self) -> "Client":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.path)
        except OSError:
            s.close()
            raise
        self.sock = s
        return self

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def __enter__(self) -> "Client":
        if self.sock is None:
            self.connect()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _socket(self) -> socket.socket:
        if self.sock is None:
            raise ProtocolError("not connected")
        return self.sock

    # -- frames -----------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (for tests: garbage frames, split frames)."""
        self._socket().sendall(data)

    def send_request(self, req: service_pb2.Request) -> int:
        """Send one Request, giving it a fresh id when it has none; returns the id."""
        if req.id == 0:
            req.id = self.next_id()
        self.send_raw(encode_frame(req.SerializeToString()))
        return req.id

    def _frame_from_buffer(self) -> Optional[bytes]:
        if len(self._buf) < 4:
            return None
        (n,) = _LEN.unpack_from(self._buf)
        if n > self.max_frame_bytes:
            raise ProtocolError(f"server sent a {n}-byte frame, over the {self.max_frame_bytes}-byte limit")
        if len(self._buf) < 4 + n:
            return None
        payload = bytes(self._buf[4:4 + n])
        del self._buf[:4 + n]
        return payload

    def _fill(self) -> None:
        """Read what the socket has (at least one byte, blocking up to the timeout)."""
        try:
            chunk = self._socket().recv(65536)
        except ConnectionResetError as exc:
            # Seen after the server closes with our unread bytes still queued
            # (after RESOURCE_EXHAUSTED, a slow-reader cut-off, a shutdown);
            # frames it sent before are read first. The end of the stream, as EOF.
            self._end_of_stream(reset=True, cause=exc)
        if not chunk:
            self._end_of_stream(reset=False)
        self._buf += chunk

    def _end_of_stream(self, reset: bool, cause: Optional[BaseException] = None):
        # A frame cut short by the end of the stream is not an answer (§11):
        # drop its bytes and report the end of the stream.
        truncated = len(self._buf)
        self._buf.clear()
        raise ConnectionClosed(truncated, reset) from cause

    @staticmethod
    def _decode(payload: bytes) -> service_pb2.Response:
        resp = service_pb2.Response()
        try:
            resp.ParseFromString(payload)
        except Exception as exc:  # google.protobuf.message.DecodeError
            raise ProtocolError(f"undecodable Response frame ({len(payload)} bytes): {exc}") from exc
        return resp

    def read_response(self) -> service_pb2.Response:
        """Read the next Response frame from the socket, whatever its id.
        Handles frames split over many reads and many frames in one read."""
        while True:
            payload = self._frame_from_buffer()
            if payload is not None:
                return self._decode(payload)
            self._fill()

    def _dispatch_id0(self, resp: service_pb2.Response) -> None:
        code, message = status_of(resp)
        if code != StatusCode.OK:
            # The server could not read one of our frames (INVALID_ARGUMENT) or
            # refused an over-size one (RESOURCE_EXHAUSTED, then it closes).
            raise GroserError(code, message, 0)
        if self.on_push is not None:
            self.on_push(resp)

    def wait_for(self, request_id: int) -> service_pb2.Response:
        """Read responses until the one with this id arrives; others are kept."""
        if request_id in self._early:
            return self._early.pop(request_id)
        while True:
            resp = self.read_response()
            if resp.id == request_id:
                return resp
            if resp.id == 0:
                self._dispatch_id0(resp)
            elif resp.id in self._streams:
                self._streams[resp.id].append(resp)
            else:
                self._early[resp.id] = resp

    # -- calls ------------------------------------------------------------

    @staticmethod
    def check(req: service_pb2.Request, resp: service_pb2.Response):
        """The body message of an OK response; GroserError otherwise."""
        code, message = status_of(resp)
        if code != StatusCode.OK:
            raise GroserError(code, message, resp.id)
        method = req.WhichOneof("method")
        body = resp.WhichOneof("body")
        if body != method:
            raise ProtocolError(f"response {resp.id} carries body {body!r}, expected {method!r}")
        return getattr(resp, body)

    def call(self, req: service_pb2.Request):
        """Send one request and return its response body (raises GroserError)."""
        rid = self.send_request(req)
        return self.check(req, self.wait_for(rid))

    def batch(self, requests: Iterable[service_pb2.Request]) -> list[service_pb2.Response]:
        """Pipeline requests: send them all without waiting, reading responses
        while sending (so neither side's buffers can deadlock), and return the
        Responses in request order, matched by id. Requests without an id get
        fresh ones; ids must be distinct. Errors are not raised: use check()."""
        reqs = list(requests)
        for r in reqs:
            if r.id == 0:
                r.id = self.next_id()
        ids = [r.id for r in reqs]
        if len(set(ids)) != len(ids):
            raise ValueError("batch request ids must be distinct")
        pending = set(ids)
        got: dict[int, service_pb2.Response] = {}
        for rid in list(pending):
            if rid in self._early:
                got[rid] = self._early.pop(rid)
                pending.discard(rid)
        out = bytearray(b"".join(encode_frame(r.SerializeToString()) for r in reqs))

        sock = self._socket()
        sel = selectors.DefaultSelector()
        sock.setblocking(False)
        try:
            sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
            while pending:
                events = sel.select(self.timeout)
                if not events:
                    raise socket.timeout(f"no progress for {self.timeout} s with {len(pending)} responses pending")
                for _, mask in events:
                    if mask & selectors.EVENT_WRITE and out:
                        try:
                            sent = sock.send(out)
                        except BlockingIOError:
                            sent = 0
                        del out[:sent]
                        if not out:
                            sel.modify(sock, selectors.EVENT_READ)
                    if mask & selectors.EVENT_READ:
                        try:
                            self._fill()
                        except BlockingIOError:
                            pass
                        while (payload := self._frame_from_buffer()) is not None:
                            resp = self._decode(payload)
                            if resp.id == 0:
                                self._dispatch_id0(resp)
                            elif resp.id in self._streams:
                                self._streams[resp.id].append(resp)
                            elif resp.id in pending:
                                pending.discard(resp.id)
                                got[resp.id] = resp
                            else:
                                self._early[resp.id] = resp
        finally:
            sel.close()
            sock.settimeout(self.timeout)
        return [got[i] for i in ids]

    # -- methods ----------------------------------------------------------

    @staticmethod
    def request(method: str, deadline_ms: int = 0, request_id: int = 0, **fields) -> service_pb2.Request:
        """Build a Request for one method: request("get_shelf", shelf_uid="...")."""
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}")
        req = service_pb2.Request(id=request_id, deadline_ms=deadline_ms)
        sub = getattr(req, method)
        sub.SetInParent()
        for k, v in fields.items():
            if v is not None:
                setattr(sub, k, v)
        return req

    def server_info(self, deadline_ms: int = 0) -> service_pb2.ServerInfoResponse:
        return self.call(self.request("server_info", deadline_ms))

    def list_cities(self, deadline_ms: int = 0) -> service_pb2.ListCitiesResponse:
        return self.call(self.request("list_cities", deadline_ms))

    def get_store(self, city_code: Optional[str] = None, city_uid: Optional[str] = None,
                  store_uid: Optional[str] = None, include_products: bool = False,
                  deadline_ms: int = 0) -> service_pb2.GetStoreResponse:
        """Exactly one of city_code, city_uid, store_uid; a city means its default store."""
        given = [x for x in (city_code, city_uid, store_uid) if x is not None]
        if len(given) > 1:
            raise ValueError("give at most one of city_code, city_uid, store_uid")
        # None of them set is sent as is: the server answers INVALID_ARGUMENT.
        return self.call(self.request("get_store", deadline_ms, city_code=city_code, city_uid=city_uid,
                                      store_uid=store_uid, include_products=include_products or None))

    def get_shelf(self, shelf_uid: str, deadline_ms: int = 0) -> service_pb2.GetShelfResponse:
        return self.call(self.request("get_shelf", deadline_ms, shelf_uid=shelf_uid))

    def stats(self) -> service_pb2.StatsResponse:
        return self.call(self.request("stats"))

    def search_products(self, query: str, city_code: Optional[str] = None, city_uid: Optional[str] = None,
                        store_uid: Optional[str] = None, page_size: int = 0, page_token: str = "",
                        in_stock_only: bool = False, department_uid: Optional[str] = None,
                        shelf_uid: Optional[str] = None, group_by_shelf: bool = False,
                        deadline_ms: int = 0) -> search_pb2.SearchProductsResponse:
        """SearchProducts (docs/SEARCH.md): exactly one of city_code, city_uid,
        store_uid; at most one of department_uid, shelf_uid. page_size 0 is
        the server's default; page_token is a previous next_page_token."""
        given = [x for x in (city_code, city_uid, store_uid) if x is not None]
        if len(given) > 1:
            raise ValueError("give at most one of city_code, city_uid, store_uid")
        # As get_store: no selector, or both filters, is sent as is and refused by the server.
        return self.call(self.request("search_products", deadline_ms, city_code=city_code, city_uid=city_uid,
                                      store_uid=store_uid, query=query, page_size=page_size or None,
                                      page_token=page_token or None, in_stock_only=in_stock_only or None,
                                      department_uid=department_uid, shelf_uid=shelf_uid,
                                      group_by_shelf=group_by_shelf or None))

    # -- watching (PROTOCOL.md §7B) ---------------------------------------

    def watch(self, city_code: Optional[str] = None, city_uid: Optional[str] = None,
              store_uid: Optional[str] = None, since_version: int = 0) -> "Watch":
        """Start a watch on this connection; its first frame is read before
        returning (a refused Watch raises GroserError). Iterate the Watch for
        the WatchEvents that follow; Watch.cancel() ends it."""
        req = self.request("watch", city_code=city_code, city_uid=city_uid, store_uid=store_uid,
                           since_version=since_version or None)
        rid = self.send_request(req)
        self._streams[rid] = []
        w = Watch(self, rid)
        try:
            w.first = w.next_event()
        except BaseException:
            self._streams.pop(rid, None)
            raise
        return w

    def _next_stream_frame(self, watch_id: int) -> service_pb2.Response:
        queue = self._streams[watch_id]
        while not queue:
            resp = self.read_response()
            if resp.id == 0:
                self._dispatch_id0(resp)
            elif resp.id in self._streams:
                self._streams[resp.id].append(resp)
            else:
                self._early[resp.id] = resp
        return queue.pop(0)


class Watch:
    """An open watch: iterate for WatchEvent messages (the first, with
    `initial` set, is in .first). A frame without `continues` ends it: a
    GroserError carries its status (CANCELLED after cancel())."""

    def __init__(self, client: Client, watch_id: int):
        self.client = client
        self.id = watch_id
        self.first: Optional[service_pb2.WatchEvent] = None
        self.ended = False

    def next_event(self) -> service_pb2.WatchEvent:
        if self.ended:
            raise StopIteration
        resp = self.client._next_stream_frame(self.id)
        code, message = status_of(resp)
        if not resp.continues:
            self.ended = True
            self.client._streams.pop(self.id, None)
        if code != StatusCode.OK:
            raise GroserError(code, message, resp.id)
        if resp.WhichOneof("body") != "watch":
            raise ProtocolError(f"watch {self.id} sent body {resp.WhichOneof('body')!r}")
        return resp.watch

    def __iter__(self):
        return self

    def __next__(self) -> service_pb2.WatchEvent:
        try:
            return self.next_event()
        except GroserError:
            if self.ended:
                raise StopIteration
            raise

    def cancel(self) -> list[service_pb2.WatchEvent]:
        """Send CancelWatch; return the frames that were still on their way,
        once the stream's CANCELLED end and the CancelWatch answer arrived."""
        rid = self.client.send_request(self.client.request("cancel_watch", watch_id=self.id))
        left: list[service_pb2.WatchEvent] = []
        while not self.ended:
            try:
                left.append(self.next_event())
            except GroserError as e:
                if e.code != StatusCode.CANCELLED:
                    raise
        self.client.check(self.client.request("cancel_watch"), self.client.wait_for(rid))
        return left


def format_money(m: catalog_pb2.Money) -> str:
    """8990 RUB -> "89.90 RUB" (every currency groser uses has 2 minor digits)."""
    sign = "-" if m.minor_units < 0 else ""
    units, minor = divmod(abs(m.minor_units), 100)
    return f"{sign}{units}.{minor:02d} {m.currency}"


def main(argv: Optional[list[str]] = None) -> int:
    from google.protobuf import json_format

    p = argparse.ArgumentParser(description="Query groserd over its Unix socket (protocol v1).")
    p.add_argument("--socket", help="socket path (default: GROSER_SOCKET, XDG_RUNTIME_DIR, /tmp/groser-UID)")
    p.add_argument("--deadline-ms", type=int, default=0)
    p.add_argument("--timeout", type=float, default=30.0, help="socket timeout in seconds")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="ServerInfo")
    sub.add_parser("cities", help="ListCities")
    st = sub.add_parser("store", help="GetStore")
    sel = st.add_mutually_exclusive_group(required=True)
    sel.add_argument("--city", help="city code, e.g. SPB")
    sel.add_argument("--city-uid")
    sel.add_argument("--store-uid")
    st.add_argument("--products", action="store_true", help="include every shelf's products")
    sh = sub.add_parser("shelf", help="GetShelf")
    sh.add_argument("shelf_uid")
    se = sub.add_parser("search", help="SearchProducts")
    se.add_argument("query")
    sel = se.add_mutually_exclusive_group(required=True)
    sel.add_argument("--city", help="city code, e.g. SPB")
    sel.add_argument("--city-uid")
    sel.add_argument("--store-uid")
    se.add_argument("--page-size", type=int, default=0)
    se.add_argument("--page-token", default="")
    se.add_argument("--in-stock", action="store_true", help="leave out products that are out of stock")
    within = se.add_mutually_exclusive_group()
    within.add_argument("--department-uid")
    within.add_argument("--shelf-uid")
    se.add_argument("--group-by-shelf", action="store_true")
    a = p.parse_args(argv)

    try:
        with Client(a.socket, timeout=a.timeout) as c:
            if a.cmd == "info":
                body = c.server_info(a.deadline_ms)
            elif a.cmd == "cities":
                body = c.list_cities(a.deadline_ms)
            elif a.cmd == "store":
                body = c.get_store(city_code=a.city, city_uid=a.city_uid, store_uid=a.store_uid,
                                   include_products=a.products, deadline_ms=a.deadline_ms)
            elif a.cmd == "shelf":
                body = c.get_shelf(a.shelf_uid, a.deadline_ms)
            else:
                body = c.search_products(a.query, city_code=a.city, city_uid=a.city_uid, store_uid=a.store_uid,
                                         page_size=a.page_size, page_token=a.page_token,
                                         in_stock_only=a.in_stock, department_uid=a.department_uid,
                                         shelf_uid=a.shelf_uid, group_by_shelf=a.group_by_shelf,
                                         deadline_ms=a.deadline_ms)
    except GroserError as e:
        print(f"groser_client: {e}", file=sys.stderr)
        return 1
    except (OSError, ProtocolError) as e:
        print(f"groser_client: {e}", file=sys.stderr)
        return 2
    print(json_format.MessageToJson(body, ensure_ascii=False, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
