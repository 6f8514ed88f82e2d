"""Tests of what docs/PROTOCOL.md promises, against a real groserd.

Written from docs/PROTOCOL.md and Protos/ only; each test names the section
whose statement it checks. A test that fails here means the daemon and the
document disagree: one of them is to be fixed, not the test weakened.
Run through tools/python-client-test.
"""
from __future__ import annotations

import os
import signal
import socket
import sqlite3
import threading
import time
from typing import Optional

import pytest

from groserd_harness import (
    Client, ConnectionClosed, Daemon, StatusCode, add_item, call_ok, cart_pb2, checkout,
    clear_cart, code_of, encode_frame, exchange, get_cart, get_store, list_orders, ok,
    open_session, refused, remove_item, request, service_pb2, set_product, set_quantity,
    status_of, valid_card,
)

IA = StatusCode.INVALID_ARGUMENT
NF = StatusCode.NOT_FOUND
FP = StatusCode.FAILED_PRECONDITION
INT64_MAX = 2**63 - 1


@pytest.fixture(scope="module")
def daemon():
    d = Daemon("--threads", "2")
    try:
        yield d
    finally:
        d.cleanup()


@pytest.fixture
def c(daemon):
    cl = daemon.client()
    try:
        yield cl
    finally:
        cl.close()


class Catalog:
    """The sample catalog's SPB and MSK default stores, and a pool of in-stock
    SPB products handed out so that no two tests change the same product."""

    def __init__(self, c: Client):
        spb = call_ok(c, get_store(city_code="SPB", include_products=True))
        msk = call_ok(c, get_store(city_code="MSK", include_products=True))
        self.spb = spb.store.summary.uid
        self.msk = msk.store.summary.uid
        self.msk_product = msk.store.departments[0].shelves[0].products[0].uid
        self.shelf_of = {}
        products = []
        for d in spb.store.departments:
            for sh in d.shelves:
                for p in sh.products:
                    self.shelf_of[p.uid] = sh.uid
                    if not p.out_of_stock:
                        products.append(p.uid)
        self._pool = iter(products)

    def product(self) -> str:
        return next(self._pool)

    def products(self, n: int) -> list[str]:
        return [self.product() for _ in range(n)]


@pytest.fixture(scope="module")
def cat(daemon):
    with daemon.client() as cl:
        return Catalog(cl)


def cart_of(c: Client, session: str, store: str) -> cart_pb2.Cart:
    return call_ok(c, get_cart(session, store)).cart


def product_in_shelf(c: Client, shelf_uid: str, uid: str):
    req, sub = request("get_shelf")
    sub.shelf_uid = shelf_uid
    for p in call_ok(c, req).shelf.products:
        if p.uid == uid:
            return p
    raise AssertionError(f"{uid} not on shelf {shelf_uid}")


def catalog_version(c: Client) -> int:
    req, _ = request("server_info")
    return call_ok(c, req).catalog_version


def cart_with_line(c: Client, store: str, product: str, quantity: int = 1) -> tuple[str, cart_pb2.Cart]:
    """A new session whose cart at `store` holds one line."""
    s = open_session(c)
    cart = call_ok(c, add_item(s, store, product, quantity)).cart
    return s, cart


# -- §7.5: products that are not in the cart ------------------------------------

def test_7_5_empty_product_uid_is_invalid_argument_on_every_cart_method(c, cat):
    """§7.5: an empty product_uid is INVALID_ARGUMENT on AddItem, SetQuantity
    with any quantity (0 too) and RemoveItem; nothing changes."""
    s, cart = cart_with_line(c, cat.spb, cat.product())
    for req in (remove_item(s, cat.spb, ""), set_quantity(s, cat.spb, "", 0),
                set_quantity(s, cat.spb, "", 3), add_item(s, cat.spb, "", 1)):
        refused(exchange(c, req), IA, req.id)
    assert cart_of(c, s, cat.spb) == cart, "a refused change changed the cart"
    # Also on a cart that does not exist yet.
    s2 = open_session(c)
    for req in (remove_item(s2, cat.spb, ""), set_quantity(s2, cat.spb, "", 0)):
        refused(exchange(c, req), IA, req.id)
    assert cart_of(c, s2, cat.spb).version == 0


def products_not_in_cart(cat: Catalog) -> dict[str, str]:
    return {"unknown": "prd-nope-0000", "another store's": cat.msk_product, "not added": cat.product()}


def test_7_5_remove_item_of_a_product_not_in_the_cart_is_not_found(c, cat):
    """§7.5: RemoveItem of a product not in the cart (unknown, of another
    store, or just not added) is NOT_FOUND, and changes nothing."""
    s, cart = cart_with_line(c, cat.spb, cat.product())
    for what, uid in products_not_in_cart(cat).items():
        req = remove_item(s, cat.spb, uid)
        resp = exchange(c, req)
        assert code_of(resp) == NF, f"RemoveItem of a {what} product: {status_of(resp)}"
        refused(resp, NF, req.id)
    assert cart_of(c, s, cat.spb) == cart


