"""Tests of the Python client against a real groserd binary.

GROSERD names the binary (default: <repo>/.build/debug/groserd). Each daemon
runs on a short socket path under /tmp with a fresh --data directory, and is
killed in teardown whatever happens. Run through tools/python-client-test.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from groser_client import (  # noqa: E402
    Client, GroserError, ProtocolError, StatusCode, encode_frame, service_pb2, status_of,
)

REPO = Path(__file__).resolve().parents[2]
GROSERD = os.environ.get("GROSERD") or str(REPO / ".build" / "debug" / "groserd")
IMAGE_BASE = "http://img.groser.test:8099"
READY_TIMEOUT = 10.0
EXIT_TIMEOUT = 10.0
# ServerInfo's method names, in field order, from the .protos' oneof (who_am_i: WhoAmI).
METHODS_V1 = ["".join(part.capitalize() for part in f.name.split("_"))
              for f in sorted(service_pb2.Request.DESCRIPTOR.oneofs_by_name["method"].fields, key=lambda f: f.number)]


class Daemon:
    """One groserd process on its own socket and data directory."""

    def __init__(self, *extra_args: str):
        if not os.access(GROSERD, os.X_OK):
            pytest.fail(f"groserd binary not found or not executable: {GROSERD} "
                        "(build it with `swift build`, or set GROSERD)")
        self.tmp = tempfile.mkdtemp(prefix="gs-", dir="/tmp")  # short: sun_path is 108 bytes
        self.socket = os.path.join(self.tmp, "d.sock")
        assert len(self.socket.encode()) < 100
        self.data = os.path.join(self.tmp, "data")
        self.log_path = os.path.join(self.tmp, "groserd.log")
        self.args = [GROSERD, "--socket", self.socket, "--data", self.data,
                     "--image-base-url", IMAGE_BASE, "--log-level", "info", *extra_args]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            self.kill()
            raise

    def log(self) -> str:
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

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon():
    d = Daemon("--threads", "2")
    try:
        yield d
    finally:
        d.kill()


@pytest.fixture
def client(daemon):
    c = daemon.client()
    try:
        yield c
    finally:
        c.close()


def spb_store(client: Client, include_products: bool = False):
    return client.get_store(city_code="SPB", include_products=include_products)


def raw_error(resp: service_pb2.Response) -> int:
    code, message = status_of(resp)
    if code != StatusCode.OK:
        assert message.strip(), f"non-OK status {code} without a message"
        assert resp.WhichOneof("body") is None, "an error response must carry no body"
    return code


# -- start-up ----------------------------------------------------------------

def test_socket_and_data_files(daemon):
    mode = stat.S_IMODE(os.stat(daemon.socket).st_mode)
    assert stat.S_ISSOCK(os.stat(daemon.socket).st_mode)
    assert mode == 0o660, f"socket mode {oct(mode)}, want 0o660"
    assert os.path.isfile(os.path.join(daemon.data, "groser.sqlite3"))


def test_server_info(client):
    info = client.server_info()
    assert info.server_version.startswith("groserd "), info.server_version
    assert info.protocol_version == 1
    assert list(info.methods) == METHODS_V1
    assert info.uptime_ms < 3_600_000
    assert info.catalog_version >= 1


# -- ListCities --------------------------------------------------------------

def test_list_cities(client):
    resp = client.list_cities()
    cities = list(resp.cities)
    codes = [c.code for c in cities]
    assert len(cities) >= 5, codes
    assert {"MSK", "SPB"} <= set(codes), codes
    assert codes == sorted(codes), "cities must be ordered by code"
    assert len(set(codes)) == len(codes)
    assert len({c.uid for c in cities}) == len(cities)
    for c in cities:
        assert c.uid and c.name and c.code == c.code.upper(), c
        assert c.stores, f"city {c.code} has no stores"
        uids = [s.uid for s in c.stores]
        assert c.default_store_uid in uids, f"{c.code}: default {c.default_store_uid} not in {uids}"
        for s in c.stores:
            assert s.uid and s.name and s.city_uid == c.uid, s
    assert resp.catalog_version == client.server_info().catalog_version


# -- GetStore ----------------------------------------------------------------

def test_get_store_spb_default(client):
    resp = spb_store(client)
    city, store = resp.city, resp.store
    assert city.code == "SPB"
    assert store.summary.uid == city.default_store_uid
    assert store.summary.city_uid == city.uid
    assert store.summary.uid in [s.uid for s in city.stores]
    deps = list(store.departments)
    assert 8 <= len(deps) <= 15, f"{len(deps)} departments"
    total = 0
    for d in deps:
        assert d.uid and d.name
        assert d.shelves, f"department {d.name} has no shelves"
        for sh in d.shelves:
            assert sh.uid and sh.name
            assert len(sh.products) == 0, "products are only filled with include_products"
            total += sh.product_count
    assert total > 0
    assert resp.catalog_version >= 1


def test_get_store_selectors_agree(client):
    spb = spb_store(client)
    uid = spb.store.summary.uid
    assert client.get_store(city_code="spb").store.summary.uid == uid, "city_code is case-insensitive"
    assert client.get_store(city_code="Spb").store.summary.uid == uid
    assert client.get_store(city_uid=spb.city.uid).store.summary.uid == uid
    by_store = client.get_store(store_uid=uid)
    assert by_store.store.summary.uid == uid
    assert by_store.city.uid == spb.city.uid
    # A non-default store of a city can be asked for by uid.
    cities = client.list_cities().cities
    others = [(c, s) for c in cities for s in c.stores if s.uid != c.default_store_uid]
    if others:
        c, s = others[0]
        r = client.get_store(store_uid=s.uid)
        assert r.store.summary.uid == s.uid and r.city.uid == c.uid


def test_get_store_with_products(client):
    resp = spb_store(client, include_products=True)
    n = 0
    for d in resp.store.departments:
        for sh in d.shelves:
            assert len(sh.products) == sh.product_count, f"shelf {sh.name}"
            for p in sh.products:
                n += 1
                assert p.uid and p.name, p
                assert p.shelf_uid == sh.uid
                assert p.unit in ("g", "ml", "pcs"), p.unit
                assert p.unit_size > 0
                assert p.price.currency == "RUB", p
                assert p.price.minor_units > 0, p
                url = p.image_url
                assert url.startswith(IMAGE_BASE + "/"), url
                assert url.count("://") == 1, f"base prefixed more than once: {url}"
                assert "//" not in url[len(IMAGE_BASE):], url
    assert n > 0


def test_get_store_errors(client):
    with pytest.raises(GroserError) as e:
        client.get_store(city_code="XXX")
    assert e.value.code == StatusCode.NOT_FOUND == 5
    assert e.value.message
    with pytest.raises(GroserError) as e:
        client.get_store(city_uid="no-such-city-uid")
    assert e.value.code == StatusCode.NOT_FOUND
    with pytest.raises(GroserError) as e:
        client.get_store(store_uid="no-such-store-uid")
    assert e.value.code == StatusCode.NOT_FOUND
    with pytest.raises(GroserError) as e:
        client.get_store()  # no selector
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    # The connection stays usable after errors.
    assert client.server_info().protocol_version == 1


# -- GetShelf ----------------------------------------------------------------

def test_get_shelf_sorted(client):
    store = spb_store(client)
    shelves = [(d, sh) for d in store.store.departments for sh in d.shelves]
    dep, shelf = max(shelves, key=lambda x: x[1].product_count)
    assert shelf.product_count >= 2
    resp = client.get_shelf(shelf.uid)
    assert resp.shelf.uid == shelf.uid
    assert resp.shelf.name == shelf.name
    assert resp.store_uid == store.store.summary.uid
    assert resp.department_uid == dep.uid
    assert resp.shelf.product_count == shelf.product_count == len(resp.shelf.products)
    names = [p.name for p in resp.shelf.products]
    assert names == sorted(names), names
    for p in resp.shelf.products:
        assert p.shelf_uid == shelf.uid
        assert p.image_url.startswith(IMAGE_BASE + "/")
        assert p.price.minor_units > 0 and p.price.currency == "RUB"


def test_get_shelf_errors(client):
    with pytest.raises(GroserError) as e:
        client.get_shelf("")
    assert e.value.code == StatusCode.INVALID_ARGUMENT
    with pytest.raises(GroserError) as e:
        client.get_shelf("no-such-shelf-uid")
    assert e.value.code == StatusCode.NOT_FOUND


# -- pipelining --------------------------------------------------------------

def mixed_requests(client: Client, count: int) -> list[service_pb2.Request]:
    store = spb_store(client)
    shelf_uids = [sh.uid for d in store.store.departments for sh in d.shelves]
    rng = random.Random(7)
    ids = rng.sample(range(1, 1 << 40), count)  # distinct, not in order
    kinds = [
        lambda: Client.request("server_info"),
        lambda: Client.request("list_cities"),
        lambda: Client.request("get_store", city_code=rng.choice(["MSK", "SPB", "msk"])),
        lambda: Client.request("get_store", city_code="SPB", include_products=True),
        lambda: Client.request("get_shelf", shelf_uid=rng.choice(shelf_uids)),
        lambda: Client.request("get_store", city_code="XXX"),  # NOT_FOUND
        lambda: Client.request("get_shelf", shelf_uid=""),  # INVALID_ARGUMENT
    ]
    reqs = []
    for i, rid in enumerate(ids):
        r = kinds[i % len(kinds)]()
        r.id = rid
        reqs.append(r)
    return reqs


def expected_code(req: service_pb2.Request) -> int:
    if req.WhichOneof("method") == "get_store" and req.get_store.city_code == "XXX":
        return StatusCode.NOT_FOUND
    if req.WhichOneof("method") == "get_shelf" and not req.get_shelf.shelf_uid:
        return StatusCode.INVALID_ARGUMENT
    return StatusCode.OK


def test_pipelined_batch(client):
    reqs = mixed_requests(client, 20)
    resps = client.batch(reqs)
    assert len(resps) == 20
    for req, resp in zip(reqs, resps):
        assert resp.id == req.id
        code = raw_error(resp)
        assert code == expected_code(req), (req, resp.status)
        if code == StatusCode.OK:
            Client.check(req, resp)  # body case matches the method


def test_pipelined_raw_in_order(daemon):
    """All 20 frames in one write; v1 answers a connection in request order."""
    with daemon.client() as c:
        reqs = mixed_requests(c, 20)
        c.send_raw(b"".join(encode_frame(r.SerializeToString()) for r in reqs))
        got = [c.read_response() for _ in reqs]
    assert [r.id for r in got] == [r.id for r in reqs]
    for req, resp in zip(reqs, got):
        assert raw_error(resp) == expected_code(req)


def test_split_frames(daemon):
    """A frame arriving in pieces is read whole."""
    with daemon.client() as c:
        frame = encode_frame(Client.request("get_store", request_id=41, city_code="SPB").SerializeToString())
        frame += encode_frame(Client.request("server_info", request_id=42).SerializeToString())
        pieces = [frame[:2], frame[2:5], frame[5:9], frame[9:]]
        for p in pieces:
            c.send_raw(p)
            time.sleep(0.05)
        a, b = c.read_response(), c.read_response()
    assert (a.id, a.WhichOneof("body")) == (41, "get_store")
    assert (b.id, b.WhichOneof("body")) == (42, "server_info")


def test_deadline_generous(client):
    assert client.server_info(deadline_ms=10_000).protocol_version == 1
    assert client.get_store(city_code="MSK", deadline_ms=10_000).city.code == "MSK"


# -- malformed input ---------------------------------------------------------

def test_garbage_frame(daemon):
    with daemon.client() as c:
        c.send_raw(encode_frame(b"\xff" * 16))
        resp = c.read_response()
        assert resp.id == 0
        assert resp.status.code == StatusCode.INVALID_ARGUMENT == 3
        assert resp.status.message
        assert resp.WhichOneof("body") is None
        # The connection stays usable.
        assert c.server_info().protocol_version == 1


def test_truncated_field_frame(daemon):
    with daemon.client() as c:
        c.send_raw(encode_frame(b"\x08\x05\x62\x10"))  # get_store claims 16 bytes, has 0
        resp = c.read_response()
        assert (resp.id, resp.status.code) == (0, StatusCode.INVALID_ARGUMENT)
        assert c.list_cities().cities


def test_unknown_method(daemon):
    """A Request whose method field this server doesn't know (field 99) is UNIMPLEMENTED."""
    with daemon.client() as c:
        payload = service_pb2.Request(id=77).SerializeToString() + b"\x9a\x06\x02\x08\x01"
        c.send_raw(encode_frame(payload))
        resp = c.read_response()
        assert resp.id == 77
        assert raw_error(resp) == StatusCode.UNIMPLEMENTED == 12
        # And a Request with no method at all.
        c.send_raw(encode_frame(service_pb2.Request(id=78).SerializeToString()))
        resp = c.read_response()
        assert (resp.id, raw_error(resp)) == (78, StatusCode.UNIMPLEMENTED)
        assert c.server_info().protocol_version == 1


