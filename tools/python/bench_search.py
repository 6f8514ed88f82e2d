#!/usr/bin/env python3
"""groserd's SearchProducts against SQLite FTS5 and PostgreSQL full-text
search (issue 13), in one run, on the same products and the same queries.

Two parts:

  quality  groserd's built-in sample catalog (a fresh groserd seeds it; it is
           exported with `groser-client admin export` and loaded into FTS5 and
           PostgreSQL as it is); every query of Tests/Search/relevance.json is
           run against its store on each engine, and the top-3 share and MRR
           are computed by tools/python/search_quality.py's own evaluate()
           (all expected products in the first 3; 1/rank of the best one in
           the first 10).
  speed    a tools/gen-catalog catalog (10 cities x 3 stores, 33,334 products
           a store: 1,000,020 products, as tools/bench-scale) imported into a
           groserd and loaded into FTS5 and PostgreSQL with a store column;
           the relevance set's query strings, each engine restricted to one
           store (BENCH_STORE, default store-spb-1) and asked for 10 hits,
           at c=1 and c=16: queries per second, p50 and p99. groserd is
           driven by groser-bench (compiled; checks every answer), FTS5 and
           PostgreSQL by c Python processes (multiprocessing, one connection
           each, a prepared statement), BENCH_WARMUP seconds thrown away,
           then BENCH_SECONDS measured. One engine runs at a time.

It also reports groserd's search index (Stats search_index_bytes) and VmRSS
with the catalog, its start -> first answer, FTS5's and PostgreSQL's load
time and size. Markdown tables on stdout (speed, quality, per kind, memory
and load, issue 13's targets); progress on stderr.

What each engine is asked (printed with the tables too):

  FTS5        fts5(name, brand, shelf, department, store_uid UNINDEXED, uid
              UNINDEXED, tokenize='unicode61 remove_diacritics 2',
              prefix='1 2 3'), rows inserted store by store, and a table
              stores(store_uid, first_rowid, last_rowid); MATCH of every query
              word as a quoted term, the last one a prefix ("word"*), ANDed,
              rowid BETWEEN the store's first and last (looked up by
              store_uid in the same statement), ORDER BY bm25 with column
              weights name 10, brand 4, shelf 2, department 2, LIMIT 10.
  PostgreSQL  a STORED generated tsvector: setweight(to_tsvector('russian',
              name), 'A') || brand 'B' || shelf and department 'C'; a GIN
              index on it and a btree on store_uid; ANALYZE;
              WHERE store_uid = $1 AND tsv @@ to_tsquery('russian', $2)
              ORDER BY ts_rank(tsv, query) DESC, uid LIMIT 10, the tsquery
              being the words joined with &, the last one word:*.

Query words for FTS5 and PostgreSQL are the query's runs of letters and
digits, lower-cased ("молока 3,2" -> молока, 3, 2), as both engines'
tokenizers split them.

Run it through tools/bench-search, which installs PostgreSQL and psycopg
(tools/install-deps --bench), builds release binaries (or takes GROSER_BIN)
and generates the Python protobuf code. Directly:

    GROSER_BIN=.build/release python3 tools/python/bench_search.py

Environment:
    GROSER_BIN                directory with groserd, groser-client, groser-bench (required here)
    BENCH_SECONDS (5)         measured seconds of each load run
    BENCH_WARMUP (1)          seconds of each load run thrown away first
    BENCH_PRODUCTS_PER_STORE (33334)   gen-catalog's --products-per-store (300: a quick run)
    BENCH_CATALOG             an existing catalog file (JSON lines) instead of generating one
    BENCH_DATA                a groserd data directory that already holds BENCH_CATALOG
                              (copied first, never changed; skips the import)
    BENCH_STORE (store-spb-1) the store the speed part searches
    BENCH_TMP                 the working directory (default: a new one under /tmp, removed)
    BENCH_PG_DIR              PostgreSQL's cluster directory (default: a new one under /tmp, removed)
Exit status: 0 when it ran (whatever the figures), 1 when it could not.
"""
from __future__ import annotations

import glob
import json
import multiprocessing as mp
import os
import platform
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from array import array
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_quality as sq  # noqa: E402
from groser_client import Client  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PAGE = 10
CONCURRENCY = (1, 16)
T0 = time.monotonic()


def log(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f} s] {msg}", file=sys.stderr, flush=True)


class Failed(Exception):
    """The run cannot go on."""