def test_7_5_set_quantity_0_of_a_product_not_in_the_cart_is_ok_and_bumps_the_version(c, cat):
    """§7.5/§7.6: SetQuantity 0 of a product not in the cart is OK whether it
    is unknown, of another store or sold here; the version still grows."""
    s, cart = cart_with_line(c, cat.spb, cat.product())
    version = cart.version
    for what, uid in products_not_in_cart(cat).items():
        req = set_quantity(s, cat.spb, uid, 0)
        resp = exchange(c, req)
        assert code_of(resp) == StatusCode.OK, f"SetQuantity 0 of a {what} product: {status_of(resp)}"
        after = ok(req, resp).cart
        assert after.version == version + 1, f"{what}: version {after.version}, want {version + 1}"
        assert list(after.lines) == list(cart.lines)
        version = after.version
    # On a cart that does not exist yet: OK, and the cart now exists at version 1.
    s2 = open_session(c)
    assert call_ok(c, set_quantity(s2, cat.spb, "prd-nope-0000", 0)).cart.version == 1
    assert cart_of(c, s2, cat.spb).version == 1


# -- §4: deadlines of catalog requests held behind a change ---------------------

def test_4_catalog_request_behind_cart_changes_runs_its_deadline_while_held(daemon, cat):
    """§4: a GetStore with deadline_ms 1 pipelined behind 200 cart changes is
    held until their answers have gone, and its budget runs meanwhile: it is
    answered, with its id, OK or DEADLINE_EXCEEDED (no body); over a few tries
    at least one is DEADLINE_EXCEEDED. One with a generous deadline is OK."""
    product = cat.product()
    outcomes = []
    with daemon.client() as c:
        s = open_session(c)
        for attempt in range(5):
            reqs = [set_quantity(s, cat.spb, product, 1 + (i % 50), rid=c.next_id()) for i in range(200)]
            late = get_store(rid=c.next_id(), deadline_ms=1, city_code="SPB")
            generous = get_store(rid=c.next_id(), deadline_ms=60_000, city_code="SPB")
            resps = c.batch(reqs + [late, generous])
            for req, resp in zip(reqs, resps):
                ok(req, resp)
            code = code_of(resps[-2])
            assert resps[-2].id == late.id
            assert code in (StatusCode.OK, StatusCode.DEADLINE_EXCEEDED), status_of(resps[-2])
            if code == StatusCode.OK:
                ok(late, resps[-2])
            else:
                refused(resps[-2], StatusCode.DEADLINE_EXCEEDED, late.id)
            ok(generous, resps[-1])
            outcomes.append(StatusCode.Name(code))
            if code == StatusCode.DEADLINE_EXCEEDED:
                break
    assert "DEADLINE_EXCEEDED" in outcomes, (
        f"a 1 ms budget behind 200 changes never ran out in {len(outcomes)} tries: {outcomes}")


# -- §3: more than 256 requests pipelined without reading -----------------------

def test_3_more_than_256_pipelined_requests_are_all_answered_once(daemon, cat):
    """§3: 1000 requests (changes and catalog reads) written without reading
    any answer: nothing is refused or dropped, each gets exactly one answer
    once the client reads, and every change was applied."""
    product = cat.product()
    with daemon.client(timeout=30) as c:
        s = open_session(c)
        start_version = call_ok(c, set_quantity(s, cat.spb, product, 1)).cart.version
        reqs = []
        for i in range(1000):
            if i % 4 == 3:
                r = get_store(city_code="MSK") if i % 8 == 3 else get_cart(s, cat.spb)
            else:
                r = set_quantity(s, cat.spb, product, 1 + i % 90)
            r.id = 1000 + i
            reqs.append(r)
        data = b"".join(encode_frame(r.SerializeToString()) for r in reqs)
        writer = threading.Thread(target=c.sock.sendall, args=(data,))
        writer.start()
        time.sleep(1.0)  # read nothing meanwhile
        got = {}
        for _ in reqs:
            resp = c.read_response()
            assert resp.id not in got, f"a second answer to request {resp.id}"
            got[resp.id] = resp
        writer.join(10)
        assert not writer.is_alive()
        for r in reqs:
            ok(r, got[r.id])
        changes = sum(1 for r in reqs if r.WhichOneof("method") == "set_quantity")
        marker, _ = request("server_info", 99_999)
        c.send_request(marker)
        nxt = c.read_response()
        assert nxt.id == marker.id, f"an extra answer (id {nxt.id}) after all 1000"
        assert cart_of(c, s, cat.spb).version == start_version + changes, "a change was dropped"


# -- §11: connection counting ---------------------------------------------------

def expect_refused_connection(d: Daemon) -> None:
    """A connection over --max-connections gets Response {id 0, UNAVAILABLE}
    and is closed (§11)."""
    c = d.client(timeout=5)
    try:
        resp = c.read_response()
        refused(resp, StatusCode.UNAVAILABLE, 0)
        with pytest.raises(ConnectionClosed):
            c.read_response()
    finally:
        c.close()


def served(d: Daemon) -> Optional[Client]:
    """A new connection if it is served (answers a ServerInfo), else None."""
    c = d.client(timeout=5)
    req, _ = request("server_info", 1)
    try:
        c.send_request(req)
        resp = c.read_response()
    except (ConnectionClosed, OSError):
        c.close()
        return None
    if resp.id == 0:
        refused(resp, StatusCode.UNAVAILABLE, 0)
        c.close()
        return None
    ok(req, resp)
    return c