def test_empty_frame_is_refused_for_its_id_0(daemon):
    """A zero-length frame decodes as an empty Request: id 0, which clients may not use."""
    with daemon.client() as c:
        c.send_raw(encode_frame(b""))
        resp = c.read_response()
        assert (resp.id, raw_error(resp)) == (0, StatusCode.INVALID_ARGUMENT)
        assert c.server_info().protocol_version == 1


def test_oversize_frame_closes(daemon):
    with daemon.client() as c:
        c.send_raw((4 * 1024 * 1024 + 1).to_bytes(4, "big") + b"\x08\x01")
        resp = c.read_response()
        assert resp.id == 0
        assert raw_error(resp) == StatusCode.RESOURCE_EXHAUSTED == 8
        with pytest.raises(ProtocolError):
            c.read_response()  # the server closed the connection


def test_max_frame_option():
    d = Daemon("--max-frame-bytes", "64")
    try:
        with d.client() as c:
            assert c.server_info().protocol_version == 1  # a small frame passes
            big = Client.request("get_shelf", shelf_uid="x" * 100)
            with pytest.raises(GroserError) as e:
                c.call(big)
            assert e.value.code == StatusCode.RESOURCE_EXHAUSTED and e.value.request_id == 0
    finally:
        d.kill()


# -- shutdown ----------------------------------------------------------------

def test_sigterm_graceful():
    d = Daemon()
    try:
        idle = d.client()  # an open, idle connection must not hold up the exit
        assert idle.server_info().protocol_version == 1
        d.proc.send_signal(signal.SIGTERM)
        try:
            rc = d.proc.wait(EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"groserd still running {EXIT_TIMEOUT} s after SIGTERM\nlog:\n{d.log()}")
        assert rc == 0, f"exit code {rc}\nlog:\n{d.log()}"
        assert not os.path.exists(d.socket), "socket file left behind"
        with pytest.raises((ProtocolError, OSError)):
            idle.read_response()
        idle.close()
    finally:
        d.kill()
