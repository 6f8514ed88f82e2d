"""groser-client's JSON against Google's json_format, through a real groserd.

`groser-client --json` and `groser-client call` must print Protobuf's
canonical JSON mapping: for the same request, the parsed output must equal
json_format.MessageToDict of the body the Python client gets (and, with
--emit-defaults, MessageToDict with always_print_fields_with_no_presence).
Where an answer cannot be the same twice (uptime, counters, a new session),
the output must still be canonical: json_format.Parse of it into the
message type and MessageToDict back give the same dict. Refusals under
--json are MessageToDict of the Response's Status.

groser-client is found beside groserd (GROSERD, as tools/python-client-test
sets it). Run through tools/python-client-test."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from google.protobuf import json_format, message_factory

from groserd_harness import Daemon, exchange, open_session, request, service_pb2

CLIENT = os.path.join(os.path.dirname(os.environ.get("GROSERD", "")), "groser-client")


@pytest.fixture(scope="module")
def daemon():
    d = Daemon()
    try:
        yield d
    finally:
        d.cleanup()


def cli(d: Daemon, *args: str, code: int = 0) -> str:
    """groser-client's stdout; its own settings directory under the daemon's."""
    env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(d.tmp, "config"))
    r = subprocess.run([CLIENT, "--socket", d.socket, *args], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == code, f"{args}: exit {r.returncode}: {r.stderr}"
    return r.stdout


def snake(method: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", method).lower()


def body_type(method: str, envelope=service_pb2.Response):
    """The message class of the method's case of Response.body (or Request.method)."""
    return message_factory.GetMessageClass(envelope.DESCRIPTOR.fields_by_name[snake(method)].message_type)


def python_answer(d: Daemon, method: str, data: dict) -> service_pb2.Response:
    """The Response to `data` (the same JSON groser-client is given) as the
    Python client sends it: json_format.ParseDict into the request message."""
    req = service_pb2.Request()
    getattr(req, snake(method)).CopyFrom(json_format.ParseDict(data, body_type(method, service_pb2.Request)()))
    with d.client() as c:
        req.id = c.next_id()
        return exchange(c, req)


def python_body(d: Daemon, method: str, data: dict):
    resp = python_answer(d, method, data)
    assert resp.WhichOneof("body") == snake(method), resp.status
    return getattr(resp, snake(method))


def assert_canonical(text: str, message_type) -> dict:
    """The output parses strictly as message_type and is exactly what
    MessageToDict writes for that message."""
    printed = json.loads(text)
    parsed = json_format.Parse(text, message_type())
    assert json_format.MessageToDict(parsed) == printed
    return printed


# -- --json of the commands ------------------------------------------------------------------------

@pytest.mark.parametrize("args, method, data", [
    (["cities"], "ListCities", {}),
    (["get-store", "--city", "SPB"], "GetStore", {"cityCode": "SPB"}),
    (["get-store", "--store", "store-msk-1", "--products"], "GetStore", {"storeUid": "store-msk-1", "includeProducts": True}),
    (["search", "молоко 3,2", "--city", "SPB", "--limit", "5"], "SearchProducts",
     {"cityCode": "SPB", "query": "молоко 3,2", "pageSize": 5}),
])
def test_json_equals_message_to_dict(daemon, args, method, data):
    expected = python_body(daemon, method, data)
    out = cli(daemon, "--json", *args)
    assert assert_canonical(out, body_type(method)) == json_format.MessageToDict(expected)
    everything = json.loads(cli(daemon, "--json", "--emit-defaults", *args))
    assert everything == json_format.MessageToDict(expected, always_print_fields_with_no_presence=True)


def test_shelf_and_set_city(daemon):
    store = python_body(daemon, "GetStore", {"cityCode": "MSK"})
    shelf = store.store.departments[0].shelves[0].uid
    expected = python_body(daemon, "GetShelf", {"shelfUid": shelf})
    assert assert_canonical(cli(daemon, "--json", "shelf", shelf), body_type("GetShelf")) == json_format.MessageToDict(expected)
    # set-city prints the City message as ListCities gives it.
    cities = python_body(daemon, "ListCities", {})
    kzn = next(c for c in cities.cities if c.code == "KZN")
    from groser.v1 import catalog_pb2
    assert assert_canonical(cli(daemon, "--json", "set-city", "kzn"), catalog_pb2.City) == json_format.MessageToDict(kzn)


def test_info_and_stats_are_canonical(daemon):
    info = assert_canonical(cli(daemon, "--json", "info"), body_type("ServerInfo"))
    expected = json_format.MessageToDict(python_body(daemon, "ServerInfo", {}))
    assert {k: v for k, v in info.items() if k != "uptimeMs"} == {k: v for k, v in expected.items() if k != "uptimeMs"}
    assert_canonical(cli(daemon, "--json", "stats"), body_type("Stats"))


def test_cart_json_is_the_cart_the_session_has(daemon):
    store = python_body(daemon, "GetStore", {"cityCode": "SPB", "includeProducts": True})
    product = next(p for d in store.store.departments for s in d.shelves for p in s.products if not p.out_of_stock)
    added = assert_canonical(cli(daemon, "--json", "cart", "add", product.uid, "--qty", "2", "--city", "SPB"),
                             body_type("AddItem"))
    conf = open(os.path.join(daemon.tmp, "config", "groser", "client.conf")).read()
    session = re.search(r"^session\.\S+=([0-9a-f]{64})$", conf, re.M)
    assert session, conf
    cart = python_body(daemon, "GetCart", {"session": session.group(1), "storeUid": store.store.summary.uid})
    assert added == json_format.MessageToDict(cart)
    assert added["cart"]["lines"][0]["quantity"] == 2
    assert "priceChanged" not in added["cart"]["lines"][0], "defaults are left out"