def served_within(d: Daemon, seconds: float) -> Client:
    end = time.monotonic() + seconds
    while True:
        c = served(d)
        if c is not None:
            return c
        assert time.monotonic() < end, f"no connection served within {seconds} s"
        time.sleep(0.05)


def test_11_max_connections_counts_a_closed_connection_until_groserd_closed_it():
    """§11 with --max-connections 2: the third connection is refused; a
    just-closed idle connection stops counting at once; one that went away
    with answers still owed (here: shut down for writing, never reading)
    counts until groserd has cut it off (--slow-reader-timeout 2)."""
    d = Daemon("--max-connections", "2", "--slow-reader-timeout", "2")
    try:
        a = served_within(d, 2)
        b = served_within(d, 2)
        expect_refused_connection(d)
        a.close()  # idle: groserd reads its end-of-file at once
        owing = served_within(d, 2)
        # `owing` asks for far more than the socket buffers hold, then goes away
        # (no more writes) without reading: groserd still owes it answers.
        reqs = [get_store(rid=i, city_code="SPB", include_products=True) for i in range(1, 61)]
        owing.sock.sendall(b"".join(encode_frame(r.SerializeToString()) for r in reqs))
        owing.sock.shutdown(socket.SHUT_WR)
        b.close()
        e = served_within(d, 2)  # b's slot is free; owing and e count
        expect_refused_connection(d)  # owing still counts, well within its 2 s
        e.close()
        time.sleep(4.0)  # owing is cut off 2 s after its last progress; e's slot is free anyway
        f = served_within(d, 1)
        g = served_within(d, 1)  # owing no longer counts
        f.close()
        g.close()
        owing.close()
    finally:
        d.cleanup()


# -- §7.4 / §7.7: versions from a change's answer --------------------------------

def test_7_4_expected_version_from_a_change_answer_is_accepted(c, cat):
    """§7.4/§7.7: the version in AddItem's answer (no GetCart) is accepted by a
    later change and by Checkout; a stale one is ABORTED."""
    p1, p2 = cat.products(2)
    s = open_session(c)
    v1 = call_ok(c, add_item(s, cat.spb, p1, 1)).cart.version
    v2 = call_ok(c, add_item(s, cat.spb, p2, 2, version=v1)).cart.version
    assert v2 == v1 + 1
    v3 = call_ok(c, set_quantity(s, cat.spb, p2, 1, version=v2)).cart.version
    refused(exchange(c, remove_item(s, cat.spb, p1, version=v2)), StatusCode.ABORTED)
    refused(exchange(c, checkout(s, cat.spb, v2)), StatusCode.ABORTED)
    order = call_ok(c, checkout(s, cat.spb, v3)).order
    assert [ln.product_uid for ln in order.lines] == [p1, p2]
    assert cart_of(c, s, cat.spb).version == v3 + 1


# -- §10: image URLs -------------------------------------------------------------

def products_of(c: Client, city: str = "SPB"):
    st = call_ok(c, get_store(city_code=city, include_products=True))
    return [p for d in st.store.departments for sh in d.shelves for p in sh.products]


def test_10_image_urls_with_a_base_that_has_a_path_and_trailing_slash():
    """§10: base http://cdn.test:8080/groser/ and the sample catalog's
    /img/products/<uid>.jpg give http://cdn.test:8080/groser/img/products/<uid>.jpg,
    in GetStore, GetShelf and SetProduct's answer."""
    d = Daemon("--image-base-url", "http://cdn.test:8080/groser/")
    try:
        with d.client() as c:
            products = products_of(c)
            assert products
            for p in products:
                assert p.image_url == f"http://cdn.test:8080/groser/img/products/{p.uid}.jpg", p.image_url
            p = products[0]
            assert product_in_shelf(c, p.shelf_uid, p.uid).image_url == p.image_url
            assert call_ok(c, set_product(p.uid, price=p.price.minor_units)).product.image_url == p.image_url
    finally:
        d.cleanup()


def test_10_image_urls_from_the_database_absolute_and_relative():
    """§10: a URL in the catalog holding :// passes through byte for byte,
    whatever the base; a relative one without a leading / gets the same
    prefix as with one; the base's trailing /s are all dropped. The URLs are
    put in the data directory's groser.sqlite3 (table products, column
    image_url, as `.schema` shows) while groserd is stopped."""
    d = Daemon("--image-base-url", "http://cdn.test:8080/groser/")
    try:
        with d.client() as c:
            p_abs, p_rel, p_slash = [p.uid for p in products_of(c)[:3]]
        assert d.stop() == 0
        absolute = "https://Images.Example.org:8443/a%20b/x.JPG?w=200&h=1#top"
        db = sqlite3.connect(d.db)
        with db:
            for uid, url in ((p_abs, absolute), (p_rel, "img/a.jpg"), (p_slash, "/img/a.jpg")):
                assert db.execute("UPDATE products SET image_url = ? WHERE uid = ?", (url, uid)).rowcount == 1
        db.close()
        for base in ("http://cdn.test:8080/groser/", "http://cdn.test:8080/groser///"):
            d.extra_args = ["--image-base-url", base]
            d.start()
            with d.client() as c:
                urls = {p.uid: p.image_url for p in products_of(c)}
                assert urls[p_abs] == absolute
                assert urls[p_rel] == "http://cdn.test:8080/groser/img/a.jpg", base
                assert urls[p_slash] == "http://cdn.test:8080/groser/img/a.jpg", base
                shelf = products_of(c)[0].shelf_uid
                assert product_in_shelf(c, shelf, p_abs).image_url == absolute
                assert call_ok(c, set_product(p_abs, stock=5)).product.image_url == absolute
            assert d.stop() == 0
    finally:
        d.cleanup()


