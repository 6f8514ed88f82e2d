"""Tests of tools/gen-catalog and of the catalog file format (docs/CATALOG.md).

No groserd is needed: the generator runs as a subprocess and its output is
read back by `check_catalog`, an independent reading of CATALOG.md's rules
(written from the document, not from the generator). The checker is tested
too: it must refuse files that break each rule, so a test here can fail.
The worked example of CATALOG.md goes through the same checker.

    python3 -m pytest -p no:cacheprovider -q tools/python/test_gen_catalog.py
"""
from __future__ import annotations

import json
import unicodedata
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GEN = REPO / "tools" / "gen-catalog"
DOC = REPO / "docs" / "CATALOG.md"
# The one factor for time bounds, as in the Swift tests (TestTime.scale):
# GROSER_TIME_SCALE when set (a slow or busy machine), else 1.
TIME_SCALE = max(1.0, float(os.environ.get("GROSER_TIME_SCALE") or "1"))

# --------------------------------------------------------------------------
# The format, as CATALOG.md states it.

# Fields of each record type in canonical (export) order; "?" marks optional.
FIELDS = {
    "catalog": ["type", "format"],
    "city": ["type", "uid", "code", "name", "default_store_uid"],
    "store": ["type", "uid", "city_uid", "name", "chain", "address"],
    "department": ["type", "uid", "store_uid", "name"],
    "shelf": ["type", "uid", "department_uid", "name"],
    "product": ["type", "uid", "shelf_uid", "name", "brand", "unit", "unit_size", "price", "image_url",
                "stock", "often_out_of_stock", "barcode?"],
    "end": ["type", "records"],
}
PARENT = {"store": ("city_uid", "city"), "department": ("store_uid", "store"),
          "shelf": ("department_uid", "department"), "product": ("shelf_uid", "shelf")}
UID = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")
CODE = re.compile(r"[A-Z]{2,8}\Z")
URL_CHARS = re.compile(r"[\x21-\x7e]+\Z")
UINT32 = 2**32 - 1
INT64 = 2**63 - 1
MAX_LINE = 65536


class Bad(Exception):
    """A file the format refuses: line number (1-based) and reason."""

    def __init__(self, line: int, reason: str):
        super().__init__(f"line {line}: {reason}")
        self.line = line


def ean13_ok(code: str) -> bool:
    if not re.fullmatch(r"[0-9]{13}", code):
        return False
    total = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(code[:12]))
    return (10 - total % 10) % 10 == int(code[12])


def canonical(obj: dict, kind: str) -> str:
    """The canonical form of a record: CATALOG.md §8."""
    order = [f.rstrip("?") for f in FIELDS[kind]]
    parts = []
    for key in order:
        if key not in obj:
            continue
        value = obj[key]
        if key == "price":
            value = {"minor_units": value["minor_units"], "currency": value["currency"]}
        parts.append(json.dumps(key) + ":" + json.dumps(value, ensure_ascii=False, separators=(",", ":")))
    return "{" + ",".join(parts) + "}"


def text(line: int, obj: dict, key: str, low: int, high: int):
    v = obj[key]
    if not isinstance(v, str):
        raise Bad(line, f"{key} is not a string")
    n = len(v.encode("utf-8"))
    if not low <= n <= high:
        raise Bad(line, f"{key} is {n} bytes long; {low} to {high} are allowed")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in v):
        raise Bad(line, f"{key} holds a control character")
    hidden = [c for c in v if unicodedata.category(c) == "Cf" or c in "\u2028\u2029"]
    if hidden:  # CATALOG.md §5.2: bidirectional controls, zero-width characters
        raise Bad(line, f"{key} holds U+{ord(hidden[0]):04X}, an invisible formatting character")
    if v != v.strip(" "):
        raise Bad(line, f"{key} begins or ends with a space")


def integer(line: int, obj: dict, key: str, high: int, low: int = 0) -> int:
    v = obj[key]
    if type(v) is not int:  # bool is an int subclass: refused; floats refused
        raise Bad(line, f"{key} is not an integer")
    if not low <= v <= high:
        raise Bad(line, f"{key} {v} is out of range {low}..{high}")
    return v


