#!/usr/bin/env python3
"""Search quality of groserd's SearchProducts against a relevance set.

Runs every query of Tests/Search/relevance.json (a JSON array of
{"query", "store_uid", "expect_top3": [product uids], "kind", "why"}) with
page_size 10 and reports, per kind and overall:

  top-3  the share of queries whose expected products are all among the
         first 3 hits (the target is 95 % or more);
  MRR    the mean reciprocal rank: for each query 1/rank of the first
         expected product to appear in the first 10 hits (the best ranked
         of them), 0 when none is there;

and lists the misses: the query, what was expected and what came first.

    tools/python/search_quality.py                  starts $GROSERD (a fresh
                                                    sample catalog) and stops it
    tools/python/search_quality.py --socket PATH    asks a running groserd instead
    tools/python/search_quality.py --json           one JSON object on stdout
    tools/python/search_quality.py --min-top3 95    exit 1 when the top-3 share is lower
    tools/python/search_quality.py --check-catalog /tmp/sample-catalog.jsonl
                                                    only checks the set against a
                                                    catalog file (JSON lines): no daemon

Before the queries, every expected uid is checked against the store's
products as GetStore gives them: a set naming a product that is not in its
store cannot be measured (exit 1). Exit status: 0 when it ran (whatever the
figures, unless --min-top3 was given and not reached), 1 when it could not run.
tools/search-quality builds groserd and runs this.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Iterable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from groser_client import Client, GroserError, ProtocolError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SET = REPO / "Tests" / "Search" / "relevance.json"
KINDS = ("stem", "prefix", "typo1", "typo2", "layout", "yo", "unit", "brand", "shelf", "exact", "multiword")
PAGE_SIZE = 10
TOP = 3
READY_TIMEOUT = 15.0


class CannotRun(Exception):
    """The measurement could not be made: no daemon, a bad relevance set."""


# -- the relevance set -----------------------------------------------------------

def load_set(path: Path) -> list[dict]:
    """The entries of a relevance set; CannotRun when the file is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CannotRun(f"cannot read the relevance set {path}: {exc}") from exc
    if isinstance(data, dict):
        data = data.get("queries")
    if not isinstance(data, list):
        raise CannotRun(f"{path}: expected a JSON array of queries")
    problems = check_entries(data)
    if problems:
        raise CannotRun(f"{path}: " + "; ".join(problems[:10])
                        + (f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""))
    return data


def check_entries(entries: list) -> list[str]:
    """What is wrong with the entries' shape (empty when nothing)."""
    problems = []
    seen = set()
    for i, e in enumerate(entries):
        where = f"entry {i + 1}"
        if not isinstance(e, dict):
            problems.append(f"{where} is not an object")
            continue
        where = f"entry {i + 1} ({e.get('query')!r})"
        for key, typ in (("query", str), ("store_uid", str), ("expect_top3", list), ("kind", str), ("why", str)):
            if not isinstance(e.get(key), typ):
                problems.append(f"{where}: {key} missing or not a {typ.__name__}")
        if problems and problems[-1].startswith(where):
            continue
        if not e["query"].strip():
            problems.append(f"{where}: empty query")
        if e["kind"] not in KINDS:
            problems.append(f"{where}: kind {e['kind']!r} is not one of {', '.join(KINDS)}")
        exp = e["expect_top3"]
        if not 1 <= len(exp) <= TOP or not all(isinstance(u, str) and u for u in exp):
            problems.append(f"{where}: expect_top3 must list 1 to {TOP} product uids")
        elif len(set(exp)) != len(exp):
            problems.append(f"{where}: expect_top3 repeats a uid")
        key = (e["store_uid"], e["query"])
        if key in seen:
            problems.append(f"{where}: the same query twice for {e['store_uid']}")
        seen.add(key)
    return problems


def check_against_catalog(entries: list[dict], products: dict[str, dict[str, dict]]) -> list[str]:
    """Expectations that name products not in their store. `products` maps a
    store uid to {product uid: {"name", "out_of_stock"}}."""
    problems = []
    for e in entries:
        store = products.get(e["store_uid"])
        if store is None:
            problems.append(f"{e['query']!r}: no store {e['store_uid']}")
            continue
        for uid in e["expect_top3"]:
            if uid not in store:
                problems.append(f"{e['query']!r}: {uid} is not a product of {e['store_uid']}")
    return problems