# -- §2: request id 0 ------------------------------------------------------------

def id0_requests(session: str, store: str, product: str) -> list[service_pb2.Request]:
    reqs = []
    for method in ("server_info", "list_cities", "open_session", "list_orders"):
        r, sub = request(method)
        if method == "list_orders":
            sub.session = session
        reqs.append(r)
    reqs += [get_store(city_code="SPB"), get_cart(session, store), add_item(session, store, product, 1),
             set_quantity(session, store, product, 2), remove_item(session, store, product),
             clear_cart(session, store), checkout(session, store, 1), set_product(product, stock=3)]
    r, sub = request("get_shelf")
    sub.shelf_uid = "x"
    reqs.append(r)
    r, sub = request("list_products")
    sub.store_uid = store
    reqs.append(r)
    r, sub = request("import_catalog")
    sub.abort = True
    reqs.append(r)
    r, sub = request("export_catalog")
    sub.store_uid = store
    reqs.append(r)
    r, sub = request("register")
    sub.email, sub.password, sub.name = "id0@example.com", "id0 password", "Id0"
    reqs.append(r)
    r, sub = request("login")
    sub.email, sub.password, sub.session = "id0@example.com", "id0 password", session
    reqs.append(r)
    for method in ("logout", "who_am_i"):
        r, sub = request(method)
        sub.session = session
        reqs.append(r)
    r, sub = request("watch")
    sub.store_uid = store
    reqs.append(r)
    r, sub = request("cancel_watch")
    sub.watch_id = 1
    reqs.append(r)
    r, _ = request("stats")
    reqs.append(r)
    r, sub = request("search_products")
    sub.store_uid, sub.query = store, "молоко"
    reqs.append(r)
    r, sub = request("list_stores")
    sub.city_code = "SPB"
    reqs.append(r)
    r, sub = request("get_products")
    sub.store_uid = store
    sub.product_uids.append(product)
    reqs.append(r)
    every_method = {f.name for f in service_pb2.Request.DESCRIPTOR.oneofs_by_name["method"].fields}
    assert {r.WhichOneof("method") for r in reqs} == every_method
    return reqs


def test_2_request_id_0_is_refused_whatever_its_method(c, cat):
    """§2: a request with id 0 is not executed, whatever its method: it gets
    Response {id 0, INVALID_ARGUMENT} and the connection stays usable."""
    product = cat.product()
    s, cart = cart_with_line(c, cat.spb, product)
    version = catalog_version(c)
    for req in id0_requests(s, cat.spb, product):
        assert req.id == 0
        c.send_raw(encode_frame(req.SerializeToString()))
        resp = c.read_response()
        assert resp.id == 0, req.WhichOneof("method")
        refused(resp, IA, 0)
    assert cart_of(c, s, cat.spb) == cart, "a change with id 0 was executed"
    assert catalog_version(c) == version, "a SetProduct with id 0 was executed"
    assert len(call_ok(c, list_orders(s)).orders) == 0, "a Checkout with id 0 was executed"
    req, sub = request("register")
    sub.email, sub.password, sub.name = "id0@example.com", "id0 password", "Id0"
    assert call_ok(c, req).account.email == "id0@example.com", "a Register with id 0 was executed"


def test_2_request_id_0_behind_an_awaited_change_and_the_empty_frame(c, cat):
    """§2/§3: a cart change with id 0 pipelined behind an awaited change is
    refused (id 0, INVALID_ARGUMENT) and not executed; its answer follows the
    change's, as v1 keeps a connection's order. The empty frame is an empty
    Request (id 0) and refused the same way; the connection stays usable."""
    p1 = cat.product()
    s = open_session(c)
    first = add_item(s, cat.spb, p1, 1, rid=5)
    zero = add_item(s, cat.spb, p1, 7)
    zero_get = get_cart(s, cat.spb)
    after = get_cart(s, cat.spb, rid=6)
    c.send_raw(b"".join(encode_frame(r.SerializeToString()) for r in (first, zero, zero_get, after))
               + encode_frame(b""))
    got = [c.read_response() for _ in range(5)]
    assert [r.id for r in got] == [5, 0, 0, 6, 0]
    ok(first, got[0])
    for r in (got[1], got[2], got[4]):
        refused(r, IA, 0)
    cart = ok(after, got[3]).cart
    assert cart.version == 1 and [(ln.product_uid, ln.quantity) for ln in cart.lines] == [(p1, 1)]
    req, _ = request("server_info")
    assert call_ok(c, req).protocol_version == 1


# -- §10: stock --------------------------------------------------------------------

def has_unknown_fields(resp: service_pb2.Response) -> bool:
    stripped = service_pb2.Response()
    stripped.CopyFrom(resp)
    stripped.DiscardUnknownFields()
    return stripped.SerializeToString() != resp.SerializeToString()