def parse_line(number: int, raw: bytes) -> dict:
    if not raw.endswith(b"\n"):
        raise Bad(number, "the last line does not end with \\n")
    body = raw[:-1]
    if len(body) > MAX_LINE:
        raise Bad(number, "line longer than 65536 bytes")
    if b"\r" in body:
        raise Bad(number, "carriage return")
    if not body.strip(b" \t"):
        raise Bad(number, "empty line")
    try:
        textline = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Bad(number, f"not UTF-8 ({e})") from None
    if number == 1 and textline.startswith("\ufeff"):
        raise Bad(number, "byte order mark")

    def pairs(items):
        d = {}
        for k, v in items:
            if k in d:
                raise Bad(number, f"field {k} appears twice")
            d[k] = v
        return d

    def no_constant(name):
        raise Bad(number, f"{name} is not a JSON number")

    try:
        obj = json.loads(textline, object_pairs_hook=pairs, parse_constant=no_constant)
    except json.JSONDecodeError as e:
        raise Bad(number, f"not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise Bad(number, "not a JSON object")
    for v in obj.values():
        if v is None:
            raise Bad(number, "null value")
    return obj


def check_fields(number: int, obj: dict) -> str:
    kind = obj.get("type")
    if kind not in FIELDS or kind in ("catalog",):
        raise Bad(number, f"unknown record type {kind!r}")
    allowed = {f.rstrip("?") for f in FIELDS[kind]}
    required = {f for f in FIELDS[kind] if not f.endswith("?")}
    for f in required - obj.keys():
        raise Bad(number, f"{kind} has no {f}")
    for f in obj.keys() - allowed:
        raise Bad(number, f"unknown field {f} in a {kind}")
    return kind


def check_catalog(data: bytes, *, canonical_order: bool = True) -> list:
    """Parses and checks a whole catalog file; returns its records (dicts,
    with "_line"). Raises Bad for the first rule broken. With
    canonical_order, also requires the export order and form of §8."""
    raw_lines = data.splitlines(keepends=True)
    if not raw_lines:
        raise Bad(1, "empty file: no header")
    header = parse_line(1, raw_lines[0])
    if set(header) != {"type", "format"} or header.get("type") != "catalog":
        raise Bad(1, "the first line is not the header {\"type\":\"catalog\",\"format\":1}")
    if type(header["format"]) is not int or header["format"] != 1:
        raise Bad(1, f"unsupported format {header['format']!r}")
    if canonical_order and raw_lines[0] != b'{"type":"catalog","format":1}\n':
        raise Bad(1, "header not in canonical form")

    records = []
    seen = {k: {} for k in PARENT.keys() | {"city"}}  # kind -> uid -> record
    codes = {}
    end = None
    last = {"city": None, "store": None, "department": None, "shelf": None}
    for i, raw in enumerate(raw_lines[1:], start=2):
        if end is not None:
            raise Bad(i, "a line after the end record")
        obj = parse_line(i, raw)
        kind = check_fields(i, obj)
        if kind == "end":
            integer(i, obj, "records", 2**63 - 1)
            if obj["records"] != len(records):
                raise Bad(i, f"the end record counts {obj['records']} records; the file holds {len(records)}")
            end = obj
            if canonical_order and raw.decode() != canonical(obj, kind) + "\n":
                raise Bad(i, "not in canonical form")
            continue
        if not isinstance(obj["uid"], str) or not UID.match(obj["uid"]):
            raise Bad(i, f"bad uid {obj['uid']!r}")
        if obj["uid"] in seen[kind]:
            raise Bad(i, f"{kind} uid {obj['uid']} already on line {seen[kind][obj['uid']]['_line']}")
        text(i, obj, "name", 1, 256)
        if kind == "city":
            if not isinstance(obj["code"], str) or not CODE.match(obj["code"]):
                raise Bad(i, f"bad city code {obj['code']!r}")
            if obj["code"] in codes:
                raise Bad(i, f"city code {obj['code']} already on line {codes[obj['code']]}")
            codes[obj["code"]] = i
            if not isinstance(obj["default_store_uid"], str) or not UID.match(obj["default_store_uid"]):
                raise Bad(i, "bad default_store_uid")
        else:
            ref_key, parent_kind = PARENT[kind]
            ref = obj[ref_key]
            if not isinstance(ref, str) or not UID.match(ref):
                raise Bad(i, f"bad {ref_key}")
            if ref not in seen[parent_kind]:
                # A full file (the generator writes one) must resolve within itself.
                raise Bad(i, f"{ref_key} {ref} names no {parent_kind} on an earlier line")
            if canonical_order and last[parent_kind] is not seen[parent_kind][ref]:
                raise Bad(i, f"{kind} not right under its {parent_kind} (depth-first order)")
        if kind == "store":
            text(i, obj, "chain", 1, 256)
            text(i, obj, "address", 1, 1024)
        if kind == "product":
            text(i, obj, "brand", 0, 256)
            if obj["unit"] not in ("g", "ml", "pcs"):
                raise Bad(i, f"unit {obj['unit']!r} is not g, ml or pcs")
            integer(i, obj, "unit_size", UINT32, 1)
            price = obj["price"]
            if not isinstance(price, dict) or set(price) != {"minor_units", "currency"}:
                raise Bad(i, "price must be {minor_units, currency}")
            integer(i, price, "minor_units", INT64)
            if price["currency"] != "RUB":
                raise Bad(i, "currency must be RUB in format 1")
            url = obj["image_url"]
            if (not isinstance(url, str) or not 1 <= len(url) <= 2048 or not URL_CHARS.match(url)
                    or not (url.startswith("/") or url.startswith("https://") or url.startswith("http://"))):
                raise Bad(i, f"bad image_url {url!r}")
            integer(i, obj, "stock", UINT32)
            if type(obj["often_out_of_stock"]) is not bool:
                raise Bad(i, "often_out_of_stock is not true or false")
            if "barcode" in obj and (not isinstance(obj["barcode"], str) or not ean13_ok(obj["barcode"])):
                raise Bad(i, f"barcode {obj['barcode']!r} is not EAN-13 with a valid check digit")
            if canonical_order:
                prev = records[-1] if records else None
                if prev is not None and prev["type"] == "product" and prev["shelf_uid"] == obj["shelf_uid"]:
                    if (prev["name"].encode(), prev["uid"].encode()) >= (obj["name"].encode(), obj["uid"].encode()):
                        raise Bad(i, "products of a shelf not sorted by name, then uid")
        if kind == "city" and canonical_order:
            prev = last["city"]
            if prev is not None and prev["code"].encode() >= obj["code"].encode():
                raise Bad(i, "cities not sorted by code")
        if canonical_order and raw.decode() != canonical(obj, kind) + "\n":
            raise Bad(i, "not in canonical form")
        obj["_line"] = i
        seen[kind][obj["uid"]] = obj
        if kind in last:
            last[kind] = obj
            for lower in ("store", "department", "shelf")[("city", "store", "department", "shelf").index(kind):]:
                if lower != kind:
                    last[lower] = None
        records.append(obj)
    if end is None:
        raise Bad(len(raw_lines) + 1, "the file ends without its end record (truncated?)")
    for city in seen["city"].values():
        store = seen["store"].get(city["default_store_uid"])
        if store is None:
            raise Bad(city["_line"], f"default_store_uid {city['default_store_uid']} names no store in the file")
        if store["city_uid"] != city["uid"]:
            raise Bad(city["_line"], f"default store {store['uid']} is not a store of {city['uid']}")
    return records


# --------------------------------------------------------------------------
# Running the generator


def gen(*args: str, output: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(GEN), *args]
    if output:
        cmd += ["--output", output]
    return subprocess.run(cmd, capture_output=True, timeout=timeout)


def catalog(cities: int, stores: int, products: int, seed: int) -> bytes:
    r = gen("--cities", str(cities), "--stores-per-city", str(stores),
            "--products-per-store", str(products), "--seed", str(seed))
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


SHAPE = dict(cities=3, stores=2, products=1500)


@pytest.fixture(scope="module")
def sample() -> bytes:
    return catalog(SHAPE["cities"], SHAPE["stores"], SHAPE["products"], seed=42)


@pytest.fixture(scope="module")
def records(sample) -> list:
    return check_catalog(sample)


def of(records, kind):
    return [r for r in records if r["type"] == kind]


# --------------------------------------------------------------------------
# The generator's output


def test_output_is_a_valid_canonical_catalog(sample):
    # Every line parses, the header comes first and the end record last,
    # references resolve, parents precede children, uids are unique, and the
    # file is already in export order and form.
    check_catalog(sample)
    lines = sample.split(b"\n")
    assert lines[0] == b'{"type":"catalog","format":1}'
    assert lines[-1] == b"" and lines[-2].startswith(b'{"type":"end","records":')


def test_counts_match_the_arguments(records):
    cities, stores, products = of(records, "city"), of(records, "store"), of(records, "product")
    assert len(cities) == SHAPE["cities"]
    assert len(stores) == SHAPE["cities"] * SHAPE["stores"]
    assert len(products) == SHAPE["cities"] * SHAPE["stores"] * SHAPE["products"]
    shelf_store = {}
    dep_store = {d["uid"]: d["store_uid"] for d in of(records, "department")}
    for s in of(records, "shelf"):
        shelf_store[s["uid"]] = dep_store[s["department_uid"]]
    per_store = {}
    for p in products:
        per_store[shelf_store[p["shelf_uid"]]] = per_store.get(shelf_store[p["shelf_uid"]], 0) + 1
    assert sorted(per_store.values()) == [SHAPE["products"]] * len(stores)
    for c in cities:
        mine = [s for s in stores if s["city_uid"] == c["uid"]]
        assert len(mine) == SHAPE["stores"]
        assert c["default_store_uid"] == mine[0]["uid"]


def test_first_cities_are_the_known_ones():
    recs = check_catalog(catalog(7, 1, 0, seed=1))
    assert {(c["code"], c["name"]) for c in of(recs, "city")} == {
        ("MSK", "Москва"), ("SPB", "Санкт-Петербург"), ("EKB", "Екатеринбург"), ("NSK", "Новосибирск"),
        ("KZN", "Казань"), ("NNV", "Нижний Новгород"), ("KRR", "Краснодар")}
    stores = {s["uid"]: s for s in of(recs, "store")}
    assert stores["store-msk-1"]["chain"] == "Перекрёсток"
    assert stores["store-msk-1"]["address"].startswith("Москва, ")


def test_many_cities_get_unique_generated_names_and_codes():
    recs = check_catalog(catalog(120, 1, 0, seed=1))  # the checker refuses duplicate codes
    cities = of(recs, "city")
    assert len(cities) == 120
    assert len({c["name"] for c in cities}) == 120
    for c in cities:
        assert re.fullmatch(r"[А-ЯЁ][А-Яа-яЁё -]+[а-яё]( [0-9]+)?", c["name"]), c["name"]
        assert c["uid"] == "city-" + c["code"].lower()


def test_uids_follow_positions(records):
    for s in of(records, "store"):
        assert re.fullmatch(r"store-[a-z]+-[0-9]+", s["uid"]), s["uid"]
        assert s["city_uid"] == "city-" + s["uid"].split("-")[1]
    for d in of(records, "department"):
        assert re.fullmatch(re.escape(d["store_uid"].replace("store-", "dep-")) + r"-[0-9]{2}", d["uid"])
    for h in of(records, "shelf"):
        assert re.fullmatch(re.escape(h["department_uid"].replace("dep-", "shelf-")) + r"-[0-9]{2}", h["uid"])
    # Products are numbered through their store in file order.
    numbers = {}
    for p in of(records, "product"):
        m = re.fullmatch(r"prd-([a-z]+-[0-9]+)-([0-9]{6})", p["uid"])
        assert m, p["uid"]
        assert p["shelf_uid"].startswith("shelf-" + m.group(1) + "-")
        n = int(m.group(2))
        assert n == numbers.get(m.group(1), 0) + 1
        numbers[m.group(1)] = n


def test_prices_are_integer_kopecks_in_rub_and_plausible(records):
    prices = [p["price"]["minor_units"] for p in of(records, "product")]
    assert all(type(v) is int for v in prices)
    assert all(p["price"]["currency"] == "RUB" for p in of(records, "product"))
    assert all(1_000 <= v <= 1_000_000 for v in prices), (min(prices), max(prices))  # 10 to 10 000 RUB
    assert {v % 100 for v in prices} <= {49, 90, 99}  # shelf prices end in .49, .90 or .99
    assert len(set(prices)) > len(prices) // 20


def test_prices_follow_city_and_chain_levels():
    # Azbuka vkusa in Moscow is dearer than Pyatyorochka elsewhere, on average.
    recs = check_catalog(catalog(8, 2, 800, seed=3))
    store_of_shelf = {}
    dep = {d["uid"]: d["store_uid"] for d in of(recs, "department")}
    for h in of(recs, "shelf"):
        store_of_shelf[h["uid"]] = dep[h["department_uid"]]
    total = {}
    for p in of(recs, "product"):
        s = store_of_shelf[p["shelf_uid"]]
        total[s] = total.get(s, 0) + p["price"]["minor_units"]
    assert total["store-msk-2"] > total["store-che-2"]  # Азбука вкуса, Moscow vs Пятёрочка, Chelyabinsk


def test_barcodes_are_valid_ean13_and_unique_within_a_store(records):
    products = of(records, "product")
    with_code = [p for p in products if "barcode" in p]
    assert len(with_code) > 0.9 * len(products)
    assert len(with_code) < len(products)  # some articles carry none (optional field)
    assert all(ean13_ok(p["barcode"]) for p in with_code)
    assert all(p["barcode"].startswith("46") for p in with_code)  # GS1 Russia: 460-469
    by_store = {}
    for p in with_code:
        store = p["uid"].rsplit("-", 1)[0]
        by_store.setdefault(store, []).append(p["barcode"])
    for codes in by_store.values():
        assert len(set(codes)) == len(codes)


def test_same_article_has_the_same_barcode_in_every_store(records):
    by_name = {}
    for p in of(records, "product"):
        if "barcode" in p:
            by_name.setdefault(p["name"], set()).add(p["barcode"])
    shared = [codes for codes in by_name.values()]
    assert all(len(codes) == 1 for codes in shared)
    assert len(by_name) < len(of(records, "product"))  # some names are sold in several stores


def load_generator():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("gen_catalog", str(GEN))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("gen_catalog", loader))
    loader.exec_module(module)
    return module


