#!/usr/bin/env python3
"""Misbehaving clients for tools/bench-slow-clients.

Opens N slow-loris connections that send a valid request one byte a second,
and M connections that pipeline large requests and never read an answer.
Runs until killed (SIGTERM) or --seconds pass; prints what it did on exit.
Only talks to the Unix socket it is given.
"""
import argparse
import resource
import selectors
import signal
import socket
import struct
import sys
import time

# GetStore {city_code: "SPB", include_products: true} with id 1, framed.
_BODY = bytes([0x08, 0x01, 0x62, 0x07, 0x0a, 0x03]) + b"SPB" + bytes([0x20, 0x01])
FRAME = struct.pack(">I", len(_BODY)) + _BODY


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--slow", type=int, default=1000, help="slow-loris connections")
    ap.add_argument("--deaf", type=int, default=100, help="connections that never read")
    ap.add_argument("--seconds", type=float, default=120)
    args = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.slow + args.deaf + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(want, soft)), hard))

    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    signal.signal(signal.SIGINT, lambda *_: stop.__setitem__(0, True))

    slow, deaf = [], []
    refused = 0
    for _ in range(args.slow):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(args.socket)
            s.setblocking(False)
            slow.append([s, 0])
        except OSError:
            refused += 1
    for _ in range(args.deaf):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(args.socket)
            s.setblocking(False)
            deaf.append(s)
        except OSError:
            refused += 1
    print(f"slow_clients: {len(slow)} slow-loris and {len(deaf)} never-reading connections open"
          f" ({refused} refused)", flush=True)

    bytes_trickled = 0
    frames_pushed = 0
    closed_by_server = 0
    deadline = time.monotonic() + args.seconds
    next_tick = time.monotonic()
    while not stop[0] and time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_tick:
            next_tick = now + 1.0
            for entry in slow:
                s, pos = entry
                if s is None:
                    continue
                try:
                    s.send(FRAME[pos:pos + 1])
                    bytes_trickled += 1
                    entry[1] = (pos + 1) % len(FRAME)
                except BlockingIOError:
                    pass
                except OSError:
                    closed_by_server += 1
                    s.close()
                    entry[0] = None
        # Deaf connections: push requests while the socket takes them.
        for i, s in enumerate(deaf):
            if s is None:
                continue
            try:
                for _ in range(64):
                    s.send(FRAME)
                    frames_pushed += 1
            except BlockingIOError:
                pass
            except OSError:
                closed_by_server += 1
                s.close()
                deaf[i] = None
        time.sleep(0.05)
    print(f"slow_clients: trickled {bytes_trickled} bytes, pushed {frames_pushed} unread requests,"
          f" {closed_by_server} connections closed by the server", flush=True)


if __name__ == "__main__":
    sys.exit(main())