def out_of_stock_expectations(entries: list[dict], products: dict[str, dict[str, dict]]) -> list[str]:
    """Expected products that are out of stock (a warning: they rank after
    equally good products in stock)."""
    return [f"{e['query']!r} @ {e['store_uid']}: {uid} ({products[e['store_uid']][uid]['name']}) is out of stock"
            for e in entries for uid in e["expect_top3"]
            if products.get(e["store_uid"], {}).get(uid, {}).get("out_of_stock")]


def catalog_file_products(path: Path) -> dict[str, dict[str, dict]]:
    """Store uid -> {product uid: {"name", "out_of_stock"}} from a catalog file
    (docs/CATALOG.md: JSON lines of city, store, department, shelf, product)."""
    dep_store, shelf_store = {}, {}
    out: dict[str, dict[str, dict]] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CannotRun(f"cannot read the catalog {path}: {exc}") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError as exc:
            raise CannotRun(f"{path}:{n}: not JSON: {exc}") from exc
        t = r.get("type")
        if t == "store":
            out.setdefault(r["uid"], {})
        elif t == "department":
            dep_store[r["uid"]] = r["store_uid"]
        elif t == "shelf":
            shelf_store[r["uid"]] = dep_store[r["department_uid"]]
        elif t == "product":
            out.setdefault(shelf_store[r["shelf_uid"]], {})[r["uid"]] = {
                "name": r["name"], "out_of_stock": int(r.get("stock", 0)) <= 0}
    return out


def daemon_products(c: Client, store_uids: Iterable[str]) -> dict[str, dict[str, dict]]:
    """The same map from a running groserd (GetStore with include_products)."""
    out: dict[str, dict[str, dict]] = {}
    for uid in sorted(set(store_uids)):
        try:
            store = c.get_store(store_uid=uid, include_products=True).store
        except GroserError as e:
            if e.code == 5:  # NOT_FOUND: reported by check_against_catalog
                continue
            raise
        out[uid] = {p.uid: {"name": p.name, "out_of_stock": p.out_of_stock}
                    for d in store.departments for s in d.shelves for p in s.products}
    return out


# -- measuring -------------------------------------------------------------------

def run_query(c: Client, e: dict, page_size: int = PAGE_SIZE) -> dict:
    """One query's outcome: the hits' uids and names, ranks of the expected
    products (1-based, None past the page), reciprocal rank, top-3 hit."""
    t0 = time.perf_counter()
    try:
        resp = c.search_products(e["query"], store_uid=e["store_uid"], page_size=page_size)
    except GroserError as err:
        return {"error": f"{err.code_name} ({err.code}): {err.message}", "hits": [], "names": [],
                "ranks": {u: None for u in e["expect_top3"]}, "rr": 0.0, "top3": False,
                "ms": (time.perf_counter() - t0) * 1000}
    ms = (time.perf_counter() - t0) * 1000
    hits = [h.product.uid for h in resp.hits]
    names = [h.product.name for h in resp.hits]
    ranks = {u: (hits.index(u) + 1 if u in hits else None) for u in e["expect_top3"]}
    found = [r for r in ranks.values() if r is not None]
    return {
        "hits": hits, "names": names, "ranks": ranks,
        "rr": 1.0 / min(found) if found else 0.0,
        "top3": all(r is not None and r <= TOP for r in ranks.values()),
        "query_used": resp.query_used, "layout_switched": resp.layout_switched,
        "total": resp.total_estimate, "ms": ms,
    }