def test_10_stock_is_not_shown_and_out_of_stock_follows_set_product(c, cat):
    """§10/§8: no catalog read carries a stock number (no field beyond the
    protos' Product, which has none); SetProduct's answer shows it; stock 0
    makes the catalog show out_of_stock and AddItem refuse, restocking undoes it."""
    uid = cat.product()
    shelf = cat.shelf_of[uid]
    v0 = catalog_version(c)
    ans = call_ok(c, set_product(uid, stock=7))
    assert (ans.stock, ans.product.out_of_stock, ans.catalog_version) == (7, False, v0 + 1)

    def reads():
        req, sub = request("get_shelf")
        sub.shelf_uid = shelf
        reqs = [req, get_store(city_code="SPB", include_products=True), request("list_cities")[0],
                request("server_info")[0]]
        resps = c.batch(reqs)
        for r, resp in zip(reqs, resps):
            ok(r, resp)
            assert not has_unknown_fields(resp), f"{r.WhichOneof('method')} carries fields beyond the protos"
        shown = [p for p in resps[0].get_shelf.shelf.products if p.uid == uid]
        shown += [p for d in resps[1].get_store.store.departments for sh in d.shelves
                  for p in sh.products if p.uid == uid]
        assert len(shown) == 2
        return {p.out_of_stock for p in shown}

    assert reads() == {False}
    ans = call_ok(c, set_product(uid, stock=0))
    assert (ans.stock, ans.product.out_of_stock, ans.catalog_version) == (0, True, v0 + 2)
    assert reads() == {True}
    s = open_session(c)
    refused(exchange(c, add_item(s, cat.spb, uid, 1)), FP)
    ans = call_ok(c, set_product(uid, stock=4))
    assert (ans.stock, ans.product.out_of_stock) == (4, False)
    assert reads() == {False}
    call_ok(c, add_item(s, cat.spb, uid, 1))


# -- §10: totals past int64 --------------------------------------------------------

def test_10_totals_past_int64_refuse_the_cart_until_the_line_goes(c, cat):
    """§10: a price near 2^62 on a product with 3 in the cart: GetCart (and a
    change leaving the cart that large) is FAILED_PRECONDITION and changes
    nothing; RemoveItem of that line works, and ClearCart (another session)."""
    big, other = cat.products(2)
    old_prices = {uid: call_ok(c, set_product(uid, stock=100)).product.price.minor_units for uid in (big, other)}
    s, _ = cart_with_line(c, cat.spb, big, 3)
    s2, _ = cart_with_line(c, cat.spb, big, 3)
    try:
        call_ok(c, set_product(big, price=2**62))
        refused(exchange(c, get_cart(s, cat.spb)), FP)
        refused(exchange(c, add_item(s, cat.spb, other, 1)), FP)
        refused(exchange(c, checkout(s, cat.spb, 1)), FP)
        cart = call_ok(c, remove_item(s, cat.spb, big)).cart
        assert list(cart.lines) == [] and cart.version == 2, "the refused AddItem changed the cart"
        assert cart.subtotal.minor_units == 0
        assert len(call_ok(c, clear_cart(s2, cat.spb)).cart.lines) == 0
        assert cart_of(c, s2, cat.spb).item_count == 0
        # The subtotal overflowing, each line computable: the change making it so is refused.
        call_ok(c, set_product(other, price=2**62))
        s3, cart3 = cart_with_line(c, cat.spb, big, 1)
        assert cart3.lines[0].line_total.minor_units == 2**62
        refused(exchange(c, add_item(s3, cat.spb, other, 1)), FP)
        assert cart_of(c, s3, cat.spb).version == 1
    finally:
        for uid, price in old_prices.items():
            call_ok(c, set_product(uid, price=price))


# -- §10: catalog_version ----------------------------------------------------------

def test_10_catalog_version_survives_a_restart():
    """§10: catalog_version is kept in the database: after SIGTERM and a start
    on the same --data it is what it was."""
    d = Daemon()
    try:
        with d.client() as c:
            uid = products_of(c)[0].uid
            v = call_ok(c, set_product(uid, stock=9)).catalog_version
            v = call_ok(c, set_product(uid, stock=8)).catalog_version
            assert catalog_version(c) == v
        assert d.stop(signal.SIGTERM) == 0
        d.start()
        with d.client() as c:
            assert catalog_version(c) == v
            assert call_ok(c, request("list_cities")[0]).catalog_version == v
            assert call_ok(c, get_store(city_code="SPB")).catalog_version == v
    finally:
        d.cleanup()


def test_10_catalog_version_moves_only_when_a_checkout_sells_a_product_out(c, cat):
    """§10/§7.7: a checkout that leaves stock leaves catalog_version as it
    was; one that sells the last unit raises it by 1, and the product shows
    out_of_stock."""
    uid = cat.product()
    v = call_ok(c, set_product(uid, stock=5)).catalog_version
    s, cart = cart_with_line(c, cat.spb, uid, 2)
    call_ok(c, checkout(s, cat.spb, cart.version))
    assert catalog_version(c) == v
    assert not product_in_shelf(c, cat.shelf_of[uid], uid).out_of_stock
    s, cart = cart_with_line(c, cat.spb, uid, 3)
    call_ok(c, checkout(s, cat.spb, cart.version))
    assert catalog_version(c) == v + 1
    assert product_in_shelf(c, cat.shelf_of[uid], uid).out_of_stock