def env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name) or default)
    except ValueError:
        raise Failed(f"{name} must be a whole number, not {os.environ[name]!r}")


def env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name) or default)
    except ValueError:
        raise Failed(f"{name} must be a number, not {os.environ[name]!r}")


# -- the products ------------------------------------------------------------------

# One product as the engines index it: (uid, store_uid, name, brand, shelf, department).


def thousandths(size: int) -> str:
    """size / 1000 as a shop writes it: 930 -> "0,93", 1000 -> "1"."""
    whole, rest = divmod(size, 1000)
    return f"{whole}" if not rest else f"{whole},{rest:03d}".rstrip("0")


def pack_text(unit: str, size: int) -> str:
    """The pack size as words, the same quantities groserd indexes from
    unit and unit_size (docs/SEARCH.md): 930 ml -> "930 мл 0,93 л"."""
    if size <= 0:
        return ""
    return {"ml": f"{size} мл {thousandths(size)} л", "g": f"{size} г {thousandths(size)} кг",
            "pcs": f"{size} шт"}.get(unit, "")


def read_products(path: str) -> list[tuple]:
    """The products of a catalog file (docs/CATALOG.md), with their store and
    their shelf's and department's names, in the file's order. The name is
    followed by the pack size in words (pack_text): groserd indexes the pack
    size with the name, and the sample catalog's names do not say it."""
    dep, shelf, out = {}, {}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            t = r.get("type")
            if t == "product":
                store, shelf_name, dep_name = shelf[r["shelf_uid"]]
                name = r["name"]
                pack = pack_text(r.get("unit", ""), int(r.get("unit_size") or 0))
                if pack:
                    name += " " + pack
                out.append((r["uid"], store, name, r.get("brand") or "", shelf_name, dep_name))
            elif t == "shelf":
                store, dep_name = dep[r["department_uid"]]
                shelf[r["uid"]] = (store, r["name"], dep_name)
            elif t == "department":
                dep[r["uid"]] = (r["store_uid"], r["name"])
    return out


def words(query: str) -> list[str]:
    """The query's runs of letters and digits, lower-cased."""
    return re.findall(r"[^\W_]+", query.lower())


# -- SQLite FTS5 ---------------------------------------------------------------------

FTS5_WEIGHTS = (10.0, 4.0, 2.0, 2.0)  # name, brand, shelf, department: as PostgreSQL's A, B, C (1.0, 0.4, 0.2)
FTS5_CREATE = ("CREATE VIRTUAL TABLE products USING fts5(name, brand, shelf, department, "
               "store_uid UNINDEXED, uid UNINDEXED, tokenize='unicode61 remove_diacritics 2', prefix='1 2 3')")
FTS5_QUERY = ("SELECT uid, name FROM products WHERE products MATCH ?1 AND rowid BETWEEN "
              "(SELECT first_rowid FROM stores WHERE store_uid = ?2) AND "
              "(SELECT last_rowid FROM stores WHERE store_uid = ?2) "
              f"ORDER BY bm25(products, {', '.join(map(str, FTS5_WEIGHTS))}) LIMIT ?3")


def fts5_match(ws: list[str]) -> str:
    return " AND ".join([f'"{w}"' for w in ws[:-1]] + [f'"{ws[-1]}"*'])


def fts5_build(path: str, products: list[tuple]) -> float:
    """A new FTS5 database at path; returns the seconds it took."""
    t = time.monotonic()
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode=OFF")
        db.execute("PRAGMA synchronous=OFF")
        db.execute(FTS5_CREATE)
        db.execute("CREATE TABLE stores(store_uid TEXT PRIMARY KEY, first_rowid INTEGER, last_rowid INTEGER) "
                   "WITHOUT ROWID")
        ordered = sorted(products, key=lambda p: p[1])  # stable: store by store, file order within
        db.executemany("INSERT INTO products(rowid, name, brand, shelf, department, store_uid, uid) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)",
                       ((i, p[2], p[3], p[4], p[5], p[1], p[0]) for i, p in enumerate(ordered, 1)))
        db.execute("INSERT INTO stores SELECT store_uid, min(rowid), max(rowid) FROM products GROUP BY store_uid")
        db.execute("INSERT INTO products(products) VALUES ('optimize')")
        db.commit()
        db.execute("ANALYZE")
        db.commit()
    finally:
        db.close()
    return time.monotonic() - t


