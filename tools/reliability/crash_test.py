#!/usr/bin/env python3
"""Kill -9 groserd under a cart-mutation load and check that nothing it
acknowledged is lost. Run through tools/crash-test, which installs and
builds first.

Each round: start groserd on the same data directory; check every writer's
cart against what groserd acknowledged before the last kill; retry the one
request each writer had in flight with its idempotency key (it must end up
applied exactly once); run the load (several writers, each with its own
connection, session and cart, doing AddItem and SetQuantity with idempotency
keys), beside buyers who each check out one unit of their own product
again and again (SetQuantity, then Checkout of that cart version, both
with keys), and kill -9 the daemon at a random moment; after the restart
every acknowledged order must be listed once, a checkout in flight retried
with its key must give exactly one order, and each buyer's product stock
must be down by exactly one unit per order; then check the database
file with `PRAGMA integrity_check` and `PRAGMA foreign_key_check` (on a copy,
so the next start recovers the original). A last start checks the final
round and stops the daemon with SIGTERM.

With `--store postgres` the script starts a throwaway PostgreSQL cluster
(tools/pg-cluster, fsync on; stopped at the end, also on failure), creates
one database for all rounds (each round checks what the previous kill left,
as the SQLite run keeps one data directory) and runs groserd with `--store`.
After every kill, while no groserd runs, the database is checked instead of
the SQLite file: no stock below zero; as many orders as the buyers saw
acknowledged, plus at most the checkouts in flight; every order with its
lines, its total their sum, each line's total its price times its
quantity; each buyer's product down by exactly the units its order lines
hold; one remembered checkout answer per order; and pg_amcheck (amcheck's
B-tree and heap checks) clean.
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import traceback
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as g  # noqa: E402

TOOL = "crash-test"
MAX_QUANTITY = 99


class Writer:
    """One client: its session, its cart's expected lines, and the request it
    had in flight when the daemon died (acknowledged or not: unknown)."""

    def __init__(self, index: int, session: str, store: str, products: list[str], seed: int):
        self.index = index
        self.session = session
        self.store = store
        self.products = products
        self.rng = random.Random(seed)
        self.expected: dict[str, int] = {p: 0 for p in products}
        self.in_flight: Optional[tuple[str, str, int, str]] = None  # (kind, product, quantity, key)
        self.serial = 0
        self.acknowledged = 0
        self.errors: list[str] = []

    def next_op(self) -> tuple[str, str, int, str]:
        self.serial += 1
        product = self.rng.choice(self.products)
        key = f"w{self.index}-{self.serial}"
        have = self.expected[product]
        if self.rng.random() < 0.6 and have < MAX_QUANTITY:
            return "add", product, self.rng.randint(1, min(3, MAX_QUANTITY - have)), key
        return "set", product, self.rng.randint(0, 20), key

    def applied(self, op: tuple[str, str, int, str]) -> int:
        """The product's quantity once `op` is applied."""
        kind, product, quantity, _ = op
        return self.expected[product] + quantity if kind == "add" else quantity

    def request(self, op: tuple[str, str, int, str]):
        kind, product, quantity, key = op
        if kind == "add":
            return g.req_add_item(self.session, self.store, product, quantity, key=key)
        return g.req_set_quantity(self.session, self.store, product, quantity, key=key)

    def run(self, path: str, stop: threading.Event) -> None:
        """Mutates until the connection breaks (the kill) or `stop`."""
        try:
            conn = g.Conn(path, timeout=10)
        except OSError as exc:
            self.errors.append(f"writer {self.index}: cannot connect: {exc}")
            return
        try:
            while not stop.is_set():
                op = self.next_op()
                self.in_flight = op
                resp = conn.call(self.request(op))
                code, message = g.status(resp)
                if code != g.OK:
                    self.errors.append(f"writer {self.index}: {op[0]} {op[1]} x{op[2]}: status {code}: {message}")
                    return
                self.expected[op[1]] = self.applied(op)
                self.in_flight = None
                self.acknowledged += 1
        except (OSError, g.ConnectionClosed, RuntimeError, ValueError):
            pass  # the daemon died; `in_flight` says what may or may not be in
        finally:
            conn.close()

    def cart(self, conn: g.Conn) -> dict[str, int]:
        resp = g.expect_ok(conn.call(g.req_get_cart(self.session, self.store)), "GetCart")
        return {line.product_uid: line.quantity for line in resp.get_cart.cart.lines}

    def verify(self, conn: g.Conn) -> dict[str, int]:
        """Checks the stored cart after a restart; resolves the in-flight
        request by retrying it with its key. Returns {"applied": n, ...}."""
        outcome = {"applied": 0, "not-applied": 0}
        actual = self.cart(conn)
        op = self.in_flight
        for product in self.products:
            want = self.expected[product]
            got = actual.get(product, 0)
            if op is not None and product == op[1] and got != want:
                if got != self.applied(op):
                    self.errors.append(f"writer {self.index}: {product}: {got}, expected {want} "
                                       f"or {self.applied(op)} with the request in flight")
            elif got != want:
                self.errors.append(f"writer {self.index}: {product}: {got} after restart, acknowledged {want}")
        if op is not None:
            before = actual.get(op[1], 0)
            outcome["applied" if before == self.applied(op) and before != self.expected[op[1]] else "not-applied"] += 1
            # A retry with the same key must leave it applied exactly once.
            resp = conn.call(self.request(op))
            code, message = g.status(resp)
            if code != g.OK:
                self.errors.append(f"writer {self.index}: retry of {op}: status {code}: {message}")
            else:
                self.expected[op[1]] = self.applied(op)
                got = self.cart(conn).get(op[1], 0)
                if got != self.expected[op[1]]:
                    self.errors.append(f"writer {self.index}: retry of {op} left {got}, not {self.expected[op[1]]}")
            self.in_flight = None
        return outcome