def test_errors_under_json_are_the_status_message(daemon):
    resp = python_answer(daemon, "GetStore", {"cityCode": "NOPE"})
    out = cli(daemon, "--json", "get-store", "--city", "NOPE", code=64 + resp.status.code)
    assert json.loads(out) == json_format.MessageToDict(resp.status)
    assert json.loads(out)["code"] == "NOT_FOUND"


# -- call, for every method whose call changes nothing anyone else sees ----------------------------

# (method, request JSON, keys whose values differ from call to call)
HARMLESS = [
    ("ServerInfo", {}, {"uptimeMs"}),
    ("ListCities", {}, set()),
    ("GetStore", {"city_code": "spb", "knownStoreVersion": "0"}, set()),
    ("GetShelf", {"shelfUid": "SHELF"}, set()),
    ("ListProducts", {"storeUid": "store-spb-1", "pageSize": 7}, set()),
    ("SearchProducts", {"storeUid": "store-spb-2", "query": "сыр", "inStockOnly": True, "groupByShelf": True}, set()),
    ("ExportCatalog", {"storeUid": "store-spb-1", "pageSize": 5}, set()),
    ("GetCart", {"session": "SESSION", "storeUid": "store-spb-1"}, set()),
    ("ListOrders", {"session": "SESSION"}, set()),
    ("WhoAmI", {"session": "SESSION"}, set()),
    ("OpenSession", {}, {"session"}),
    ("Stats", {}, None),  # every counter moves: canonical only
]


@pytest.mark.parametrize("method, data, volatile", HARMLESS, ids=[h[0] for h in HARMLESS])
def test_call_equals_message_to_dict(daemon, method, data, volatile):
    with daemon.client() as c:
        session = open_session(c)
    shelf = python_body(daemon, "GetStore", {"cityCode": "SPB"}).store.departments[0].shelves[1].uid
    data = json.loads(json.dumps(data).replace("SESSION", session).replace("SHELF", shelf))
    printed = assert_canonical(cli(daemon, "call", method, "-d", json.dumps(data)), body_type(method))
    if volatile is None:
        return
    expected = json_format.MessageToDict(python_body(daemon, method, data))
    drop = lambda d: {k: v for k, v in d.items() if k not in volatile}  # noqa: E731
    assert drop(printed) == drop(expected)
    assert set(printed) == set(expected)


def test_call_watch_prints_the_first_frame_as_the_python_client_gets_it(daemon):
    out = cli(daemon, "call", "Watch", "-d", '{"storeUid": "store-spb-3"}', "--count", "1")
    lines = out.splitlines()
    assert len(lines) == 1
    printed = assert_canonical(lines[0], body_type("Watch"))
    with daemon.client() as c:
        w = c.watch(store_uid="store-spb-3")
        first = w.first  # read by watch() itself
    assert printed == json_format.MessageToDict(first)
    assert printed["initial"] is True


def test_call_refusals_are_the_status_message(daemon):
    data = {"shelfUid": "shf-nope"}
    resp = python_answer(daemon, "GetShelf", data)
    out = cli(daemon, "call", "GetShelf", "-d", json.dumps(data), code=64 + resp.status.code)
    assert json.loads(out) == json_format.MessageToDict(resp.status)


def fill(message, depth: int = 0):
    """Sets every field of message (the first member of each oneof), nested
    messages two levels deep, repeated fields twice, with values that need
    the mapping's care: 64-bit integers past 2^53, text with quotes, Cyrillic
    and control characters."""
    from google.protobuf.descriptor import FieldDescriptor as F
    samples = {F.TYPE_STRING: "Молоко \"3,2%\"\t\x1b", F.TYPE_BOOL: True, F.TYPE_INT64: -(2 ** 62), F.TYPE_UINT64: 2 ** 63 + 1,
               F.TYPE_INT32: -7, F.TYPE_UINT32: 4294967295, F.TYPE_BYTES: b"\x00\xff", F.TYPE_DOUBLE: 1.5, F.TYPE_FLOAT: 0.5}
    for field in message.DESCRIPTOR.fields:
        oneof = field.containing_oneof
        if oneof is not None and oneof.fields[0] is not field:
            continue
        repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == F.LABEL_REPEATED
        if field.type == F.TYPE_MESSAGE:
            if depth >= 2:
                continue
            for _ in range(2 if repeated else 1):
                fill(getattr(message, field.name).add() if repeated else getattr(message, field.name), depth + 1)
        elif field.type == F.TYPE_ENUM:
            value = field.enum_type.values[-1].number
            getattr(message, field.name).extend([value, value]) if repeated else setattr(message, field.name, value)
        else:
            value = samples[field.type]
            getattr(message, field.name).extend([value, value]) if repeated else setattr(message, field.name, value)
    return message


def test_call_reads_what_json_format_writes_for_every_request(daemon):
    """Every request message, every field set, as json_format.MessageToJson
    writes it, then a key that names no field: call must get through every
    real field (names and value forms agree with json_format's) to refuse
    the last one, with exit 2 and nothing sent."""
    for field in service_pb2.Request.DESCRIPTOR.oneofs_by_name["method"].fields:
        method = "".join(part.capitalize() for part in field.name.split("_"))  # who_am_i: WhoAmI
        text = json_format.MessageToJson(fill(message_factory.GetMessageClass(field.message_type)()))
        bad = json.dumps({**json.loads(text), "notAField": 1})
        r = subprocess.run([CLIENT, "--socket", daemon.socket, "call", method, "-d", bad],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and 'unknown field "notAField"' in r.stderr, (method, text, r.stderr)