def fts5_searcher(path: str) -> Callable[[str, str, int], list]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    db.execute("PRAGMA mmap_size=4294967296")
    db.execute("PRAGMA cache_size=-262144")  # 256 MiB

    def search(query: str, store: str, limit: int = PAGE) -> list:
        ws = words(query)
        if not ws:
            return []
        return db.execute(FTS5_QUERY, (fts5_match(ws), store, limit)).fetchall()
    return search


# -- PostgreSQL ----------------------------------------------------------------------

PG_TSV = ("setweight(to_tsvector('russian', name), 'A') || setweight(to_tsvector('russian', brand), 'B') || "
          "setweight(to_tsvector('russian', shelf || ' ' || department), 'C')")
PG_QUERY = ("SELECT uid, name FROM {table}, to_tsquery('russian', %(q)s) query "
            "WHERE store_uid = %(store)s AND tsv @@ query ORDER BY ts_rank(tsv, query) DESC, uid LIMIT %(limit)s")


def pg_tsquery(ws: list[str]) -> str:
    return " & ".join(ws[:-1] + [ws[-1] + ":*"])


def pg_bin_dir() -> str:
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2]), reverse=True):
        if os.access(os.path.join(d, "initdb"), os.X_OK):
            return d
    raise Failed("PostgreSQL's initdb not found under /usr/lib/postgresql/*/bin (tools/install-deps --bench)")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Postgres:
    """A throwaway cluster in its own directory, on its own Unix socket
    directory and port, no TCP; run as user postgres when we are root
    (initdb refuses root). stop() ends it and removes the directory."""

    def __init__(self, directory: Optional[str] = None):
        self.bin = pg_bin_dir()
        self.dir = directory or tempfile.mkdtemp(prefix="gbs-pg-", dir="/tmp")
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.dir, "postgres", "postgres")
        os.chmod(self.dir, 0o700)
        self.started = False

    def _run(self, *args: str) -> None:
        r = subprocess.run(self.as_user + list(args), cwd="/", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 0:
            raise Failed(f"{' '.join(args[:2])} failed ({r.returncode}):\n{r.stdout.decode(errors='replace')[-3000:]}")

    def start(self) -> "Postgres":
        self._run(f"{self.bin}/initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--locale=C.UTF-8", "--no-sync")
        # Throwaway: no durability (only loading is faster for it); JIT off, as
        # JIT compiling a short query costs more than it saves; memory enough
        # for the table and its indexes to stay cached.
        opts = (f"-c listen_addresses='' -c unix_socket_directories={self.dir} -p {self.port} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c jit=off "
                "-c shared_buffers=2GB -c maintenance_work_mem=1GB -c max_wal_size=8GB "
                "-c max_connections=64 -c autovacuum=off")
        self._run(f"{self.bin}/pg_ctl", "-D", self.data, "-o", opts, "-l", os.path.join(self.dir, "log"),
                  "-w", "-t", "60", "start")
        self.started = True
        return self

    @property
    def conninfo(self) -> dict:
        return {"host": self.dir, "port": self.port, "user": "postgres", "dbname": "postgres"}

    def connect(self):
        import psycopg
        return psycopg.connect(**self.conninfo, autocommit=True)

    def version(self) -> str:
        with self.connect() as c:
            return c.execute("SHOW server_version").fetchone()[0].split()[0]

    def load(self, table: str, products: list[tuple]) -> float:
        """The products into a new table with its indexes; returns seconds."""
        t = time.monotonic()
        with self.connect() as c:
            c.execute(f"DROP TABLE IF EXISTS {table}")
            c.execute(f"CREATE TABLE {table} (uid text NOT NULL, store_uid text NOT NULL, name text NOT NULL, "
                      f"brand text NOT NULL, shelf text NOT NULL, department text NOT NULL, "
                      f"tsv tsvector GENERATED ALWAYS AS ({PG_TSV}) STORED)")
            with c.cursor() as cur:
                with cur.copy(f"COPY {table} (uid, store_uid, name, brand, shelf, department) FROM STDIN") as cp:
                    for p in sorted(products, key=lambda p: p[1]):
                        cp.write_row(p)
            c.execute(f"CREATE INDEX {table}_tsv ON {table} USING gin (tsv)")
            c.execute(f"CREATE INDEX {table}_store ON {table} (store_uid)")
            c.execute(f"VACUUM ANALYZE {table}")
        return time.monotonic() - t

    def size(self, table: str) -> tuple[int, int]:
        """(table bytes with TOAST, index bytes)."""
        with self.connect() as c:
            return c.execute("SELECT pg_table_size(%s::regclass), pg_indexes_size(%s::regclass)",
                             (table, table)).fetchone()

    def stop(self) -> None:
        if self.started:
            subprocess.run(self.as_user + [f"{self.bin}/pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop"],
                           cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)


def pg_searcher(conninfo: dict, table: str) -> Callable[[str, str, int], list]:
    import psycopg
    conn = psycopg.connect(**conninfo, autocommit=True)
    sql = PG_QUERY.format(table=table)

    def search(query: str, store: str, limit: int = PAGE) -> list:
        ws = words(query)
        if not ws:
            return []
        return conn.execute(sql, {"q": pg_tsquery(ws), "store": store, "limit": limit}, prepare=True).fetchall()
    return search


def open_searcher(spec: tuple) -> Callable[[str, str, int], list]:
    """spec: ("fts5", path) or ("pg", conninfo, table); picklable for the workers."""
    if spec[0] == "fts5":
        return fts5_searcher(spec[1])
    return pg_searcher(spec[1], spec[2])


# -- the load driver for FTS5 and PostgreSQL -------------------------------------------

def _worker(spec, queries, store, offset, warmup, seconds, barrier, out) -> None:
    try:
        search = open_searcher(spec)
        search(queries[0], store)  # connected and prepared before the clock starts
        barrier.wait(60)
        clock = time.perf_counter  # CLOCK_MONOTONIC: the same clock in every process
        warm_end = clock() + warmup
        end = warm_end + seconds
        lat = array("d")
        errors, first_error, i, n = 0, "", offset, len(queries)
        while True:
            q = queries[i % n]
            i += 1
            t = clock()
            try:
                search(q, store)
            except Exception as exc:  # counted, and the first one shown
                errors += 1
                first_error = first_error or f"{q!r}: {exc}"
            done = clock()
            if done >= end:
                break
            if t >= warm_end:
                lat.append(done - t)
        out.put((offset, lat.tobytes(), errors, first_error))
    except BaseException as exc:
        out.put((offset, b"", -1, f"worker failed: {exc!r}"))


def drive(spec: tuple, queries: list[str], store: str, c: int, warmup: float, seconds: float) -> dict:
    """c processes, each its own connection, sending the queries in turn
    (each starting at a different one) for warmup + seconds."""
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(c), ctx.Queue()
    step = max(1, len(queries) // c)
    procs = [ctx.Process(target=_worker, args=(spec, queries, store, k * step, warmup, seconds, barrier, out),
                         daemon=True) for k in range(c)]
    for p in procs:
        p.start()
    results = []
    try:
        for _ in procs:
            results.append(out.get(timeout=warmup + seconds + 120))
    except Exception:
        raise Failed(f"{spec[0]} c={c}: a worker did not report")
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    lat, errors, first = array("d"), 0, ""
    for _, raw, err, msg in results:
        if err < 0:
            raise Failed(f"{spec[0]} c={c}: {msg}")
        chunk = array("d")
        chunk.frombytes(raw)
        lat.extend(chunk)
        errors += err
        first = first or msg
    ls = sorted(lat)
    if not ls:
        raise Failed(f"{spec[0]} c={c}: no query finished in {seconds} s")
    return {"qps": len(ls) / seconds, "p50": ls[len(ls) // 2] * 1e6, "p99": ls[min(len(ls) - 1, int(len(ls) * 0.99))] * 1e6,
            "n": len(ls), "errors": errors, "first_error": first}


def single_pass(search: Callable[[str, str], list], queries: list[str], store: str, rounds: int = 3) -> dict:
    """The queries one after another on one connection, `rounds` times after
    an untimed round: how many have hits, and the slowest by their median."""
    for q in queries:
        search(q, store)
    times: dict[str, list[float]] = {q: [] for q in queries}
    hits = {}
    for _ in range(rounds):
        for q in queries:
            t = time.perf_counter()
            hits[q] = len(search(q, store))
            times[q].append(time.perf_counter() - t)
    per = sorted(((sorted(ts)[len(ts) // 2], q) for q, ts in times.items()), reverse=True)
    return {"with_hits": sum(1 for n in hits.values() if n), "slowest": per[:3]}


# -- groserd --------------------------------------------------------------------------

class Groserd:
    """groserd on a socket in tmp; start() waits for the first answer and
    keeps the time it took, as tools/bench-scale measures it."""

    def __init__(self, bin_dir: str, tmp: str, data: str):
        self.bin, self.tmp, self.data = bin_dir, tmp, data
        self.socket = os.path.join(tmp, "g.sock")
        self.proc: Optional[subprocess.Popen] = None
        self.start_ms = 0.0

    def start(self) -> "Groserd":
        log_file = open(os.path.join(self.tmp, "groserd.log"), "ab")
        t = time.monotonic()
        self.proc = subprocess.Popen([f"{self.bin}/groserd", "--socket", self.socket, "--data", self.data,
                                      "--empty-catalog", "--log-level", "warning"],
                                     stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file)
        log_file.close()
        Path(self.tmp, "groserd.pid").write_text(str(self.proc.pid))
        while True:
            r = subprocess.run([f"{self.bin}/groser-bench", "--socket", self.socket, "-c", "1", "-n", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                break
            if self.proc.poll() is not None:
                raise Failed(f"groserd exited with {self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() - t > 300:
                raise Failed("groserd did not answer within 300 s")
            time.sleep(0.01)
        self.start_ms = (time.monotonic() - t) * 1000
        return self

    def log_tail(self) -> str:
        try:
            return Path(self.tmp, "groserd.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def client(self, *args: str) -> str:
        r = subprocess.run([f"{self.bin}/groser-client", "--socket", self.socket, "--timeout", "600", *args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise Failed(f"groser-client {' '.join(args)}: exit {r.returncode}: {r.stderr.decode(errors='replace')}")
        return r.stdout.decode()

    def bench(self, store: str, queries_file: str, c: int, warmup: float, seconds: float) -> dict:
        r = subprocess.run([f"{self.bin}/groser-bench", "--socket", self.socket, "--method", "search",
                            "--store", store, "--queries", queries_file, "-c", str(c),
                            "--warmup", f"{warmup:g}", "-t", f"{seconds:g}", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines = r.stdout.decode().splitlines()
        if not lines or not lines[0].startswith("{"):
            raise Failed(f"groser-bench c={c}: exit {r.returncode}: {r.stderr.decode(errors='replace')}")
        j = json.loads(lines[0])
        return {"qps": j["rps"], "p50": j["latency_us"]["p50"], "p99": j["latency_us"]["p99"],
                "n": j["succeeded"], "errors": j["failed"] + j["connection_failures"],
                "first_error": json.dumps(j.get("errors_by_code") or j.get("errors") or {}, ensure_ascii=False)}

    def status_kb(self, key: str) -> int:
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])
        return 0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        try:
            os.remove(os.path.join(self.tmp, "groserd.pid"))
        except OSError:
            pass


def groserd_searcher(sock: str) -> Callable[[str, str, int], list]:
    c = Client(sock, timeout=30.0).connect()

    def search(query: str, store: str, limit: int = PAGE) -> list:
        r = c.search_products(query, store_uid=store, page_size=limit)
        return [(h.product.uid, h.product.name) for h in r.hits]
    return search


class EngineAsClient:
    """search_quality.evaluate() asks a Client's search_products; this gives
    it an engine's hits in the same shape."""

    def __init__(self, search: Callable[[str, str, int], list]):
        self.search = search

    def search_products(self, query: str, store_uid: Optional[str] = None, page_size: int = PAGE, **_):
        rows = self.search(query, store_uid, page_size)
        return SimpleNamespace(hits=[SimpleNamespace(product=SimpleNamespace(uid=u, name=n)) for u, n in rows],
                               query_used=query, layout_switched=False, total_estimate=len(rows))


# -- the run -----------------------------------------------------------------------------

ENGINES = ("groserd", "FTS5", "PostgreSQL")


def quality(bin_dir: str, tmp: str, pg: Postgres, entries: list[dict]) -> tuple[dict, list]:
    """The relevance set on the sample catalog: {engine: search_quality report}."""
    log("quality: groserd on a fresh data directory (its sample catalog)")
    g = Groserd(bin_dir, tmp, os.path.join(tmp, "sample-data"))
    # Without --empty-catalog: a fresh data directory gets the built-in sample.
    g_args = [f"{bin_dir}/groserd", "--socket", g.socket, "--data", g.data, "--log-level", "warning"]
    sample = os.path.join(tmp, "sample.jsonl")
    with open(os.path.join(tmp, "groserd.log"), "ab") as lf:
        g.proc = subprocess.Popen(g_args, stdin=subprocess.DEVNULL, stdout=lf, stderr=lf)
    Path(tmp, "groserd.pid").write_text(str(g.proc.pid))
    try:
        for _ in range(3000):
            if subprocess.run([f"{bin_dir}/groser-bench", "--socket", g.socket, "-c", "1", "-n", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                break
            if g.proc.poll() is not None:
                raise Failed(f"groserd (sample) exited with {g.proc.returncode}:\n{g.log_tail()}")
            time.sleep(0.01)
        g.client("admin", "export", "--output", sample)
        report, server, _ = sq.measure(g.socket, entries)
        report["server_version"] = server
    finally:
        g.stop()
    products = read_products(sample)
    names = sq.catalog_file_products(Path(sample))
    bad = sq.check_against_catalog(entries, names)
    if bad:
        raise Failed("the exported sample does not hold the relevance set's products: " + "; ".join(bad[:5]))
    log(f"quality: sample catalog exported, {len(products):,} products; loading FTS5 and PostgreSQL")
    fts_path = os.path.join(tmp, "sample-fts5.sqlite3")
    fts5_build(fts_path, products)
    pg.load("sample_products", products)
    reports = {"groserd": report}
    reports["FTS5"] = sq.evaluate(EngineAsClient(fts5_searcher(fts_path)), entries, names)
    reports["PostgreSQL"] = sq.evaluate(EngineAsClient(pg_searcher(pg.conninfo, "sample_products")), entries, names)
    for e in ENGINES:
        r = reports[e]
        log(f"quality: {e}: top-3 {r['top3_hits']}/{r['queries']} ({r['top3_share']:.1f} %), MRR {r['mrr']:.3f}")
    return reports, products


def main() -> int:
    bin_dir = os.environ.get("GROSER_BIN", "")
    seconds = env_float("BENCH_SECONDS", 5)
    warmup = env_float("BENCH_WARMUP", 1)
    per_store = env_int("BENCH_PRODUCTS_PER_STORE", 33334)
    catalog = os.environ.get("BENCH_CATALOG", "")
    data_in = os.environ.get("BENCH_DATA", "")
    store = os.environ.get("BENCH_STORE", "store-spb-1")
    for name in ("groserd", "groser-client", "groser-bench"):
        if not os.access(os.path.join(bin_dir, name), os.X_OK):
            raise Failed(f"GROSER_BIN={bin_dir!r} has no executable {name}")
    if data_in and not catalog:
        raise Failed("BENCH_DATA needs BENCH_CATALOG: the catalog file it was imported from")
    own_tmp = not os.environ.get("BENCH_TMP")
    tmp = os.environ.get("BENCH_TMP") or tempfile.mkdtemp(prefix="gbs-", dir="/tmp")
    entries = sq.load_set(sq.DEFAULT_SET)
    queries = [e["query"] for e in entries]
    queries_file = os.path.join(tmp, "queries.txt")
    Path(queries_file).write_text("".join(q + "\n" for q in queries), encoding="utf-8")

    load_before = os.getloadavg()[0]
    pg = Postgres(os.environ.get("BENCH_PG_DIR") or None)
    g: Optional[Groserd] = None
    try:
        log(f"PostgreSQL: a throwaway cluster in {pg.dir}")
        pg.start()
        pg_version = pg.version()
        reports, _ = quality(bin_dir, tmp, pg, entries)

        # -- speed: the catalog --
        import_s = None
        if not catalog:
            catalog = os.path.join(tmp, "catalog.jsonl")
            log(f"speed: generating a catalog, 30 stores x {per_store:,} products")
            subprocess.run([sys.executable, str(REPO / "tools" / "gen-catalog"), "--cities", "10", "--stores-per-city",
                            "3", "--products-per-store", str(per_store), "--seed", "1", "--output", catalog],
                           check=True, stderr=subprocess.DEVNULL)
        data = os.path.join(tmp, "data")
        if data_in:
            log(f"speed: copying the data directory {data_in}")
            shutil.copytree(data_in, data, symlinks=True)
        else:
            g = Groserd(bin_dir, tmp, data).start()
            log(f"speed: importing {catalog} into groserd")
            t = time.monotonic()
            g.client("admin", "import", catalog)
            import_s = time.monotonic() - t
            g.stop()
        log("speed: reading the catalog's products")
        products = read_products(catalog)
        in_store = sum(1 for p in products if p[1] == store)
        if not in_store:
            raise Failed(f"the catalog has no products in {store} (BENCH_STORE)")

        # -- groserd --
        g = Groserd(bin_dir, tmp, data).start()
        log(f"groserd: started in {g.start_ms:.0f} ms with {len(products):,} products")
        with Client(g.socket, timeout=30.0) as c:
            st = c.stats()
            c.get_store(store_uid=store)  # NOT_FOUND stops the run here
        mem = {"index": st.search_index_bytes, "start_ms": g.start_ms,
               "rss_kb": g.status_kb("VmRSS"), "hwm_kb": g.status_kb("VmHWM")}
        speed, passes = {}, {}
        passes["groserd"] = single_pass(groserd_searcher(g.socket), queries, store)
        for conc in CONCURRENCY:
            log(f"groserd: groser-bench c={conc}")
            speed["groserd", conc] = g.bench(store, queries_file, conc, warmup, seconds)
        g.stop()
        g = None

        # -- FTS5 --
        fts_path = os.path.join(tmp, "fts5.sqlite3")
        log("FTS5: building")
        fts_s = fts5_build(fts_path, products)
        fts_bytes = os.path.getsize(fts_path)
        passes["FTS5"] = single_pass(fts5_searcher(fts_path), queries, store)
        for conc in CONCURRENCY:
            log(f"FTS5: c={conc}")
            speed["FTS5", conc] = drive(("fts5", fts_path), queries, store, conc, warmup, seconds)

        # -- PostgreSQL --
        log("PostgreSQL: COPY, GIN index, VACUUM ANALYZE")
        pg_s = pg.load("products", products)
        pg_table, pg_index = pg.size("products")
        passes["PostgreSQL"] = single_pass(pg_searcher(pg.conninfo, "products"), queries, store)
        for conc in CONCURRENCY:
            log(f"PostgreSQL: c={conc}")
            speed["PostgreSQL", conc] = drive(("pg", pg.conninfo, "products"), queries, store, conc, warmup, seconds)
    finally:
        if g is not None:
            g.stop()
        pg.stop()
        if own_tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    load_after = os.getloadavg()[0]

    # -- the tables --
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"tools/bench-search on {when}: {os.cpu_count()} cores, kernel {platform.release()}, "
          f"SQLite {sqlite3.sqlite_version}, PostgreSQL {pg_version}, {reports['groserd']['server_version']}; "
          f"BENCH_SECONDS={seconds:g} (after {warmup:g} s of warm-up), BENCH_PRODUCTS_PER_STORE={per_store}"
          + (f", BENCH_CATALOG={catalog}" if os.environ.get("BENCH_CATALOG") else "")
          + f"; load average {load_before:.2f} at the start, {load_after:.2f} at the end")
    print()
    print(f"Speed: {len(products):,} products in {len({p[1] for p in products})} stores; every query searches "
          f"{store} ({in_store:,} products) for 10 hits; "
          f"the {len(queries)} queries of the relevance set in turn. groserd: groser-bench (one thread, "
          f"every answer checked); FTS5 and PostgreSQL: c Python processes, one connection each.")
    print()
    print("| engine | c | qps | p50 µs | p99 µs | groserd/engine qps | queries with hits |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for e in ENGINES:
        for conc in CONCURRENCY:
            s = speed[e, conc]
            ratio = "—" if e == "groserd" else f"{speed['groserd', conc]['qps'] / s['qps']:.1f}×"
            failed = f" ({s['errors']} FAILED)" if s["errors"] else ""
            print(f"| {e} | {conc} | {s['qps']:,.0f}{failed} | {s['p50']:,.0f} | {s['p99']:,.0f} | {ratio} | "
                  f"{passes[e]['with_hits']} of {len(queries)} |")
    print()
    for e in ENGINES:
        slow = ", ".join(f"{q!r} {t * 1000:.2f} ms" for t, q in passes[e]["slowest"])
        print(f"Slowest queries, {e} (median of 3 rounds at c=1, Python client's time): {slow}.")
    for e in ENGINES:
        for conc in CONCURRENCY:
            if speed[e, conc]["errors"]:
                print(f"{e} c={conc}: {speed[e, conc]['errors']} failed queries; first: {speed[e, conc]['first_error']}")
    print()
    print(f"Quality: the {len(entries)} queries of Tests/Search/relevance.json on groserd's sample catalog "
          f"(each in its own store), 10 hits asked; top-3: every expected product in the first 3; "
          f"MRR: 1/rank of the best-placed expected product in the first 10.")
    print()
    print("| engine | top-3 | MRR | queries |")
    print("| --- | ---: | ---: | ---: |")
    for e in ENGINES:
        r = reports[e]
        print(f"| {e} | {r['top3_hits']} ({r['top3_share']:.1f} %) | {r['mrr']:.3f} | {r['queries']} |")
    print()
    print("| kind | queries | " + " | ".join(f"{e} top-3" for e in ENGINES) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in ENGINES) + " |")
    for kind, f in reports["groserd"]["by_kind"].items():
        print(f"| {kind} | {f['queries']} | "
              + " | ".join(str(reports[e]["by_kind"][kind]["top3_hits"]) for e in ENGINES) + " |")
    for m in reports["groserd"]["misses"]:
        got = ", ".join(g_["name"] for g_ in m["got"]) or "no hits"
        print(f"groserd miss: {m['query']!r} @ {m['store_uid']} [{m['kind']}]: got {got}")
    print()
    mb = 1e6
    print(f"| memory and load, {len(products):,} products | figure |")
    print("| --- | ---: |")
    print(f"| groserd import (groser-client admin import) | "
          + (f"{import_s:.1f} s |" if import_s is not None else "— (BENCH_DATA) |"))
    print(f"| groserd start → first answer | {mem['start_ms']:,.0f} ms |")
    print(f"| groserd search index (Stats search_index_bytes) | {mem['index'] / mb:.1f} MB |")
    print(f"| groserd VmRSS / VmHWM after start | {mem['rss_kb'] * 1024 / mb:.1f} / {mem['hwm_kb'] * 1024 / mb:.1f} MB |")
    print(f"| FTS5 build (insert, optimize, ANALYZE) / database file | {fts_s:.1f} s / {fts_bytes / mb:.1f} MB |")
    print(f"| PostgreSQL load (COPY with the generated tsvector, GIN and btree, VACUUM ANALYZE) | {pg_s:.1f} s |")
    print(f"| PostgreSQL table (with TOAST) / indexes | {pg_table / mb:.1f} / {pg_index / mb:.1f} MB |")
    print()
    print("What each engine was asked:")
    print()
    print("- groserd: SearchProducts {query, store_uid, page_size 10} (docs/SEARCH.md).")
    print(f"- FTS5: `{FTS5_CREATE}`; rows inserted store by store, `stores(store_uid, first_rowid, last_rowid)`; "
          f"`{FTS5_QUERY}` with ?1 = each word quoted, the last one a prefix, ANDed "
          f"(\"кефир дом\" → `{fts5_match(words('кефир дом'))}`), ?3 = 10.")
    print(f"- PostgreSQL: `tsv tsvector GENERATED ALWAYS AS ({PG_TSV}) STORED`, GIN (tsv), btree (store_uid), "
          f"VACUUM ANALYZE; prepared `{PG_QUERY.format(table='products')}` with q = the words joined by &, "
          f"the last one a prefix (\"кефир дом\" → `{pg_tsquery(words('кефир дом'))}`).")
    print()

    # -- issue 13's targets --
    def verdict(ok: bool) -> str:
        return "met" if ok else "**MISSED**"
    rows = []
    p99 = speed["groserd", 1]["p99"]
    rows.append(("p99 ≤ 1 ms at c=1", f"{p99 / 1000:.2f} ms", verdict(p99 <= 1000)))
    for e in ("FTS5", "PostgreSQL"):
        for conc in CONCURRENCY:
            ratio = speed["groserd", conc]["qps"] / speed[e, conc]["qps"]
            rows.append((f"throughput ≥ 10× {e}'s, c={conc}",
                         f"{ratio:.1f}× ({speed['groserd', conc]['qps']:,.0f} against {speed[e, conc]['qps']:,.0f} qps)",
                         verdict(ratio >= 10)))
    gq = reports["groserd"]
    for e in ("FTS5", "PostgreSQL"):
        r = reports[e]
        rows.append((f"top-3 hit rate better than {e}'s", f"{gq['top3_share']:.1f} % against {r['top3_share']:.1f} %",
                     verdict(gq["top3_share"] > r["top3_share"])))
    rows.append(("search index ≤ 150 MB", f"{mem['index'] / mb:.1f} MB", verdict(mem["index"] <= 150 * mb)))
    print(f"| issue 13's target, at {len(products):,} products | figure | |")
    print("| --- | --- | --- |")
    for t, f, v in rows:
        print(f"| {t} | {f} | {v} |")
    return 0


def _on_signal(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        sys.exit(main())
    except Failed as exc:
        print(f"bench-search: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("bench-search: interrupted; everything it started is stopped", file=sys.stderr)
        sys.exit(130)