def test_every_article_has_its_own_name_and_barcode():
    # Across all shelves: one name is one article, so "the same name has the
    # same barcode in every store" holds, and no two articles share a barcode.
    g = load_generator()
    names, codes = set(), set()
    for _, specs in g.SPECS:
        for spec in specs:
            for index in range(spec.count):
                kind, v, z, b = spec.article(index)
                names.add((kind.kind, spec.brands[b], kind.variants[v], g.size_text(kind.unit, kind.sizes[z])))
                code = g.barcode_for(spec.base + index)
                if code is not None:
                    assert ean13_ok(code)
                    codes.add(code)
    assert len(names) == g.ARTICLES
    assert g.ARTICLES > 30_000  # room for a 33 334-product store without many multipacks
    assert len(codes) > 0.95 * g.ARTICLES
    assert codes.isdisjoint({g.barcode_for(g.ARTICLES + i) for i in range(g.ARTICLES)} - {None})


def test_ean13_check_itself():
    assert ean13_ok("4006381333931")  # the classic valid example
    assert not ean13_ok("4006381333932")
    assert not ean13_ok("400638133393")


def test_some_products_out_of_stock_some_often(records):
    products = of(records, "product")
    out = sum(p["stock"] == 0 for p in products)
    often = sum(p["often_out_of_stock"] for p in products)
    assert 0.01 * len(products) < out < 0.15 * len(products)
    assert 0.02 * len(products) < often < 0.15 * len(products)
    # Often-out-of-stock products are out of stock more often than the rest.
    out_often = sum(p["stock"] == 0 for p in products if p["often_out_of_stock"]) / often
    out_rest = sum(p["stock"] == 0 for p in products if not p["often_out_of_stock"]) / (len(products) - often)
    assert out_often > 3 * out_rest
    assert all(type(p["stock"]) is int and 0 <= p["stock"] <= UINT32 for p in products)