class CheckoutWriter:
    """One customer who buys one unit of its own product again and again:
    SetQuantity(product, 1) with a key, then Checkout of that cart version
    with a key. Tracks the order numbers groserd acknowledged and the step
    in flight at the kill. After a restart every acknowledged order must be
    listed, a retried checkout must give exactly one order for its key, and
    the product's stock must have dropped by exactly one unit per order."""

    def __init__(self, index: int, session: str, store: str, product: str, stock: int):
        self.index = index
        self.session = session
        self.store = store
        self.product = product
        self.initial_stock = stock
        self.orders: list[str] = []            # acknowledged order numbers
        self.in_flight: Optional[tuple] = None  # ("set", key) or ("checkout", version, key)
        self.serial = 0
        self.acknowledged = 0
        self.errors: list[str] = []

    def _set(self, conn: g.Conn, key: str) -> int:
        resp = conn.call(g.req_set_quantity(self.session, self.store, self.product, 1, key=key))
        code, message = g.status(resp)
        if code != g.OK:
            raise RuntimeError(f"set-quantity: status {code}: {message}")
        return resp.set_quantity.cart.version

    def _checkout(self, conn: g.Conn, version: int, key: str) -> str:
        resp = conn.call(g.req_checkout(self.session, self.store, version, key=key))
        code, message = g.status(resp)
        if code != g.OK:
            raise RuntimeError(f"checkout of version {version}: status {code}: {message}")
        return resp.checkout.order.number

    def run(self, path: str, stop: threading.Event) -> None:
        try:
            conn = g.Conn(path, timeout=10)
        except OSError as exc:
            self.errors.append(f"buyer {self.index}: cannot connect: {exc}")
            return
        try:
            while not stop.is_set():
                self.serial += 1
                key = f"b{self.index}-{self.serial}"
                self.in_flight = ("set", key + "-set")
                version = self._set(conn, key + "-set")
                self.acknowledged += 1
                self.in_flight = ("checkout", version, key + "-pay")
                number = self._checkout(conn, version, key + "-pay")
                self.orders.append(number)
                self.in_flight = None
                self.acknowledged += 1
        except RuntimeError as exc:
            self.errors.append(f"buyer {self.index}: {exc}")
        except (OSError, g.ConnectionClosed, ValueError):
            pass  # the daemon died; `in_flight` says what may or may not be in
        finally:
            conn.close()

    def listed(self, conn: g.Conn) -> list[str]:
        resp = g.expect_ok(conn.call(g.req_list_orders(self.session)), "ListOrders")
        return [o.number for o in resp.list_orders.orders]

    def stock(self, database: "str | Postgres") -> int:
        """The product's stock as the database holds it (read-only, beside the running daemon)."""
        query = f"SELECT stock FROM products WHERE uid = '{self.product}';"
        if isinstance(database, Postgres):
            return int(database.query(query))
        out = subprocess.run(["sqlite3", "-readonly", database, query],
                             capture_output=True, text=True, timeout=60, check=True)
        return int(out.stdout.strip())

    def verify(self, conn: g.Conn, database: "str | Postgres") -> dict[str, int]:
        outcome = {"applied": 0, "not-applied": 0, "orders": 0}
        listed = self.listed(conn)
        if len(set(listed)) != len(listed):
            self.errors.append(f"buyer {self.index}: an order number listed twice: {sorted(listed)}")
        missing = [n for n in self.orders if n not in listed]
        if missing:
            self.errors.append(f"buyer {self.index}: acknowledged orders missing after restart: {missing}")
        extra = len(listed) - len(self.orders)
        op = self.in_flight
        if op is not None and op[0] == "checkout":
            if extra not in (0, 1):
                self.errors.append(f"buyer {self.index}: {extra} orders beyond the acknowledged ones "
                                   f"with one checkout in flight")
            outcome["applied" if extra == 1 else "not-applied"] += 1
            try:
                number = self._checkout(conn, op[1], op[2])  # the retry: replayed, or placed now
            except RuntimeError as exc:
                self.errors.append(f"buyer {self.index}: retry of the checkout in flight: {exc}")
            else:
                if extra == 1 and number not in listed:
                    self.errors.append(f"buyer {self.index}: the retried checkout made a second order {number}")
                self.orders.append(number)
                listed = self.listed(conn)
        elif extra != 0:  # nothing, or only the SetQuantity before a checkout, was in flight
            self.errors.append(f"buyer {self.index}: {extra} orders nobody acknowledged")
        self.in_flight = None
        if len(listed) != len(self.orders) or sorted(listed) != sorted(self.orders):
            self.errors.append(f"buyer {self.index}: orders listed {len(listed)}, acknowledged {len(self.orders)}")
        stock = self.stock(database)
        if stock != self.initial_stock - len(self.orders):
            self.errors.append(f"buyer {self.index}: stock {stock}, expected {self.initial_stock} - "
                               f"{len(self.orders)} orders = {self.initial_stock - len(self.orders)}")
        outcome["orders"] = len(self.orders)
        return outcome