# -- §7.7: Checkout details --------------------------------------------------------

def test_7_7_checkout_with_no_card_is_refused_at_the_card_step(c, cat):
    """§7.7: a Checkout with no card at all is read as a card with every field
    empty and refused at step 4: INVALID_ARGUMENT, `The card number has 0
    digits; a card has 12 to 19.`; nothing changes."""
    s, cart = cart_with_line(c, cat.spb, cat.product())
    req = checkout(s, cat.spb, cart.version, card=None)
    assert not req.checkout.HasField("card")
    message = refused(exchange(c, req), IA, req.id)
    assert message == "The card number has 0 digits; a card has 12 to 19."
    assert cart_of(c, s, cat.spb) == cart


def test_7_7_holder_name_and_address_are_trimmed_of_white_space(c, cat):
    """§7.7: delivery_address and holder_name lose leading and trailing
    Unicode White_Space (spaces, tabs, line breaks, no-break spaces); white
    space inside is kept: '  Anna  Ivanova ' is kept as 'Anna  Ivanova'."""
    s, cart = cart_with_line(c, cat.spb, cat.product())
    card = valid_card(holder_name="  Anna  Ivanova ")
    address = "\u00a0\t Невский  проспект,\t1\r\n\u3000\u2028 "
    order = call_ok(c, checkout(s, cat.spb, cart.version, address=address, card=card)).order
    assert order.holder_name == "Anna  Ivanova"
    assert order.delivery_address == "Невский  проспект,\t1"
    listed = call_ok(c, list_orders(s)).orders
    assert [(o.number, o.holder_name, o.delivery_address) for o in listed] == [
        (order.number, "Anna  Ivanova", "Невский  проспект,\t1")]


def test_7_7_idempotent_retry_compares_trimmed_details(c, cat):
    """§7.7: a retry with the same key whose address and holder differ only
    in leading/trailing white space, and whose card differs only in digits
    other than the last 4 and in the CVC, is the same request: the same order,
    returned before the card is checked again. Inner white space is not
    normalised: another inner spacing is another request (FAILED_PRECONDITION)."""
    s, cart = cart_with_line(c, cat.spb, cat.product())
    first = checkout(s, cat.spb, cart.version, address="  Nevsky 1, flat 2 ",
                     card=valid_card(holder_name=" Anna Ivanova\t"), key="co-1")
    order = call_ok(c, first).order
    retry = checkout(s, cat.spb, cart.version, address="Nevsky 1, flat 2\n\u00a0",
                     card=valid_card(holder_name="Anna Ivanova", number="4000-1234-5678-1111", cvc="9876"),
                     key="co-1")
    assert call_ok(c, retry).order == order
    other = checkout(s, cat.spb, cart.version, address="Nevsky  1, flat 2",
                     card=valid_card(holder_name="Anna Ivanova"), key="co-1")
    refused(exchange(c, other), FP)
    assert len(call_ok(c, list_orders(s)).orders) == 1


# -- §7.1 and §11: sessions and string maxima --------------------------------------

def test_7_1_session_token_in_upper_case_or_too_long(c, cat):
    """§7.1: the same token in upper case is another, unknown token
    (UNAUTHENTICATED); a session over 64 bytes is INVALID_ARGUMENT naming it."""
    s, cart = cart_with_line(c, cat.spb, cat.product())
    assert s == s.lower() and len(s) == 64  # OpenSession's token: time, random bytes, MAC
    for bad, code in ((s.upper(), StatusCode.UNAUTHENTICATED), (s + "x", IA)):
        for req in (get_cart(bad, cat.spb), add_item(bad, cat.spb, cat.product(), 1), list_orders(bad),
                    checkout(bad, cat.spb, cart.version)):
            message = refused(exchange(c, req), code, req.id)
            if code == IA:
                assert "session" in message and "65" in message and "64" in message, message
    assert cart_of(c, s, cat.spb) == cart


def over_long_refused(resp: service_pb2.Response, name: str, size: int, maximum: int) -> None:
    message = refused(resp, IA)
    assert name in message.split() or f" {name} " in f" {message} ", f"{name}: {message!r}"
    assert str(size) in message and str(maximum) in message, message


def not_a_length_refusal(resp: service_pb2.Response) -> None:
    code, message = status_of(resp)
    assert not (code == IA and "bytes long" in message), f"refused at its maximum: {message}"


