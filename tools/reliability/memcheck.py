#!/usr/bin/env python3
"""Runs groserd under valgrind memcheck through a short client session and
reports leaks. Run through tools/memcheck, which installs and builds first.

The session: ServerInfo, ListCities, GetStore (with products), GetShelf,
OpenSession, AddItem, SetQuantity, GetCart, Checkout, ListOrders, SetProduct,
requests with errors (unknown store, bad card), undecodable frames, a
request with no method, an over-size length prefix, a connection dropped
mid-frame; then SIGTERM. The database is created before, natively, so
valgrind only has to run the daemon.

Fails (exit 1) when valgrind reports memory errors or "definitely lost"
blocks, or the daemon does not exit 0 on SIGTERM.
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as g  # noqa: E402

TOOL = "memcheck"


def session(path: str) -> int:
    """The client session; returns how many requests it sent."""
    sent = 0
    with g.Conn(path, timeout=120) as c:
        def call(req, ok=True):
            nonlocal sent
            sent += 1
            resp = c.call(req)
            if ok:
                g.expect_ok(resp, str(req.WhichOneof("method")))
            return resp

        call(g.req_server_info())
        cities = call(g.req_list_cities()).list_cities.cities
        spb = call(g.req_get_store("SPB", include_products=True)).get_store.store
        shelf = spb.departments[0].shelves[0]
        call(g.req_get_shelf(shelf.uid))
        call(g.req_get_store(store_uid=cities[0].default_store_uid))
        store = spb.summary.uid
        products = [p.uid for d in spb.departments for s in d.shelves for p in s.products if not p.out_of_stock]
        s = call(g.req_open_session()).open_session.session
        call(g.req_add_item(s, store, products[0], 2, key="a1"))
        call(g.req_add_item(s, store, products[0], 2, key="a1"))  # an idempotent replay
        call(g.req_add_item(s, store, products[1], 1))
        call(g.req_set_quantity(s, store, products[1], 4))
        cart = call(g.req_get_cart(s, store)).get_cart.cart
        call(g.req_checkout(s, store, cart.version, key="pay"))
        call(g.req_list_orders(s))
        call(g.req_set_product(products[2], price=12345, stock=7))
        call(g.req_get_store("SPB", include_products=True))
        # Errors.
        call(g.req_get_store("NOPE"), ok=False)
        call(g.req_get_shelf(""), ok=False)
        call(g.req_add_item(s, "no-such-store", products[0]), ok=False)
        call(g.req_add_item(s, store, products[0], 1000), ok=False)
        call(g.req_checkout(s, store, 99, card_number="1234"), ok=False)
        call(g.req_get_cart("0" * 32, store), ok=False)
        empty = g.service_pb2.Request(id=900)
        call(empty, ok=False)
        # Frames that are no Request: answered with id 0.
        for garbage in (b"\xff\xff\xff", b"\x0a\x05\x01", b"\x08"):
            c.send(g.frame(garbage))
            sent += 1
            resp = c.recv_response()
            if resp.id != 0 or g.status(resp)[0] != g.INVALID_ARGUMENT:
                raise RuntimeError(f"garbage frame answered id {resp.id} code {g.status(resp)[0]}")
        call(g.req_server_info())
    # An over-size length prefix: RESOURCE_EXHAUSTED, then the server closes.
    with g.Conn(path, timeout=120) as c:
        c.send(g.LEN.pack(0xFFFFFFFF) + b"\x00" * 16)
        sent += 1
        try:
            resp = c.recv_response()
            if g.status(resp)[0] != g.RESOURCE_EXHAUSTED:
                raise RuntimeError(f"over-size frame answered {g.status(resp)}")
        except g.ConnectionClosed:
            pass
    # Dropped mid-frame, and a pipelined burst left unread.
    with g.Conn(path, timeout=120) as c:
        c.send(g.frame(g.req_list_cities(1).SerializeToString())[:6])
        sent += 1
    with g.Conn(path, timeout=120) as c:
        c.send(b"".join(g.frame(g.req_get_store("MSK", include_products=True, id_=i).SerializeToString())
                        for i in range(1, 21)))
        sent += 20
        c.sock.shutdown(socket.SHUT_WR)
    return sent


def summary(log_text: str) -> dict[str, int]:
    out = {}
    for kind in ("definitely lost", "indirectly lost", "possibly lost", "still reachable"):
        m = re.search(rf"{kind}: ([\d,]+) bytes in ([\d,]+) blocks", log_text)
        out[kind] = int(m.group(1).replace(",", "")) if m else 0
        out[kind + " blocks"] = int(m.group(2).replace(",", "")) if m else 0
    m = re.search(r"ERROR SUMMARY: ([\d,]+) errors from [\d,]+ contexts \(suppressed: ([\d,]+) from", log_text)
    out["errors"] = int(m.group(1).replace(",", "")) if m else -1
    out["suppressed"] = int(m.group(2).replace(",", "")) if m else 0
    return out


def loss_records(log_text: str, kind: str) -> list[str]:
    """The loss records of `kind` ("definitely"), each with its stack."""
    records = []
    for block in re.split(r"\n==\d+== \n", log_text):
        if f"are {kind} lost in loss record" in block:
            records.append(re.sub(r"==\d+== ", "", block).strip())
    return records


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groserd", required=True)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    g.install_signal_exit()

    directory = g.make_temp_dir("gsr-memck-")
    failures: list[str] = []
    log_path = os.path.join(directory, "valgrind.log")
    daemon = g.Daemon(args.groserd, directory)
    try:
        # Create and fill the database natively: under valgrind that alone takes minutes.
        daemon.start()
        if daemon.terminate() != 0:
            raise RuntimeError("groserd did not stop cleanly before the valgrind run")
        daemon = g.Daemon(args.groserd, directory, wrapper=[
            "valgrind", "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
            "--errors-for-leak-kinds=definite", "--num-callers=40", "--track-origins=no",
            "--suppressions=" + os.path.join(os.path.dirname(os.path.abspath(__file__)), "valgrind.supp"),
            f"--log-file={log_path}"])
        g.log(TOOL, "starting groserd under valgrind (slow)")
        daemon.start(timeout=300)
        sent = session(daemon.socket)
        g.log(TOOL, f"session done: {sent} requests and bad frames; SIGTERM")
        code = daemon.terminate(timeout=300)
        if code != 0:
            failures.append(f"groserd under valgrind exited with {code} on SIGTERM")
        text = open(log_path, errors="replace").read()
        s = summary(text)
        definite = loss_records(text, "definitely")
        protobuf = [r for r in definite if "protobuf_c" in r or "Groser__V1" in r or "groser__v1" in r]
        print()
        print(f"memcheck: valgrind memcheck of groserd ({args.groserd}); {sent} requests and bad frames, then SIGTERM")
        print(f"memcheck: memory errors: {s['errors'] - len(definite) if s['errors'] >= 0 else 'unknown'} "
              f"({s['suppressed']} suppressed as known false positives: tools/reliability/valgrind.supp)")
        print(f"memcheck: definitely lost: {s['definitely lost']} bytes in {s['definitely lost blocks']} blocks "
              f"({len(protobuf)} record(s) from protobuf-c allocations)")
        print(f"memcheck: indirectly lost: {s['indirectly lost']} bytes; possibly lost: {s['possibly lost']} bytes "
              f"in {s['possibly lost blocks']} blocks; still reachable: {s['still reachable']} bytes")
        for r in definite[:5]:
            print("memcheck: --- definitely lost:\n" + "\n".join("    " + line for line in r.splitlines()[:25]))
        if s["errors"] < 0:
            failures.append("no valgrind summary (did valgrind run?)")
        elif s["errors"] - len(definite) > 0:
            failures.append(f"{s['errors'] - len(definite)} memory error(s); see {log_path}")
        if s["definitely lost"] > 0:
            failures.append(f"{s['definitely lost']} bytes definitely lost")
    except KeyboardInterrupt:
        failures.append("interrupted")
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        failures.append("the memcheck script failed")
        print(daemon.log_tail())
    finally:
        daemon.stop()
        if failures or args.keep:
            print(f"memcheck: kept {directory} (valgrind.log, groserd.log)")
        else:
            g.remove_tree(directory)
    for f in failures:
        print(f"memcheck: FAIL: {f}")
    if not failures:
        print("memcheck: passed: no memory errors, nothing definitely lost")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