def size_label(unit: str, size: int) -> str:
    word = {"g": "г", "ml": "мл", "pcs": "шт"}[unit]
    if unit != "pcs" and size >= 1000 and size % 10 == 0:
        whole, frac = divmod(size, 1000)
        big = "кг" if unit == "g" else "л"
        return f"{whole} {big}" if frac == 0 else f"{whole},{str(frac).rjust(3, '0').rstrip('0')} {big}"
    return f"{size} {word}"


def test_names_carry_brand_and_pack_size(records):
    for p in of(records, "product"):
        assert p["brand"] and (" " + p["brand"] + " ") in p["name"], p
        m = re.fullmatch(r"(.*?) (?:([0-9]+) × )?([0-9]+(?:,[0-9]+)?) (г|кг|мл|л|шт)", p["name"])
        assert m, p["name"]
        pack = int(m.group(2) or 1)
        assert p["unit_size"] % pack == 0
        assert size_label(p["unit"], p["unit_size"] // pack) == f"{m.group(3)} {m.group(4)}", p["name"]
    assert any(p["name"].startswith("Молоко ") and p["unit"] == "ml" for p in of(records, "product"))


def test_names_unique_within_a_shelf(records):
    seen = set()
    for p in of(records, "product"):
        key = (p["shelf_uid"], p["name"])
        assert key not in seen, key
        seen.add(key)


def test_image_urls_relative_or_absolute(records):
    urls = [p["image_url"] for p in of(records, "product")]
    rel = [u for u in urls if u.startswith("/img/products/")]
    absolute = [u for u in urls if u.startswith("https://")]
    assert len(rel) + len(absolute) == len(urls)
    for p in of(records, "product"):
        if p["image_url"].startswith("/"):
            assert p["image_url"] == f"/img/products/{p['uid']}.jpg"


def test_departments_and_shelves_look_like_a_grocery(records):
    deps = {d["name"] for d in of(records, "department")}
    assert {"Молочные продукты", "Овощи и фрукты", "Хлеб и выпечка", "Мясо и птица", "Напитки", "Бакалея",
            "Замороженные продукты", "Бытовая химия"} <= deps
    shelves = {h["name"] for h in of(records, "shelf")}
    assert {"Молоко", "Сыры", "Кефир и кисломолочные", "Пельмени и вареники"} <= shelves
    first = of(records, "department")[0]
    assert first["uid"].endswith("-01") and first["name"] == "Молочные продукты"


# --------------------------------------------------------------------------
# Determinism


def test_same_seed_same_bytes_other_seed_other_bytes(sample, records):
    again = catalog(SHAPE["cities"], SHAPE["stores"], SHAPE["products"], seed=42)
    assert again == sample
    other = catalog(SHAPE["cities"], SHAPE["stores"], SHAPE["products"], seed=43)
    assert other != sample
    # Same cities and stores, different assortment and prices.
    theirs = check_catalog(other)
    assert [r["uid"] for r in of(theirs, "store")] == [r["uid"] for r in of(records, "store")]
    assert len(of(theirs, "product")) == len(of(records, "product"))
    assert {p["name"] for p in of(theirs, "product")} != {p["name"] for p in of(records, "product")}


def store_lines(data: bytes, store: str) -> list:
    key = store.removeprefix("store-")
    pat = re.compile(rb'"uid":"(store|dep|shelf|prd)-' + re.escape(key.encode()) + rb'[-"]')
    return [line for line in data.split(b"\n") if pat.search(line)]


def test_a_store_does_not_depend_on_the_other_cities_and_stores():
    small = catalog(1, 1, 700, seed=9)
    large = catalog(3, 4, 700, seed=9)
    lines = store_lines(small, "store-msk-1")
    assert len(lines) > 700
    assert lines == store_lines(large, "store-msk-1")


# --------------------------------------------------------------------------
# The command itself


def test_ten_thousand_products_quickly():
    started = time.monotonic()
    data = catalog(2, 2, 2500, seed=5)
    elapsed = time.monotonic() - started
    assert len(of(check_catalog(data), "product")) == 10_000
    # Speed is the behaviour here: a bound, scaled by GROSER_TIME_SCALE.
    assert elapsed < 10 * TIME_SCALE, f"10k products took {elapsed:.1f} s (bound {10 * TIME_SCALE:g} s)"


def test_output_file_written_whole_and_summary_on_stderr(tmp_path):
    out = tmp_path / "c.jsonl"
    r = gen("--cities", "2", "--stores-per-city", "1", "--products-per-store", "300", "--seed", "1",
            output=str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout == b""
    assert os.listdir(tmp_path) == ["c.jsonl"]  # no FILE.tmp left behind
    data = out.read_bytes()
    assert data == catalog(2, 1, 300, seed=1)
    summary = r.stderr.decode()
    assert "600 products" in summary
    assert f"{len(data):,} bytes" in summary
    assert re.search(r"in [0-9]+\.[0-9] s", summary)


@pytest.mark.parametrize("args", [
    ["--cities", "0", "--stores-per-city", "1", "--products-per-store", "1", "--seed", "1"],
    ["--cities", "1", "--stores-per-city", "0", "--products-per-store", "1", "--seed", "1"],
    ["--cities", "1", "--stores-per-city", "1", "--products-per-store", "-1", "--seed", "1"],
    ["--cities", "1", "--stores-per-city", "1", "--products-per-store", "1"],
    ["--cities", "x", "--stores-per-city", "1", "--products-per-store", "1", "--seed", "1"],
])
def test_bad_arguments_are_usage_errors(args, tmp_path):
    r = gen(*args, output=str(tmp_path / "never.jsonl"))
    assert r.returncode == 2
    assert r.stdout == b""
    assert not os.listdir(tmp_path)


def test_a_reader_that_leaves_ends_it_quietly():
    # `gen-catalog ... | head`: killed by SIGPIPE like other tools, no traceback.
    proc = subprocess.Popen([sys.executable, str(GEN), "--cities", "3", "--stores-per-city", "3",
                             "--products-per-store", "20000", "--seed", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.read(100).startswith(b'{"type":"catalog","format":1}\n')
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == -13  # SIGPIPE
    assert err == b""


def test_an_unwritable_output_is_an_error(tmp_path):
    r = gen("--cities", "1", "--stores-per-city", "1", "--products-per-store", "1", "--seed", "1",
            output=str(tmp_path / "no-such-dir" / "c.jsonl"))
    assert r.returncode == 1
    assert b"cannot write" in r.stderr and b"Traceback" not in r.stderr


def test_zero_products_per_store_is_still_valid():
    recs = check_catalog(catalog(2, 2, 0, seed=1))
    assert len(of(recs, "store")) == 4 and not of(recs, "product") and not of(recs, "department")


# --------------------------------------------------------------------------
# The checker refuses what CATALOG.md refuses (so the tests above can fail).

GOOD = (
    '{"type":"catalog","format":1}\n'
    '{"type":"city","uid":"city-x","code":"XX","name":"Икс","default_store_uid":"store-x-1"}\n'
    '{"type":"store","uid":"store-x-1","city_uid":"city-x","name":"Магазин","chain":"Сеть","address":"Икс, ул. Ленина, 1"}\n'
    '{"type":"department","uid":"dep-x-1-01","store_uid":"store-x-1","name":"Молочные продукты"}\n'
    '{"type":"shelf","uid":"shelf-x-1-01-01","department_uid":"dep-x-1-01","name":"Молоко"}\n'
    '{"type":"product","uid":"prd-x-1-000001","shelf_uid":"shelf-x-1-01-01","name":"Молоко А 930 мл",'
    '"brand":"А","unit":"ml","unit_size":930,"price":{"minor_units":8990,"currency":"RUB"},'
    '"image_url":"/img/products/prd-x-1-000001.jpg","stock":5,"often_out_of_stock":false,'
    '"barcode":"4006381333931"}\n'
    '{"type":"end","records":5}\n'
)


def test_checker_accepts_the_good_file():
    assert len(check_catalog(GOOD.encode())) == 5


@pytest.mark.parametrize("old,new,line", [
    ('"barcode":"4006381333931"', '"barcode":"4006381333932"', 6),      # check digit
    ('"minor_units":8990', '"minor_units":89.9', 6),                     # a float price
    ('"minor_units":8990', '"minor_units":8990.0', 6),                   # integral, but written as a float
    ('"minor_units":8990', '"minor_units":-1', 6),
    ('"stock":5', '"stock":4294967296', 6),
    ('"often_out_of_stock":false', '"often_out_of_stock":0', 6),
    ('"unit":"ml"', '"unit":"мл"', 6),
    ('"currency":"RUB"', '"currency":"USD"', 6),
    ('"shelf_uid":"shelf-x-1-01-01"', '"shelf_uid":"shelf-nope"', 6),     # unresolved reference
    ('"stock":5', '"stock":5,"stok":5', 6),                              # unknown field (a typo)
    ('"stock":5,', '', 6),                                               # missing field
    ('"stock":5', '"stock":5,"stock":6', 6),                             # duplicate key
    ('"barcode":"4006381333931"', '"barcode":null', 6),
    ('"uid":"prd-x-1-000001"', '"uid":"prd x"', 6),
    ('"name":"Молоко"', '"name":" Молоко"', 5),
    ('"name":"Молоко"', '"name":""', 5),
    ('"code":"XX"', '"code":"xx"', 2),
    ('"image_url":"/img/products/prd-x-1-000001.jpg"', '"image_url":"ftp://x/y.jpg"', 6),
    ('"default_store_uid":"store-x-1"', '"default_store_uid":"store-y"', 2),
    ('"records":5', '"records":4', 7),                                   # a line lost
    ('"format":1', '"format":2', 1),
    ('{"type":"end","records":5}\n', '', 7),                             # truncated: no end record
    ('"uid":"dep-x-1-01"', '"uid":"dep-x-1-01","x":1', 4),
])
def test_checker_refuses(old, new, line):
    assert old in GOOD
    with pytest.raises(Bad) as e:
        check_catalog(GOOD.replace(old, new, 1).encode())
    assert e.value.line == line, str(e.value)


def test_checker_refuses_children_before_parents():
    lines = GOOD.splitlines(keepends=True)
    swapped = lines[:3] + [lines[4], lines[3]] + lines[5:]  # shelf before its department
    with pytest.raises(Bad) as e:
        check_catalog("".join(swapped).encode())
    assert e.value.line == 4


def test_checker_refuses_duplicate_uids_and_crlf():
    lines = GOOD.splitlines(keepends=True)
    dup = lines[:6] + [lines[5]] + ['{"type":"end","records":6}\n']
    with pytest.raises(Bad) as e:
        check_catalog("".join(dup).encode())
    assert e.value.line == 7
    with pytest.raises(Bad):
        check_catalog(GOOD.replace("\n", "\r\n").encode())
    with pytest.raises(Bad):
        check_catalog(GOOD[:-1].encode())  # no final \n


def test_checker_refuses_unsorted_products_in_canonical_mode():
    lines = GOOD.splitlines(keepends=True)
    second = lines[5].replace("prd-x-1-000001", "prd-x-1-000002").replace("Молоко А 930 мл", "Айран А 500 мл")
    data = "".join(lines[:6] + [second, '{"type":"end","records":6}\n']).encode()
    check_catalog(data, canonical_order=False)  # a valid file...
    with pytest.raises(Bad):
        check_catalog(data)  # ...but not in export order (Айран sorts before Молоко)


def test_generated_file_with_one_broken_byte_is_refused(sample):
    # The checker reads the real output closely enough to notice one flip.
    i = sample.index(b'"barcode":"') + len(b'"barcode":"') + 12
    digit = sample[i:i + 1]
    broken = sample[:i] + (b"0" if digit != b"0" else b"1") + sample[i + 1:]
    with pytest.raises(Bad):
        check_catalog(broken)


# --------------------------------------------------------------------------
# CATALOG.md's worked example


def doc_example() -> bytes:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- example: begin -->\n```jsonl?\n(.*?)```\n<!-- example: end -->", text, re.S)
    assert m, "CATALOG.md has no marked worked example"
    return m.group(1).encode("utf-8")


def test_the_documented_example_is_valid_and_canonical():
    recs = check_catalog(doc_example())
    kinds = {r["type"] for r in recs}
    assert kinds == {"city", "store", "department", "shelf", "product"}
    assert any("barcode" not in r for r in of(recs, "product"))
    assert any("barcode" in r for r in of(recs, "product"))


def test_the_documented_field_tables_match_the_canonical_order():
    # Each record type's table in §4 lists its fields in canonical order.
    text = DOC.read_text(encoding="utf-8")
    for kind, fields in FIELDS.items():
        m = re.search(r"<!-- fields: " + kind + r" -->\n(.*?)\n\n", text, re.S)
        assert m, f"no field table for {kind}"
        documented = re.findall(r"^\| `([a-z_]+)`", m.group(1), re.M)
        assert documented == [f.rstrip("?") for f in fields], kind