def test_11_string_fields_are_accepted_at_their_maximum_and_refused_one_byte_over(c, cat):
    """§11 "String fields": each maximum (UTF-8 bytes) is accepted exactly at
    the limit and refused one byte over with INVALID_ARGUMENT naming the
    field; nothing is stored."""
    s, cart = cart_with_line(c, cat.spb, cat.product())
    product = cat.product()

    # session (64): at the limit it is merely unknown.
    refused(exchange(c, get_cart("a" * 64, cat.spb)), StatusCode.UNAUTHENTICATED)
    over_long_refused(exchange(c, get_cart("a" * 65, cat.spb)), "session", 65, 64)
    # store_uid (128): at the limit merely unknown.
    refused(exchange(c, get_cart(s, "s" * 128)), NF)
    over_long_refused(exchange(c, get_cart(s, "s" * 129)), "store_uid", 129, 128)
    refused(exchange(c, add_item(s, "s" * 128, product, 1)), NF)
    over_long_refused(exchange(c, add_item(s, "s" * 129, product, 1)), "store_uid", 129, 128)
    # product_uid (128): SetQuantity 0 of an unknown product is OK (§7.5).
    v = call_ok(c, set_quantity(s, cat.spb, "p" * 128, 0)).cart.version
    over_long_refused(exchange(c, set_quantity(s, cat.spb, "p" * 129, 0)), "product_uid", 129, 128)
    refused(exchange(c, set_product("p" * 128, stock=1)), NF)
    over_long_refused(exchange(c, set_product("p" * 129, stock=1)), "product_uid", 129, 128)
    # idempotency_key (128), in UTF-8 bytes: 64 two-byte letters are 128 bytes.
    v = call_ok(c, add_item(s, cat.spb, product, 1, key="ключ" * 16)).cart.version
    over_long_refused(exchange(c, add_item(s, cat.spb, product, 1, key="ключ" * 16 + "k")),
                      "idempotency_key", 129, 128)
    assert cart_of(c, s, cat.spb).version == v, "a refused change was stored"

    def fresh_cart():
        sess, crt = cart_with_line(c, cat.spb, cat.product())
        return sess, crt.version

    def co(sess, version, **kw):
        card = valid_card(**{k: kw.pop(k) for k in ("holder_name", "number", "cvc") if k in kw})
        return exchange(c, checkout(sess, cat.spb, version, card=card, **kw))

    sess, ver = fresh_cart()
    over_long_refused(co(sess, ver, key="k" * 129), "idempotency_key", 129, 128)
    assert code_of(co(sess, ver, key="k" * 128)) == StatusCode.OK
    # delivery_address (1024)
    sess, ver = fresh_cart()
    over_long_refused(co(sess, ver, address="Я" * 512 + "x"), "delivery_address", 1025, 1024)
    assert code_of(co(sess, ver, address="Я" * 512)) == StatusCode.OK
    # card.holder_name (256)
    sess, ver = fresh_cart()
    over_long_refused(co(sess, ver, holder_name="Я" * 128 + "x"), "card.holder_name", 257, 256)
    assert code_of(co(sess, ver, holder_name="Я" * 128)) == StatusCode.OK
    # card.number (32): spaces are removed before the digits are counted.
    sess, ver = fresh_cart()
    number = "4111 1111 1111 1111"
    over_long_refused(co(sess, ver, number=number + " " * 14), "card.number", 33, 32)
    assert code_of(co(sess, ver, number=number + " " * 13)) == StatusCode.OK
    # card.cvc (8): 8 bytes pass the length check and fail the CVC rule instead.
    sess, ver = fresh_cart()
    over_long_refused(co(sess, ver, cvc="123456789"), "card.cvc", 9, 8)
    resp = co(sess, ver, cvc="12345678")
    not_a_length_refusal(resp)
    refused(resp, IA)
    assert cart_of(c, sess, cat.spb).version == ver


def test_11_string_lengths_are_checked_before_anything_else(c, cat):
    """§11: an over-long string is refused naming the field "before anything
    else of the request is checked": also with an unknown session, and in a
    Checkout whose address is empty and whose card is bad."""
    over_long_refused(exchange(c, get_cart("f" * 32, "s" * 129)), "store_uid", 129, 128)
    over_long_refused(exchange(c, add_item("f" * 32, cat.spb, "p" * 129, 0)), "product_uid", 129, 128)
    s, cart = cart_with_line(c, cat.spb, cat.product())
    req = checkout(s, cat.spb, 0, address="", card=cart_pb2.Card(number="x", cvc="1" * 9))
    over_long_refused(exchange(c, req), "card.cvc", 9, 8)


# -- §11: truncated frames -------------------------------------------------------

