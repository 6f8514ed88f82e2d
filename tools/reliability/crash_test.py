#!/usr/bin/env python3
"""Kill -9 groserd under a cart-mutation load and check that nothing it
acknowledged is lost. Run through tools/crash-test, which installs and
builds first.

Each round: start groserd on the same data directory; check every writer's
cart against what groserd acknowledged before the last kill; retry the one
request each writer had in flight with its idempotency key (it must end up
applied exactly once); run the load (several writers, each with its own
connection, session and cart, doing AddItem and SetQuantity with idempotency
keys) and kill -9 the daemon at a random moment; then check the database
file with `PRAGMA integrity_check` and `PRAGMA foreign_key_check` (on a copy,
so the next start recovers the original). A last start checks the final
round and stops the daemon with SIGTERM.
"""
from __future__ import annotations

import argparse
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groserd", required=True)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--products", type=int, default=5, help="products per writer's cart")
    ap.add_argument("--min-load", type=float, default=0.3, help="shortest load before the kill, seconds")
    ap.add_argument("--max-load", type=float, default=2.0, help="longest load before the kill, seconds")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    g.install_signal_exit()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)

    directory = g.make_temp_dir("gsr-crash-")
    daemon = g.Daemon(args.groserd, directory)
    failures: list[str] = []
    passed = 0
    totals = {"acknowledged": 0, "applied": 0, "not-applied": 0, "integrity-ok": 0}
    writers: list[Writer] = []
    try:
        g.log(TOOL, f"{args.rounds} rounds, {args.writers} writers, seed {seed}, data in {daemon.data}")
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
                else:
                    for w in writers:
                        outcome = w.verify(c)
                        for k, v in outcome.items():
                            totals[k] += v
            for w in writers:
                round_errors += w.errors
                w.errors.clear()
            if final:
                code = daemon.terminate(timeout=15)
                if code != 0:
                    round_errors.append(f"SIGTERM: groserd exited with {code}")
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
            before = sum(w.acknowledged for w in writers)
            threads = [threading.Thread(target=w.run, args=(daemon.socket, stop), daemon=True) for w in writers]
            for t in threads:
                t.start()
            time.sleep(rng.uniform(args.min_load, args.max_load))
            daemon.kill9()
            stop.set()
            for t in threads:
                t.join(timeout=15)
            acknowledged = sum(w.acknowledged for w in writers) - before
            totals["acknowledged"] += acknowledged
            in_flight = sum(1 for w in writers if w.in_flight is not None)
            problems = check_database(daemon.data, os.path.join(directory, "check"))
            if problems:
                failures += [f"round {round_}: {p}" for p in problems]
            else:
                totals["integrity-ok"] += 1
            g.log(TOOL, f"round {round_}: kill -9 after {acknowledged} acknowledged mutations, "
                        f"{in_flight} in flight; integrity_check {'ok' if not problems else 'FAILED'}")
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
    print(f"crash-test: integrity_check ok after {totals['integrity-ok']} of {args.rounds} kills")
    for f in failures[:20]:
        print(f"crash-test: FAIL: {f}")
    return 1 if failures or passed != args.rounds else 0


if __name__ == "__main__":
    sys.exit(main())
