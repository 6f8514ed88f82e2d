#!/usr/bin/env python3
"""Torture a real groserd with bad input while a well-behaved client checks
its answers. Run through tools/torture, which installs and builds first.

Many connections (default 50) send random bytes, mutated valid frames,
truncated frames, length prefixes up to 4 GiB, frames at the size limit,
most of a 4 MiB frame and then nothing (partial-frame, at most 20 at once),
4 MiB requests of up to 2 M unknown or repeated fields (unknown-fields), and
disconnect mid-frame, for --seconds (default 60) or --max-inputs, whichever
comes first. Meanwhile one client on its own connection keeps checking
ListCities' count, GetStore SPB, and an AddItem + GetCart in its own session.

Then a memory phase (--memory-seconds) runs only partial-frame,
unknown-fields and at-limit from a reset peak: the daemon's peak resident
memory (VmHWM) over it must stay under twice its idle VmRSS plus the
unfinished-frame budget (--budget, given to the daemon). The mixed attack's
VmHWM is printed too; it is not held to that bound, since other attacks
(pipeline-and-vanish) cost memory the budget does not cover.

Fails (exit 1) when the daemon dies, the good client sees any error, a
deterministic protocol expectation is broken, SIGTERM does not stop it
cleanly, the memory phase's VmHWM is over that bound, or its VmRSS after the
run exceeds the warm-up figure by more than 50% + 20 MiB.
"""
from __future__ import annotations

import argparse
import os
import random
import socket
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as g  # noqa: E402

TOOL = "torture"


class Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_kind: dict[str, int] = {}
        self.bytes = 0
        self.unexpected: list[str] = []
        self.outcomes: dict[str, int] = {}

    def outcome(self, what: str) -> None:
        """Counts an allowed outcome worth reporting (not an input)."""
        with self.lock:
            self.outcomes[what] = self.outcomes.get(what, 0) + 1

    def add(self, kind: str, nbytes: int) -> None:
        with self.lock:
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
            self.bytes += nbytes

    def total(self) -> int:
        with self.lock:
            return sum(self.by_kind.values())

    def note(self, message: str) -> None:
        with self.lock:
            if len(self.unexpected) < 50:
                self.unexpected.append(message)


def valid_requests(session: str, store: str, products: list[str], shelf: str) -> list[bytes]:
    """One encoded request of every method (attack session: its carts are the attackers')."""
    p = products[0]
    reqs = [
        g.req_server_info(1), g.req_list_cities(2), g.req_get_store("SPB", id_=3),
        g.req_get_store(store_uid=store, include_products=True, id_=4), g.req_get_shelf(shelf, 5),
        g.req_open_session(6), g.req_get_cart(session, store, 7), g.req_add_item(session, store, p, 2, "k", 0, 8),
        g.req_set_quantity(session, store, products[1], 3, id_=9), g.req_remove_item(session, store, p, 10),
        g.req_clear_cart(session, store, 11), g.req_checkout(session, store, 1, "pay", 12),
        g.req_list_orders(session, 13), g.req_set_product(products[2], price=100, id_=14),
    ]
    return [r.SerializeToString() for r in reqs]


def mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(6)
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
        elif op == 3 and b:
            del b[rng.randrange(len(b))]
        elif op == 4 and b:
            i = rng.randrange(len(b))
            b[i:i] = b[i:i + rng.randint(1, 16)] * rng.randint(1, 8)
        elif op == 5:
            b[rng.randrange(len(b) + 1):] = b""
    return bytes(b)


KINDS = {"random": 20, "mutated": 30, "truncated": 12, "huge-prefix": 8, "at-limit": 2, "header-only": 6,
         "garbage-then-valid": 10, "pipeline-and-vanish": 8, "byte-by-byte": 4, "partial-frame": 4,
         "unknown-fields": 2}

# A partial-frame attack holds its connection until the server cuts it off
# (seconds, where the others take milliseconds): at most this many at once,
# enough to pass the unfinished-frame budget (20 x 4 MiB > 64 MiB).
MAX_PARTIAL_AT_ONCE = 20


# What the memory phase runs: the attacks whose cost the unfinished-frame
# budget and the request field limit bound, and legal frames at the limit.
MEMORY_KINDS = ("partial-frame", "unknown-fields", "at-limit")