def evaluate(c: Client, entries: list[dict], products: Optional[dict] = None,
             page_size: int = PAGE_SIZE) -> dict:
    """Runs every entry; returns the report (the --json object)."""
    results = [(e, run_query(c, e, page_size)) for e in entries]
    names = {}
    for store in (products or {}).values():
        for uid, p in store.items():
            names[uid] = p["name"]

    def figures(rs):
        n = len(rs)
        hits = sum(r["top3"] for _, r in rs)
        return {"queries": n, "top3_hits": hits, "top3_share": (100.0 * hits / n) if n else 0.0,
                "mrr": (sum(r["rr"] for _, r in rs) / n) if n else 0.0}

    by_kind = OrderedDict()
    for kind in list(KINDS) + sorted({e["kind"] for e in entries} - set(KINDS)):
        rs = [(e, r) for e, r in results if e["kind"] == kind]
        if rs:
            by_kind[kind] = figures(rs)
    misses = []
    for e, r in results:
        if r["top3"]:
            continue
        miss = {
            "query": e["query"], "store_uid": e["store_uid"], "kind": e["kind"], "why": e["why"],
            "expected": [{"uid": u, "name": names.get(u, ""), "rank": r["ranks"][u]} for u in e["expect_top3"]],
            "got": [{"uid": u, "name": n} for u, n in zip(r["hits"][:TOP], r["names"][:TOP])],
            "rr": r["rr"],
        }
        for k in ("error", "query_used", "layout_switched", "total"):
            if k in r:
                miss[k] = r[k]
        misses.append(miss)
    lat = sorted(r["ms"] for _, r in results)
    report = {"set_size": len(entries), "page_size": page_size, **figures(results),
              "by_kind": by_kind, "misses": misses,
              "latency_ms": {"median": lat[len(lat) // 2] if lat else 0.0, "max": lat[-1] if lat else 0.0}}
    return report


def format_report(report: dict, target: float = 95.0, source: str = "", server: str = "") -> str:
    lines = []
    head = f"search quality: {report['set_size']} queries"
    if source:
        head += f" from {source}"
    if server:
        head += f", {server}"
    lines.append(head + f" (page_size {report['page_size']})")
    lines.append("")
    lines.append(f"{'kind':<10} {'queries':>7}  {'top-3':>12}  {'MRR':>5}")
    for kind, f in report["by_kind"].items():
        lines.append(f"{kind:<10} {f['queries']:>7}  {f['top3_hits']:>4} {f['top3_share']:>6.1f} %  {f['mrr']:.3f}")
    lines.append(f"{'overall':<10} {report['queries']:>7}  {report['top3_hits']:>4} "
                 f"{report['top3_share']:>6.1f} %  {report['mrr']:.3f}")
    ok = "reached" if report["top3_share"] >= target else "NOT reached"
    lines.append(f"target top-3 >= {target:g} %: {ok}; latency median "
                 f"{report['latency_ms']['median']:.1f} ms, max {report['latency_ms']['max']:.1f} ms")
    lines.append("")
    if not report["misses"]:
        lines.append("misses: none")
        return "\n".join(lines)
    lines.append(f"misses ({len(report['misses'])}):")
    for m in report["misses"]:
        lines.append(f"  [{m['kind']}] {m['query']!r} @ {m['store_uid']}   ({m['why']})")
        if m.get("error"):
            lines.append(f"    error:    {m['error']}")
        if m.get("layout_switched") or (m.get("query_used") and m["query_used"] != m["query"]):
            lines.append(f"    searched: {m.get('query_used')!r}"
                         + (" (keyboard layout switched)" if m.get("layout_switched") else ""))
        exp = ", ".join(f"{x['uid']} {x['name']} ({'rank ' + str(x['rank']) if x['rank'] else 'not in top 10'})"
                        for x in m["expected"])
        lines.append(f"    expected: {exp}")
        if m["got"]:
            for i, g in enumerate(m["got"], 1):
                lines.append(f"    got {i}:    {g['uid']} {g['name']}")
        else:
            lines.append(f"    got:      no hits" + (f" (total_estimate {m.get('total')})" if "total" in m else ""))
    return "\n".join(lines)


# -- a groserd to ask ------------------------------------------------------------

class Groserd:
    """A groserd on a temporary socket and data directory (it seeds its
    sample catalog there); stop() ends it and removes the directory."""

    def __init__(self, binary: str, log_level: str = "warning"):
        if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            raise CannotRun(f"groserd binary not found or not executable: {binary} (set GROSERD)")
        self.tmp = tempfile.mkdtemp(prefix="gsq-", dir="/tmp")  # short: sun_path is 108 bytes
        self.socket = os.path.join(self.tmp, "d.sock")
        self.log_path = os.path.join(self.tmp, "groserd.log")
        self._log = open(self.log_path, "wb")
        args = [binary, "--socket", self.socket, "--data", os.path.join(self.tmp, "data"), "--log-level", log_level]
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def log(self) -> str:
        self._log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-3000:]

    def _wait_ready(self) -> None:
        end = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise CannotRun(f"groserd exited with {self.proc.returncode} before accepting:\n{self.log()}")
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
        raise CannotRun(f"groserd did not accept on {self.socket} within {READY_TIMEOUT:g} s:\n{self.log()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def measure(socket_path: str, entries: list[dict], page_size: int = PAGE_SIZE) -> tuple[dict, str, list[str]]:
    """(report, server version, warnings) from the groserd on socket_path."""
    with Client(socket_path, timeout=30.0) as c:
        info = c.server_info()
        server = info.server_version
        if "SearchProducts" not in info.methods:
            raise CannotRun(f"{server} does not list SearchProducts among its methods")
        products = daemon_products(c, (e["store_uid"] for e in entries))
        bad = check_against_catalog(entries, products)
        if bad:
            raise CannotRun("the relevance set does not match the daemon's catalog: " + "; ".join(bad[:10])
                            + (f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""))
        warnings = out_of_stock_expectations(entries, products)
        return evaluate(c, entries, products, page_size), server, warnings


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Measure groserd's SearchProducts against a relevance set.")
    p.add_argument("--set", default=str(DEFAULT_SET), help="the relevance set (default: %(default)s)")
    p.add_argument("--socket", help="ask the groserd on this socket instead of starting one")
    p.add_argument("--groserd", default=os.environ.get("GROSERD"),
                   help="the groserd binary to start (default: $GROSERD)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--min-top3", type=float, metavar="PCT", help="exit 1 when the top-3 share is below PCT")
    p.add_argument("--page-size", type=int, default=PAGE_SIZE, help=argparse.SUPPRESS)
    p.add_argument("--check-catalog", metavar="FILE",
                   help="only check the set against a catalog file (JSON lines); starts no daemon")
    a = p.parse_args(argv)

    try:
        entries = load_set(Path(a.set))
        if a.check_catalog:
            products = catalog_file_products(Path(a.check_catalog))
            bad = check_against_catalog(entries, products)
            warnings = out_of_stock_expectations(entries, products)
            kinds = OrderedDict((k, sum(e["kind"] == k for e in entries)) for k in KINDS)
            stores = sorted({e["store_uid"] for e in entries})
            if a.json:
                print(json.dumps({"set_size": len(entries), "kinds": kinds, "stores": stores,
                                  "problems": bad, "warnings": warnings}, ensure_ascii=False, indent=2))
            else:
                print(f"{a.set}: {len(entries)} queries over {len(stores)} stores; "
                      + ", ".join(f"{k} {n}" for k, n in kinds.items()))
                for w in warnings:
                    print(f"warning: {w}")
                for b in bad:
                    print(f"error: {b}")
                print("ok: every expected product is in its store" if not bad
                      else f"{len(bad)} expectations name products not in their store")
            return 1 if bad else 0

        daemon = None
        if a.socket:
            sock = a.socket
        else:
            if not a.groserd:
                raise CannotRun("no groserd to ask: set GROSERD (or --groserd), or give --socket")
            daemon = Groserd(a.groserd)
            sock = daemon.socket
        try:
            report, server, warnings = measure(sock, entries, a.page_size)
        finally:
            if daemon is not None:
                daemon.stop()
    except CannotRun as exc:
        print(f"search-quality: {exc}", file=sys.stderr)
        return 1
    except (OSError, ProtocolError, GroserError) as exc:
        print(f"search-quality: cannot run: {exc}", file=sys.stderr)
        return 1

    target = a.min_top3 if a.min_top3 is not None else 95.0
    if a.json:
        report["server_version"] = server
        report["set"] = a.set
        report["warnings"] = warnings
        print(json.dumps(report, ensure_ascii=False, indent=2))
    else:
        for w in warnings:
            print(f"warning: expected product out of stock: {w}", file=sys.stderr)
        full = Path(a.set).resolve()
        shown = str(full.relative_to(REPO)) if full.is_relative_to(REPO) else a.set
        print(format_report(report, target, shown, server))
    if a.min_top3 is not None and report["top3_share"] < a.min_top3:
        if not a.json:
            print(f"search-quality: top-3 share {report['top3_share']:.1f} % is below {a.min_top3:g} %",
                  file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