def test_11_a_request_frame_cut_off_by_the_clients_end_of_file_is_unanswered(daemon, cat):
    """§11: the whole frames before the client's end-of-file are answered; a
    request frame it leaves unfinished is discarded: not answered, not executed."""
    p1, p2 = cat.products(2)
    with daemon.client() as c:
        s = open_session(c)
    whole = [get_store(rid=1, city_code="SPB"), add_item(s, cat.spb, p1, 1, rid=2)]
    cut = encode_frame(add_item(s, cat.spb, p2, 1, rid=3).SerializeToString())
    with daemon.client() as c:
        c.send_raw(b"".join(encode_frame(r.SerializeToString()) for r in whole) + cut[:len(cut) // 2])
        c.sock.shutdown(socket.SHUT_WR)
        for r in whole:
            ok(r, c.read_response())
        with pytest.raises(ConnectionClosed) as e:
            c.read_response()
        assert e.value.truncated == 0, "the server sent part of a frame"
    with daemon.client() as c:
        assert [ln.product_uid for ln in cart_of(c, s, cat.spb).lines] == [p1]


def pipeline_big_reads(c: Client, n: int) -> list[service_pb2.Request]:
    reqs = [get_store(rid=i, city_code="SPB", include_products=True) for i in range(1, n + 1)]
    c.send_raw(b"".join(encode_frame(r.SerializeToString()) for r in reqs))
    return reqs


def read_until_end(c: Client, reqs) -> tuple[int, ConnectionClosed]:
    """Read answers (each whole, in order, OK) until the stream ends."""
    n = 0
    while True:
        try:
            resp = c.read_response()
        except ConnectionClosed as e:
            return n, e
        ok(reqs[n], resp)
        n += 1


def test_11_client_parser_treats_a_truncated_last_frame_as_the_end():
    """§11: a frame cut short by end-of-file (or ECONNRESET) is the end of the
    stream, never an answer: groser_client raises ConnectionClosed after the
    whole frames, reporting the bytes it dropped."""
    frame = encode_frame(service_pb2.Response(id=1).SerializeToString())
    partial = encode_frame(service_pb2.Response(id=2, status={"code": 5, "message": "x" * 40})
                           .SerializeToString())[:20]
    for reset in (False, True):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        c = Client("unused")
        c.sock = ours
        ours.settimeout(5)
        if reset:
            ours.sendall(b"unread by the peer")  # closing with it unread resets the stream
        theirs.sendall(frame + partial)
        theirs.close()
        assert c.read_response().id == 1
        with pytest.raises(ConnectionClosed) as e:
            c.read_response()
        assert e.value.truncated == len(partial)
        c.close()


def test_11_a_slow_reader_is_cut_off_and_reads_whole_frames_then_the_end():
    """§11 with --slow-reader-timeout 1: a client that pipelines 100 GetStore
    with products and never reads is cut off; reading afterwards yields whole
    frames (answers in order), then the end of the stream, before all 100."""
    d = Daemon("--slow-reader-timeout", "1")
    try:
        c = d.client()
        reqs = pipeline_big_reads(c, 100)
        time.sleep(3.5)
        n, end = read_until_end(c, reqs)
        c.close()
        assert n < len(reqs), "not cut off: every answer arrived"
        with d.client() as other:
            assert call_ok(other, request("server_info")[0]).protocol_version == 1
    finally:
        d.cleanup()


# -- §13: shutdown ----------------------------------------------------------------

def test_13_sigterm_with_a_client_not_reading():
    """§13: on SIGTERM with one client not reading (and one reading), groserd
    exits with 0 within 5 s and removes its socket; the idle reader then reads
    whole frames and the end of the stream (possibly after a truncated last
    frame); the reading client gets whole frames, then end-of-file."""
    d = Daemon()
    try:
        idle = d.client()
        idle_reqs = pipeline_big_reads(idle, 100)
        reader = d.client()
        reader_reqs = pipeline_big_reads(reader, 20)
        ok(reader_reqs[0], reader.read_response())
        result = {}

        def keep_reading():
            result["read"] = read_until_end(reader, reader_reqs[1:])

        t = threading.Thread(target=keep_reading)
        t.start()
        time.sleep(0.2)
        start = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        rc = d.proc.wait(10)
        elapsed = time.monotonic() - start
        t.join(10)
        assert rc == 0
        assert elapsed < 5.0, f"exited {elapsed:.1f} s after SIGTERM"
        assert not os.path.exists(d.socket)
        n, end = read_until_end(idle, idle_reqs)
        assert n < len(idle_reqs), "every answer reached a client that was not reading"
        _, reader_end = result["read"]
        assert reader_end.truncated == 0, "the reading client got a truncated frame"
        idle.close()
        reader.close()
    finally:
        d.cleanup()


def test_7b_watch_streams_changes_with_continues_until_cancel():
    """§7B: a Watch is answered by frames with its id and `continues` set:
    first the store's version (initial), then one per change naming the
    products with their new price and stock flag, each following the one
    before (previous_version); CancelWatch ends the stream with a CANCELLED
    frame (continues unset), then answers. Done with the Python client."""
    from groser_client import Client as PyClient, GroserError
    d = Daemon("--threads", "2")
    try:
        c = PyClient(d.socket, timeout=10).connect()
        store = c.get_store(city_code="SPB", include_products=True)
        products = [p for dep in store.store.departments for sh in dep.shelves for p in sh.products]
        w = c.watch(city_code="SPB")
        assert w.first.initial and w.first.store_uid == store.store.summary.uid
        assert w.first.store_version == store.store_version
        admin = PyClient(d.socket, timeout=10).connect()
        target = products[0]
        call_ok(admin, set_product(target.uid, price=target.price.minor_units + 700, stock=0))
        event = next(w)
        assert not event.initial and event.previous_version == w.first.store_version
        assert event.store_version > event.previous_version
        assert [(p.uid, p.price.minor_units, p.out_of_stock) for p in event.products] == \
            [(target.uid, target.price.minor_units + 700, True)]
        # Other calls on the watching connection still work meanwhile.
        assert c.server_info().protocol_version == 1
        # Resume from the first version on a new connection: the change is caught up.
        c2 = PyClient(d.socket, timeout=10).connect()
        w2 = c2.watch(store_uid=store.store.summary.uid, since_version=w.first.store_version)
        assert not w2.first.reload and [p.uid for p in w2.first.products] == [target.uid]
        assert w.cancel() == []
        assert w.ended
        with pytest.raises(GroserError) as e:
            c.call(c.request("cancel_watch", watch_id=w.id))
        assert e.value.code == StatusCode.NOT_FOUND
    finally:
        d.cleanup()