def reset_peak_rss(pid: int) -> None:
    """Sets VmHWM back to the current VmRSS (Linux clear_refs, value 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


class Settings:
    """What the attacks need to know about the daemon's limits."""
    frame_read_timeout = 5.0
    partial_slots = threading.BoundedSemaphore(MAX_PARTIAL_AT_ONCE)


def attacker(index: int, path: str, deadline: float, max_inputs: int, valid: list[bytes],
             counters: Counters, stop: threading.Event, kinds: list[str]) -> None:
    rng = random.Random(0x9E55 + index)
    weights = [KINDS[k] for k in kinds]
    while not stop.is_set() and time.monotonic() < deadline and counters.total() < max_inputs:
        kind = rng.choices(kinds, weights=weights)[0]
        slot = False
        if kind == "partial-frame":
            slot = Settings.partial_slots.acquire(blocking=False)
            if not slot:
                if len(kinds) == 1:
                    time.sleep(0.05)
                    continue
                kind = rng.choices([k for k in kinds if k != "partial-frame"],
                                   weights=[KINDS[k] for k in kinds if k != "partial-frame"])[0]
        try:
            with g.Conn(path, timeout=5) as c:
                run_attack(kind, c, rng, valid, counters)
        except (OSError, g.ConnectionClosed):
            # The server may close or reset a connection it gave up on.
            pass
        except Exception as exc:  # a bug in this script, or an unreadable answer
            counters.note(f"{kind}: {type(exc).__name__}: {exc}")
        finally:
            if slot:
                Settings.partial_slots.release()


