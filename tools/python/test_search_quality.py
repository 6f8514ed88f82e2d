"""SearchProducts against a real groserd on its sample catalog: the relevance
set Tests/Search/relevance.json must put the expected products in the top 3
for at least 95 % of its queries (tools/search-quality prints the same
figures per kind), and a few behaviours of the method through the Python
client: errors, paging, the stock filter, the keyboard-layout switch.
Run through tools/python-client-test."""
from __future__ import annotations

import pytest

from groserd_harness import Daemon, StatusCode
from groser_client import GroserError
import search_quality as sq

TOP3_TARGET = 95.0
STORE = "store-spb-1"


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


@pytest.fixture(scope="module")
def entries():
    return sq.load_set(sq.DEFAULT_SET)


def refused(c, code: int, **kw) -> str:
    """Call SearchProducts expecting an error with this code; its message."""
    with pytest.raises(GroserError) as info:
        c.search_products(**kw)
    e = info.value
    assert e.code == code, f"expected {StatusCode.Name(code)}, got {e.code_name}: {e.message!r}"
    assert e.message.strip(), "an error must carry a message"
    return e.message


# -- the relevance set -----------------------------------------------------------

def test_relevance_set_is_well_formed(entries):
    assert len(entries) >= 70
    assert sq.check_entries(entries) == []
    kinds = {e["kind"] for e in entries}
    assert kinds == set(sq.KINDS), f"kinds without a query: {set(sq.KINDS) - kinds}"
    assert len({e["store_uid"] for e in entries}) >= 5, "spread the queries over several stores"


def test_relevance_set_names_products_of_its_stores(c, entries):
    products = sq.daemon_products(c, (e["store_uid"] for e in entries))
    assert sq.check_against_catalog(entries, products) == []
    assert sq.out_of_stock_expectations(entries, products) == []


def test_relevance_top3_share(c, entries):
    report = sq.evaluate(c, entries, sq.daemon_products(c, (e["store_uid"] for e in entries)))
    text = sq.format_report(report, TOP3_TARGET, "Tests/Search/relevance.json")
    print(text)
    assert report["top3_share"] >= TOP3_TARGET, "\n" + text


# -- behaviour -------------------------------------------------------------------

def test_unknown_store_or_city_is_not_found(c):
    refused(c, StatusCode.NOT_FOUND, query="молоко", store_uid="store-nope-9")
    refused(c, StatusCode.NOT_FOUND, query="молоко", city_code="NOPE")


def test_no_selector_is_invalid_argument(c):
    refused(c, StatusCode.INVALID_ARGUMENT, query="молоко")


@pytest.mark.parametrize("query", ["", "   "], ids=["empty", "spaces"])
def test_empty_query_is_invalid_argument(c, query):
    message = refused(c, StatusCode.INVALID_ARGUMENT, query=query, store_uid=STORE)
    assert "query" in message.lower(), f"the message should say what is wrong: {message!r}"
    assert message.isprintable() and len(message) < 300


def test_overlong_query_is_invalid_argument(c):
    message = refused(c, StatusCode.INVALID_ARGUMENT, query="молоко " * 142 + "кефир!", store_uid=STORE)
    assert "query" in message.lower(), f"the message should say what is wrong: {message!r}"
    assert message.isprintable() and len(message) < 300


def test_query_limit_counts_characters_not_bytes(c):
    # 200 Cyrillic letters are 400 bytes of UTF-8: still a valid query.
    c.search_products("м" * 200, store_uid=STORE)
    refused(c, StatusCode.INVALID_ARGUMENT, query="м" * 201, store_uid=STORE)


def test_paging_has_no_duplicates_and_matches_one_big_page(c):
    pages, token = [], ""
    for _ in range(100):
        resp = c.search_products("молоко", store_uid=STORE, page_size=3, page_token=token)
        assert 0 < len(resp.hits) <= 3
        pages.append([h.product.uid for h in resp.hits])
        token = resp.next_page_token
        if not token:
            break
    else:
        pytest.fail("still a next_page_token after 100 pages")
    paged = [u for p in pages for u in p]
    assert len(pages) > 1, "молоко should match more than one page of 3"
    assert len(paged) == len(set(paged)), f"a product on two pages: {pages}"
    big = c.search_products("молоко", store_uid=STORE, page_size=100)
    assert big.next_page_token == ""
    assert paged == [h.product.uid for h in big.hits]
    assert big.total_estimate == len(paged)


def test_in_stock_only_leaves_out_products_out_of_stock(c):
    every = c.search_products("кефир", store_uid=STORE, page_size=100)
    assert any(h.product.out_of_stock for h in every.hits), "the sample catalog has kefir out of stock here"
    in_stock = c.search_products("кефир", store_uid=STORE, page_size=100, in_stock_only=True)
    assert in_stock.hits and not any(h.product.out_of_stock for h in in_stock.hits)
    assert [h.product.uid for h in in_stock.hits] == [h.product.uid for h in every.hits
                                                      if not h.product.out_of_stock]


def test_latin_layout_query_is_switched(c):
    resp = c.search_products("vjkjrj", city_code="SPB", page_size=5)
    assert resp.layout_switched
    assert resp.query_used == "молоко"
    assert resp.store_uid == STORE  # SPB's default store
    assert resp.hits and resp.hits[0].product.name.startswith("Молоко")