def check_database(data_dir: str, scratch: str) -> list[str]:
    """integrity_check and foreign_key_check on a copy of the database and its WAL."""
    problems = []
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    for suffix in ("", "-wal"):
        src = os.path.join(data_dir, "groser.sqlite3" + suffix)
        if os.path.exists(src):
            shutil.copy2(src, os.path.join(scratch, "groser.sqlite3" + suffix))
    db = os.path.join(scratch, "groser.sqlite3")
    out = subprocess.run(["sqlite3", db, "PRAGMA integrity_check;", "PRAGMA foreign_key_check;"],
                         capture_output=True, text=True, timeout=120)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines or lines[0] != "ok":
        problems.append(f"integrity_check: {out.stdout.strip()[:500]} {out.stderr.strip()[:500]}")
    elif len(lines) > 1:
        problems.append(f"foreign_key_check: {lines[1:6]}")
    shutil.rmtree(scratch, ignore_errors=True)
    return problems


class Postgres:
    """A throwaway cluster (tools/pg-cluster) and one database in it, queried with psql."""

    def __init__(self, name: str):
        self.tool = os.path.join(str(g.REPO), "tools", "pg-cluster")
        # A fresh path directly under /tmp (the server's socket lives there).
        self.directory = f"/tmp/groser-pg-crash-{os.getpid()}-{random.randrange(1 << 20):05x}"
        self.started = False
        self.name = name
        self.server = ""
        self.conninfo = ""

    def start(self) -> None:
        self.started = True
        out = subprocess.run([self.tool, "start", self.directory], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"tools/pg-cluster start: {out.stderr.strip()}")
        self.server = out.stdout.strip().splitlines()[-1]
        self.psql(self.server, f"CREATE DATABASE {self.name}")
        self.conninfo = f"{self.server} dbname={self.name}"

    def stop(self) -> None:
        if self.started:
            subprocess.run([self.tool, "stop", self.directory], capture_output=True, timeout=120)
            self.started = False

    @staticmethod
    def psql(conninfo: str, sql: str) -> str:
        out = subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", conninfo, "-c", sql],
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"psql: {sql[:80]}: {out.stderr.strip()[:500]}")
        return out.stdout.strip()

    def dump(self, path: str) -> None:
        """pg_dump of the database into `path`, for a failure's post-mortem."""
        binary = shutil.which("pg_dump") or "pg_dump"
        with open(path, "w") as f:
            subprocess.run([binary, "-d", self.conninfo], stdout=f, stderr=subprocess.DEVNULL, timeout=120)

    def query(self, sql: str) -> str:
        return self.psql(self.conninfo, sql)

    def amcheck(self) -> list[str]:
        """pg_amcheck on the database: every B-tree index and every table's heap."""
        server = dict(part.split("=", 1) for part in self.server.split())
        binary = shutil.which("pg_amcheck")
        if binary is None:
            candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_amcheck"),
                                key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
            binary = candidates[-1] if candidates else None
        if binary is None:
            return ["pg_amcheck not found"]
        out = subprocess.run([binary, "--install-missing", "--heapallindexed", "--parent-check",
                              "-h", server["host"], "-p", server["port"], "-U", server["user"], self.name],
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            return [f"pg_amcheck: exit {out.returncode}: {(out.stdout + out.stderr).strip()[:500]}"]
        return []

    def check(self, buyers: list[CheckoutWriter], checkouts_in_flight: int) -> list[str]:
        """The database as a kill left it (no groserd running)."""
        problems = []
        acknowledged_orders = sum(len(b.orders) for b in buyers)
        checks = [
            ("products with stock below zero", "SELECT count(*) FROM products WHERE stock < 0"),
            ("orders without lines",
             "SELECT count(*) FROM orders o WHERE NOT EXISTS (SELECT 1 FROM order_lines l WHERE l.order_id = o.id)"),
            ("orders whose total is not the sum of their lines",
             "SELECT count(*) FROM orders o WHERE total_minor <> "
             "(SELECT coalesce(sum(line_total_minor), 0) FROM order_lines l WHERE l.order_id = o.id)"),
            ("order lines whose total is not price x quantity",
             "SELECT count(*) FROM order_lines WHERE line_total_minor <> unit_price_minor * quantity OR quantity <= 0"),
            ("order lines without their order",
             "SELECT count(*) FROM order_lines l WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = l.order_id)"),
        ]
        for what, sql in checks:
            n = int(self.query(sql))
            if n:
                problems.append(f"{what}: {n}")
        orders = int(self.query("SELECT count(*) FROM orders"))
        if not acknowledged_orders <= orders <= acknowledged_orders + checkouts_in_flight:
            problems.append(f"{orders} orders in the database; the buyers saw {acknowledged_orders} acknowledged "
                            f"and had {checkouts_in_flight} checkout(s) in flight")
        for b in buyers:
            sold = int(self.query(f"SELECT coalesce(sum(quantity), 0) FROM order_lines WHERE product_uid = '{b.product}'"))
            stock = b.stock(self)
            if stock != b.initial_stock - sold:
                problems.append(f"buyer {b.index}: stock {stock}, but order lines hold {sold} of "
                                f"{b.initial_stock} units sold")
        answers = int(self.query("SELECT count(*) FROM idempotency"))
        if answers != orders:
            problems.append(f"{answers} remembered checkout answers for {orders} orders")
        return problems + self.amcheck()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groserd", required=True)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--buyers", type=int, default=2, help="customers checking out one unit at a time")
    ap.add_argument("--products", type=int, default=5, help="products per writer's cart")
    ap.add_argument("--min-load", type=float, default=0.3, help="shortest load before the kill, seconds")
    ap.add_argument("--max-load", type=float, default=2.0, help="longest load before the kill, seconds")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite",
                    help="postgres: groserd --store on a throwaway cluster, the database checked after each kill")
    args = ap.parse_args()
    g.install_signal_exit()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)

    directory = g.make_temp_dir("gsr-crash-")
    pg = Postgres("crash") if args.store == "postgres" else None
    daemon = g.Daemon(args.groserd, directory)
    failures: list[str] = []
    passed = 0
    totals = {"acknowledged": 0, "applied": 0, "not-applied": 0, "integrity-ok": 0,
              "checkout-applied": 0, "checkout-not-applied": 0, "orders": 0}
    writers: list[Writer] = []
    buyers: list[CheckoutWriter] = []
    try:
        if pg is not None:
            pg.start()
            daemon.extra = ["--store", pg.conninfo]
        where = f"PostgreSQL database {pg.name} in {pg.directory}" if pg else daemon.data
        g.log(TOOL, f"{args.rounds} rounds, {args.writers} writers, {args.buyers} buyers, seed {seed}, data in {where}")
        for round_ in range(1, args.rounds + 2):
            final = round_ == args.rounds + 1
            daemon.start()
            round_errors: list[str] = []
            with g.Conn(daemon.socket, timeout=10) as c:
                if not writers:
                    spb = g.expect_ok(c.call(g.req_get_store("SPB", include_products=True)), "GetStore").get_store.store
                    in_stock = [p.uid for d in spb.departments for s in d.shelves for p in s.products
                                if not p.out_of_stock]
                    for i in range(args.writers):
                        session = g.expect_ok(c.call(g.req_open_session()), "OpenSession").open_session.session
                        products = in_stock[i * args.products:(i + 1) * args.products]
                        writers.append(Writer(i, session, spb.summary.uid, products, seed + i))
                    for i in range(args.buyers):
                        session = g.expect_ok(c.call(g.req_open_session()), "OpenSession").open_session.session
                        product = in_stock[args.writers * args.products + i]
                        stock = 1_000_000
                        g.expect_ok(c.call(g.req_set_product(product, stock=stock)), "SetProduct stock")
                        buyers.append(CheckoutWriter(i, session, spb.summary.uid, product, stock))
                else:
                    for w in writers:
                        outcome = w.verify(c)
                        for k, v in outcome.items():
                            totals[k] += v
                    orders = 0
                    for b in buyers:
                        outcome = b.verify(c, pg if pg else os.path.join(daemon.data, "groser.sqlite3"))
                        totals["checkout-applied"] += outcome["applied"]
                        totals["checkout-not-applied"] += outcome["not-applied"]
                        orders += outcome["orders"]
                    totals["orders"] = orders
            for w in writers + buyers:
                round_errors += w.errors
                w.errors.clear()
            if final:
                code = daemon.terminate(timeout=15)
                if code != 0:
                    round_errors.append(f"SIGTERM: groserd exited with {code}")
                if pg:
                    round_errors += pg.check(buyers, 0)
                else:
                    round_errors += check_database(daemon.data, os.path.join(directory, "check"))
                if round_errors:
                    failures += [f"after round {round_ - 1}: {e}" for e in round_errors]
                elif round_ > 1:
                    passed += 1  # the last kill's round is verified now
                break
            if round_errors:
                failures += [f"round {round_ - 1}: {e}" for e in round_errors]
            elif round_ > 1:
                passed += 1

            stop = threading.Event()
            everyone = writers + buyers
            before = sum(w.acknowledged for w in everyone)
            threads = [threading.Thread(target=w.run, args=(daemon.socket, stop), daemon=True) for w in everyone]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(args.min_load, args.max_load))
            daemon.kill9()
            stop.set()
            for t in threads:
                t.join(timeout=15)
            acknowledged = sum(w.acknowledged for w in everyone) - before
            totals["acknowledged"] += acknowledged
            in_flight = sum(1 for w in everyone if w.in_flight is not None)
            if pg:
                checkouts = sum(1 for b in buyers if b.in_flight is not None and b.in_flight[0] == "checkout")
                problems = pg.check(buyers, checkouts)
            else:
                problems = check_database(daemon.data, os.path.join(directory, "check"))
            if problems:
                failures += [f"round {round_}: {p}" for p in problems]
            else:
                totals["integrity-ok"] += 1
            g.log(TOOL, f"round {round_}: kill -9 after {acknowledged} acknowledged mutations, "
                        f"{in_flight} in flight; {'database checks' if pg else 'integrity_check'} "
                        f"{'ok' if not problems else 'FAILED'}")
            if len(failures) > 20:
                break
    except KeyboardInterrupt:
        failures.append("interrupted")
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        failures.append("the crash-test script failed")
        print(daemon.log_tail())
    finally:
        daemon.stop()
        if pg is not None:
            if (failures or args.keep) and pg.conninfo:
                pg.dump(os.path.join(directory, "crash.sql"))
            pg.stop()
        if failures or args.keep:
            print(f"crash-test: kept {directory}")
        else:
            g.remove_tree(directory)

    print()
    print(f"crash-test: rounds passed: {passed}/{args.rounds} (seed {seed})")
    print(f"crash-test: acknowledged mutations: {totals['acknowledged']}, all present after restart: "
          f"{'yes' if not failures else 'NO'}")
    print(f"crash-test: in flight at the kill: {totals['applied'] + totals['not-applied']} "
          f"({totals['applied']} had been applied, {totals['not-applied']} had not; each retried with its key "
          f"and applied exactly once)")
    print(f"crash-test: orders placed and acknowledged: {totals['orders']}, each listed once, stock down by "
          f"exactly one unit per order: {'yes' if not failures else 'NO'}; checkouts in flight at the kill: "
          f"{totals['checkout-applied'] + totals['checkout-not-applied']} ({totals['checkout-applied']} had been "
          f"placed, {totals['checkout-not-applied']} had not; each retried with its key, one order each)")
    if pg:
        print(f"crash-test: PostgreSQL checks (stock >= 0, orders = acknowledged + at most the in-flight ones, "
              f"order lines consistent, one answer per order, pg_amcheck) ok after {totals['integrity-ok']} "
              f"of {args.rounds} kills")
    else:
        print(f"crash-test: integrity_check ok after {totals['integrity-ok']} of {args.rounds} kills")
    for f in failures[:20]:
        print(f"crash-test: FAIL: {f}")
    return 1 if failures or passed != args.rounds else 0


if __name__ == "__main__":
    sys.exit(main())