def run_attack(kind: str, c: g.Conn, rng: random.Random, valid: list[bytes], counters: Counters) -> None:
    if kind == "random":
        data = rng.randbytes(rng.randint(1, 8192))
        c.send(data)
        counters.add(kind, len(data))
        if rng.random() < 0.5:
            c.sock.shutdown(socket.SHUT_WR)
            drain(c)
    elif kind == "mutated":
        frames = b"".join(
            (g.frame(m) if rng.random() < 0.7 else g.LEN.pack(rng.randrange(len(m) + 8)) + m)
            for m in (mutate(rng, rng.choice(valid)) for _ in range(rng.randint(1, 8))))
        c.send(frames)
        counters.add(kind, len(frames))
        if rng.random() < 0.7:
            c.sock.shutdown(socket.SHUT_WR)
            drain(c)
    elif kind == "truncated":
        body = rng.choice(valid)
        data = g.frame(body)[:rng.randint(1, 4 + len(body) - 1)]
        c.send(data)
        counters.add(kind, len(data))
    elif kind == "huge-prefix":
        n = rng.choice([g.MAX_FRAME + 1, 1 << 24, 1 << 31, (1 << 32) - 1, rng.randrange(g.MAX_FRAME + 1, 1 << 32)])
        data = g.LEN.pack(n) + rng.randbytes(rng.randint(0, 64))
        c.send(data)
        counters.add(kind, len(data))
        # Expected: Response {id 0, RESOURCE_EXHAUSTED}, then the server
        # closes; a reset instead of the answer is allowed (PROTOCOL.md §11).
        try:
            resp = c.recv_response()
        except g.ConnectionClosed:
            return
        code, _ = g.status(resp)
        if resp.id != 0 or code != g.RESOURCE_EXHAUSTED:
            counters.note(f"huge-prefix {n}: got id {resp.id} code {code}, not id 0 RESOURCE_EXHAUSTED")
    elif kind == "at-limit":
        # A frame of exactly the maximum: legal. Either a whole one (an
        # unknown field of ~4 MiB, answered UNIMPLEMENTED) or most of one.
        # Field 9999 (length-delimited): no method has it. (Field 31, used
        # here first, became CancelWatch: its zeros were read as a message
        # of too many fields, and every whole at-limit frame was refused.)
        tag = encode_varint(9999 << 3 | 2)
        pad = g.MAX_FRAME - 2 - len(tag) - 4
        body = b"\x08\x2a" + tag + encode_varint(pad) + bytes(pad)
        body = body[:g.MAX_FRAME]
        if rng.random() < 0.5:
            data = g.frame(body)
            c.send(data)
            counters.add(kind, len(data))
            resp = c.recv_response()
            code, message = g.status(resp)
            if resp.id == 0 and code == g.RESOURCE_EXHAUSTED and "is the largest" in message:
                # Many frames this size arriving at once pass the
                # unfinished-frame budget (16 of 4 MiB fill 64 MiB): then the
                # largest holders are closed, maybe this one (PROTOCOL.md §11).
                counters.outcome("whole at-limit frames cut off by the unfinished-frame budget")
            elif resp.id != 42 or code != g.UNIMPLEMENTED:
                counters.note(f"at-limit: got id {resp.id} code {code}, not id 42 UNIMPLEMENTED")
        else:
            data = g.LEN.pack(g.MAX_FRAME) + body[:rng.randint(0, 1 << 20)]
            c.send(data)
            counters.add(kind, len(data))
    elif kind == "header-only":
        data = g.frame(rng.choice(valid))[:rng.randint(1, 3)]
        c.send(data)
        counters.add(kind, len(data))
    elif kind == "garbage-then-valid":
        # A frame that is no Request gets id 0 INVALID_ARGUMENT, and the
        # connection goes on: the next request is answered.
        garbage = b"\xff" * rng.randint(1, 40)
        data = g.frame(garbage) + g.frame(g.req_server_info(77).SerializeToString())
        c.send(data)
        counters.add(kind, len(data))
        first = c.recv_response()
        second = c.recv_response()
        if first.id != 0 or g.status(first)[0] != g.INVALID_ARGUMENT:
            counters.note(f"garbage-then-valid: first answer id {first.id} code {g.status(first)[0]}")
        if second.id != 77 or g.status(second)[0] != g.OK:
            counters.note(f"garbage-then-valid: second answer id {second.id} code {g.status(second)[0]}")
    elif kind == "pipeline-and-vanish":
        # Many requests (some whole stores) and no reading, then a hard close.
        data = b"".join(g.frame(rng.choice(valid)) for _ in range(rng.randint(10, 300)))
        c.send(data)
        counters.add(kind, len(data))
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    elif kind == "partial-frame":
        # Most of a frame (up to 4 MiB - 1 bytes of 4 MiB), then nothing:
        # the server must cut the connection off, after its frame read
        # timeout or sooner when the unfinished-frame budget is spent, with
        # at most one id 0 RESOURCE_EXHAUSTED answer.
        length = g.MAX_FRAME if rng.random() < 0.7 else rng.randint(1 << 16, g.MAX_FRAME)
        sent = length + 4 - rng.randint(1, 4096)
        body = g.frame(g.req_server_info(79).SerializeToString())[4:]
        data = g.LEN.pack(length) + (body + bytes(length))[:sent - 4]
        c.send(data)
        counters.add(kind, len(data))
        started = time.monotonic()
        limit = Settings.frame_read_timeout + 10
        c.sock.settimeout(limit)
        try:
            resp = c.recv_response()
        except socket.timeout:
            counters.note(f"partial-frame: not cut off within {limit:.0f} s")
            return
        except g.ConnectionClosed:
            counters.outcome("partial frames closed without an answer")
            return
        code, message = g.status(resp)
        if resp.id != 0 or code != g.RESOURCE_EXHAUSTED:
            counters.note(f"partial-frame: got id {resp.id} code {code}, not id 0 RESOURCE_EXHAUSTED")
        elif "did not arrive within" in message:
            counters.outcome("partial frames cut off by the frame read timeout")
        elif "is the largest" in message:
            counters.outcome("partial frames cut off by the unfinished-frame budget")
        else:
            counters.note(f"partial-frame: RESOURCE_EXHAUSTED for no reason given: {message}")
        try:
            c.recv_frame()
            counters.note("partial-frame: another frame after RESOURCE_EXHAUSTED")
        except socket.timeout:
            counters.note(f"partial-frame: not closed within {limit:.0f} s of its RESOURCE_EXHAUSTED")
        except g.ConnectionClosed:
            pass
        if time.monotonic() - started > limit:
            counters.note("partial-frame: cut off late")
    elif kind == "unknown-fields":
        # A request of far more fields than the server reads: 2-byte fields
        # unknown to the schema, or a known field repeated inside the method's
        # message, up to 4 MiB. Refused unread (id 0 INVALID_ARGUMENT); the
        # connection goes on.
        n = rng.choice([(g.MAX_FRAME - 8) // 2, rng.randint(257, 1 << 20)])
        if rng.random() < 0.5:
            body = b"\x08\x2b" + b"\x18\x01" * n   # id 43, field 3 (unknown)
        else:
            inner = b"\x20\x01" * n                  # get_store.include_products again and again
            body = b"\x08\x2b\x62" + encode_varint(len(inner)) + inner
        data = g.frame(body) + g.frame(g.req_server_info(44).SerializeToString())
        c.send(data)
        counters.add(kind, len(data))
        first = c.recv_response()
        second = c.recv_response()
        if first.id != 0 or g.status(first)[0] != g.INVALID_ARGUMENT:
            counters.note(f"unknown-fields: first answer id {first.id} code {g.status(first)[0]}, not id 0 INVALID_ARGUMENT")
        if second.id != 44 or g.status(second)[0] != g.OK:
            counters.note(f"unknown-fields: second answer id {second.id} code {g.status(second)[0]}")
    elif kind == "byte-by-byte":
        data = g.frame(rng.choice(valid))
        cut = rng.randint(1, len(data))
        for i in range(cut):
            c.send(data[i:i + 1])
            time.sleep(0.001)
        counters.add(kind, cut)


def encode_varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def drain(c: g.Conn, limit: float = 2.0) -> None:
    """Reads answers until the server closes, for at most `limit` seconds."""
    c.sock.settimeout(limit)
    end = time.monotonic() + limit
    try:
        while time.monotonic() < end and c.sock.recv(1 << 16):
            pass
    except (OSError, socket.timeout):
        pass


class GoodClient(threading.Thread):
    """One polite client: checks the answers it gets, counts every failure."""

    def __init__(self, path: str, expected_cities: int, spb_store: str, product: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.path, self.expected_cities, self.spb_store, self.product = path, expected_cities, spb_store, product
        self.stop = stop
        self.calls = 0
        self.errors: list[str] = []
        self.worst_latency = 0.0

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.errors.append(message)

    def timed(self, c: g.Conn, req) -> g.service_pb2.Response:
        t = time.monotonic()
        resp = c.call(req)
        self.worst_latency = max(self.worst_latency, time.monotonic() - t)
        self.calls += 1
        return resp

    def run(self) -> None:
        try:
            c = g.Conn(self.path, timeout=10)
        except OSError as exc:
            self.errors.append(f"cannot connect: {exc}")
            return
        try:
            session = g.expect_ok(self.timed(c, g.req_open_session()), "OpenSession").open_session.session
            quantity = 0
            n = 0
            while not self.stop.is_set():
                n += 1
                try:
                    cities = g.expect_ok(self.timed(c, g.req_list_cities()), "ListCities").list_cities.cities
                    self.check(len(cities) == self.expected_cities, f"ListCities: {len(cities)} cities")
                    store = g.expect_ok(self.timed(c, g.req_get_store("SPB")), "GetStore").get_store.store
                    self.check(store.summary.uid == self.spb_store, f"GetStore SPB: {store.summary.uid}")
                    if quantity >= 90:
                        g.expect_ok(self.timed(c, g.req_set_quantity(session, self.spb_store, self.product, 0)),
                                    "SetQuantity 0")
                        quantity = 0
                    added = g.expect_ok(self.timed(c, g.req_add_item(session, self.spb_store, self.product, 1,
                                                                     key=f"good-{n}")), "AddItem").add_item.cart
                    quantity += 1
                    lines = {l.product_uid: l.quantity for l in added.lines}
                    self.check(lines.get(self.product) == quantity, f"AddItem: quantity {lines} not {quantity}")
                    cart = g.expect_ok(self.timed(c, g.req_get_cart(session, self.spb_store)), "GetCart").get_cart.cart
                    lines = {l.product_uid: l.quantity for l in cart.lines}
                    self.check(lines.get(self.product) == quantity, f"GetCart: quantity {lines} not {quantity}")
                except (RuntimeError, OSError, g.ConnectionClosed) as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    if isinstance(exc, (OSError, g.ConnectionClosed)):
                        return  # the connection is gone: nothing more to check on it
                time.sleep(0.01)
        finally:
            c.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groserd", required=True, help="the groserd binary")
    ap.add_argument("--seconds", type=float, default=60.0, help="attack duration (default 60)")
    ap.add_argument("--connections", type=int, default=50, help="attacking connections at once (default 50)")
    ap.add_argument("--max-inputs", type=int, default=500_000, help="stop after this many bad inputs")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds of attack before the first VmRSS figure (default: a fifth of --seconds, at most 15)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory (socket, data, log)")
    ap.add_argument("--kinds", default="", help="comma-separated attack kinds to use (default: all)")
    ap.add_argument("--frame-read-timeout", type=float, default=5.0,
                    help="the daemon's --frame-read-timeout in seconds (default 5, its default)")
    ap.add_argument("--memory-seconds", type=float, default=None,
                    help="length of the memory phase after the mixed attack (default: a third of --seconds, 5 to 20)")
    ap.add_argument("--budget", type=int, default=64 * 1024 * 1024,
                    help="the daemon's --max-unfinished-frame-bytes (default 67108864, its default)")
    args = ap.parse_args()
    g.install_signal_exit()
    warmup = args.warmup if args.warmup is not None else min(15.0, args.seconds / 5)
    memory_seconds = args.memory_seconds if args.memory_seconds is not None else max(5.0, min(20.0, args.seconds / 3))
    kinds = [k for k in args.kinds.split(",") if k] or list(KINDS)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        ap.error(f"unknown kinds {unknown}; known: {', '.join(KINDS)}")

    Settings.frame_read_timeout = args.frame_read_timeout
    directory = g.make_temp_dir("gsr-tort-")
    daemon = g.Daemon(args.groserd, directory,
                      extra=["--frame-read-timeout", str(args.frame_read_timeout),
                             "--max-unfinished-frame-bytes", str(args.budget)])
    failures: list[str] = []
    try:
        daemon.start()
        time.sleep(0.5)
        rss_start = daemon.rss_kb()
        with g.Conn(daemon.socket) as c:
            cities = g.expect_ok(c.call(g.req_list_cities()), "ListCities").list_cities.cities
            spb = g.expect_ok(c.call(g.req_get_store("SPB", include_products=True)), "GetStore").get_store.store
            attack_session = g.expect_ok(c.call(g.req_open_session()), "OpenSession").open_session.session
        shelves = [s for d in spb.departments for s in d.shelves]
        in_stock = [p.uid for s in shelves for p in s.products if not p.out_of_stock]
        valid = valid_requests(attack_session, spb.summary.uid, in_stock[5:], shelves[0].uid)
        g.log(TOOL, f"groserd pid {daemon.pid} on {daemon.socket}; {len(cities)} cities; "
                    f"{args.connections} attacking connections for {args.seconds:.0f} s (warm-up {warmup:.0f} s)")

        stop = threading.Event()
        counters = Counters()
        good = GoodClient(daemon.socket, len(cities), spb.summary.uid, in_stock[0], stop)
        good.start()
        started = time.monotonic()
        deadline = started + args.seconds
        attackers = [threading.Thread(target=attacker, daemon=True,
                                      args=(i, daemon.socket, deadline, args.max_inputs, valid, counters, stop,
                                            kinds))
                     for i in range(args.connections)]
        for t in attackers:
            t.start()

        rss_warm = None
        rss_peak = 0
        while any(t.is_alive() for t in attackers):
            time.sleep(0.5)
            rss = daemon.rss_kb()
            if rss is None:
                failures.append("groserd died during the attack")
                break
            rss_peak = max(rss_peak, rss)
            if rss_warm is None and time.monotonic() - started >= warmup:
                rss_warm = rss
            if time.monotonic() > deadline + 30:
                failures.append("attackers did not stop within 30 s of the deadline")
                break
        for t in attackers:
            t.join(timeout=10)
        hwm_mixed = g.read_status_kb(daemon.pid, "VmHWM") if daemon.alive() else None

        # The memory phase: only the attacks the unfinished-frame budget and
        # the field limit bound, from a fresh peak (VmHWM reset), while the
        # good client goes on. Other attacks cost memory the budget does not
        # cover (pipeline-and-vanish: answers and queued cart requests).
        memory_kinds = [k for k in kinds if k in MEMORY_KINDS]
        hwm = None
        if memory_kinds and daemon.alive() and not failures:
            reset_peak_rss(daemon.pid)
            phase_deadline = time.monotonic() + memory_seconds
            phase = [threading.Thread(target=attacker, daemon=True,
                                      args=(1000 + i, daemon.socket, phase_deadline, args.max_inputs, valid, counters,
                                            stop, memory_kinds))
                     for i in range(args.connections)]
            for t in phase:
                t.start()
            while any(t.is_alive() for t in phase):
                time.sleep(0.5)
                rss = daemon.rss_kb()
                if rss is None:
                    failures.append("groserd died during the memory phase")
                    break
                rss_peak = max(rss_peak, rss)
                if time.monotonic() > phase_deadline + 30:
                    failures.append("memory-phase attackers did not stop within 30 s of the deadline")
                    break
            for t in phase:
                t.join(timeout=10)
            hwm = g.read_status_kb(daemon.pid, "VmHWM") if daemon.alive() else None
        stop.set()
        good.join(timeout=15)
        elapsed = time.monotonic() - started
        time.sleep(1.0)  # let the loops finish closing connections
        alive = daemon.alive()
        rss_end = daemon.rss_kb()
        if rss_warm is None:
            rss_warm = rss_end

        # One more polite round after the storm: the daemon still answers.
        if alive:
            try:
                with g.Conn(daemon.socket) as c:
                    n = len(g.expect_ok(c.call(g.req_list_cities()), "ListCities").list_cities.cities)
                    if n != len(cities):
                        failures.append(f"after the attack ListCities has {n} cities")
            except Exception as exc:  # noqa: BLE001
                failures.append(f"after the attack the daemon does not answer: {exc}")
        else:
            failures.append("groserd is not running after the attack")

        code = daemon.terminate(timeout=15)
        if code != 0:
            failures.append(f"SIGTERM: groserd exited with {code} (expected 0)")
        crash_words = [w for w in ("Fatal error", "Crash", "Segmentation", "assertion", "precondition")
                       if w in open(daemon.log_path, errors="replace").read()]
        if crash_words:
            failures.append(f"the daemon's log mentions {crash_words}")

        total = counters.total()
        print()
        print(f"torture: {elapsed:.0f} s, {args.connections} attacking connections")
        print(f"torture: bad inputs sent: {total} ({counters.bytes / 1e6:.1f} MB): "
              + ", ".join(f"{k} {v}" for k, v in sorted(counters.by_kind.items())))
        for what, n in sorted(counters.outcomes.items()):
            print(f"torture: {what}: {n}")
        print(f"torture: daemon stayed up: {'yes' if alive else 'NO'}; SIGTERM exit status: {code}")
        print(f"torture: well-behaved client: {good.calls} calls, {len(good.errors)} errors, "
              f"worst latency {good.worst_latency * 1000:.0f} ms")
        for e in good.errors[:10]:
            print(f"torture:   client error: {e}")
        if good.calls == 0:
            failures.append("the well-behaved client made no call")
        if good.errors:
            failures.append(f"the well-behaved client saw {len(good.errors)} error(s)")
        if counters.unexpected:
            failures.append(f"{len(counters.unexpected)} protocol expectation(s) broken")
            for u in counters.unexpected[:10]:
                print(f"torture:   unexpected: {u}")
        limit = int(rss_warm * 1.5) + 20 * 1024
        print(f"torture: VmRSS: start {rss_start} kB, after {warmup:.0f} s warm-up {rss_warm} kB, "
              f"peak {rss_peak} kB, end {rss_end} kB (limit {limit} kB = warm-up + 50% + 20 MiB)")
        if rss_end is not None and rss_end > limit:
            failures.append(f"VmRSS grew from {rss_warm} kB to {rss_end} kB")
        hwm_limit = 2 * rss_start + args.budget // 1024
        print(f"torture: VmHWM (peak resident) of the mixed attack: {hwm_mixed} kB")
        if memory_kinds:
            print(f"torture: VmHWM of the {memory_seconds:.0f} s memory phase ({', '.join(memory_kinds)}): {hwm} kB "
                  f"(limit {hwm_limit} kB = 2 x idle {rss_start} kB + unfinished-frame budget {args.budget // 1024} kB)")
            if hwm is None:
                failures.append("no VmHWM figure for the memory phase")
            elif hwm > hwm_limit:
                failures.append(f"peak resident memory {hwm} kB is over 2 x idle + budget ({hwm_limit} kB)")
    except KeyboardInterrupt:
        failures.append("interrupted")
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        failures.append("the torture script failed")
    finally:
        daemon.stop()
        if not failures and not args.keep:
            g.remove_tree(directory)
        else:
            print(f"torture: kept {directory} (groserd.log, data)")
    if failures:
        for f in failures:
            print(f"torture: FAIL: {f}")
        return 1
    print("torture: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
