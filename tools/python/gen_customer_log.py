"""Writes a customer log of many sessions straight into groserd's data
directory, for tools/bench-customer-startup's --sessions shape: SESSIONS
guest sessions, each with one cart of the given products (one line each,
quantity 1; no cart when no product is given), placed on their shards the way groserd places them (the key's
first byte modulo the shard count). The records are groserd's own binary
form (CustomerRecordCodec in Sources/GroserStorage/Customers/CustomerState.swift,
framed as CustomerLog frames them: length u32, crc32c u32, payload).

    python3 tools/python/gen_customer_log.py DATA_DIR SESSIONS STORE_UID PRODUCT_UID...

DATA_DIR/customers must hold groserd's `shards` file (start groserd once on
the directory first); the segment written is log-00000500 of each shard.
"""
import os
import struct
import sys
import time

import crc32c


def framed(payload: bytes) -> bytes:
    return struct.pack("<II", len(payload), crc32c.crc32c(payload)) + payload


def text(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def main() -> None:
    data, sessions, store = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    products = sys.argv[4:]
    customers = os.path.join(data, "customers")
    with open(os.path.join(customers, "shards")) as f:
        shards = int(f.read().strip())
    now = int(time.time())
    lines = b"".join(text(p) + struct.pack("<Iq", 1, 100 + i) for i, p in enumerate(products))
    cart_tail = text(store) + struct.pack("<QqI", len(products), now, len(products)) + lines
    outs = [open(os.path.join(customers, f"shard-{i}", "log-00000500"), "wb") for i in range(shards)]
    buffers = [[] for _ in range(shards)]
    for _ in range(sessions):
        key = os.urandom(32)
        shard = key[0] % shards
        # kind 1: a session; kind 2: its cart, version = one add per line.
        buffers[shard].append(framed(b"\x01" + key + struct.pack("<q", now)))
        if products:
            buffers[shard].append(framed(b"\x02" + key + cart_tail))
        if len(buffers[shard]) >= 20000:
            outs[shard].write(b"".join(buffers[shard]))
            buffers[shard].clear()
    for shard in range(shards):
        outs[shard].write(b"".join(buffers[shard]))
        outs[shard].close()


if __name__ == "__main__":
    main()
