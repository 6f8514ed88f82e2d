#!/usr/bin/env python3
# python3 Tests/Fuzz/make-regressions.py Tests/Fuzz/regressions
# Writes the regression inputs: inputs for bugs found by torture, by
# measurement and by review, reconstructed for the fuzz harness (64 KiB frames).
import struct, sys, os
out = sys.argv[1]

def varint(n):
    b = bytearray()
    while True:
        x = n & 0x7f; n >>= 7
        if n: b.append(x | 0x80)
        else: b.append(x); return bytes(b)

def key(field, wt): return varint(field << 3 | wt)
def u(field, n): return key(field, 0) + varint(n)
def s(field, data):
    if isinstance(data, str): data = data.encode()
    return key(field, 2) + varint(len(data)) + data
def frame(body): return struct.pack('>I', len(body)) + body
def req(id, field, body): return frame(u(1, id) + s(field, body))

SESSION = "5e55105e55105e55105e55105e55105e"
STORE = "store-spb-1"
A, B, C = "prd-spb-1-0001", "prd-spb-1-0003", "prd-spb-1-0005"
MAXQ = 2_000_000_000
def mutation(key_="", version=0):
    m = s(1, SESSION) + s(2, STORE)
    if key_: m += s(3, key_)
    if version: m += u(4, version)
    return m
def add(id, product, q, key_="", version=0): return req(id, 16, s(1, mutation(key_, version)) + s(2, product) + u(3, q))
def setq(id, product, q): return req(id, 17, s(1, mutation()) + s(2, product) + u(3, q))
CARD = s(1, "4111 1111 1111 1111") + u(2, 12) + u(3, 2030) + s(4, "123") + s(5, "IVAN PETROV")
def checkout(id, version, address, key_=""):
    b = s(1, SESSION) + s(2, STORE) + u(3, version) + s(4, address) + s(5, CARD)
    if key_: b += s(6, key_)
    return req(id, 20, b)
get_cart = lambda id: req(id, 15, s(1, SESSION) + s(2, STORE))
server_info = lambda id: req(id, 10, b"")
MAX = 64 * 1024   # FuzzHarness.maximumFrameBytes

files = {}
# LocalAttackerTests (review of the local-attacker issue): three lines of
# 2·10⁹ (--max-quantity 2000000000) made the cart's item count pass
# UInt32.max and trapped the commit thread (exit 132). Here: the three lines,
# the fourth add that passes 2³² − 1, a SetQuantity back to the maximum, and
# a checkout of the lot, so the order's counts and totals are summed too.
files["count-overflow-commit-thread-trap"] = (
    add(91, A, MAXQ) + add(92, B, MAXQ) + add(93, C, MAXQ) + add(94, A, MAXQ)
    + setq(95, A, MAXQ) + get_cart(96) + checkout(97, 3, "Невский пр., 1", "pay-97"))
# Review of the local-attacker issue: 4 MB delivery addresses were stored and
# sent back by every ListOrders. Now each string has a maximum; over it is
# INVALID_ARGUMENT naming the field. Here: an address of 60 000 bytes, an
# idempotency key and a session over theirs, then the limits exactly.
files["overlong-strings-stored-and-sent-back"] = (
    add(101, A, 1) + checkout(102, 1, "a" * 60_000) + checkout(103, 1, "Садовая, 5", "k" * 129)
    + req(104, 15, s(1, "0" * 65) + s(2, STORE))
    + checkout(105, 1, "a" * 1024, "k" * 128) + req(106, 21, s(1, SESSION)))
# Issue 8 (measured; now tools/torture unknown-fields): 2 M unknown fields in
# one request took groserd's peak from 22 to 206 MB inside protobuf-c; now
# more than 256 fields at any level is INVALID_ARGUMENT id 0, refused before
# unpacking. Here: 257 unknown fields at the top, 257 inside an AddItem's
# CartMutation, 16 000 in one frame, and 256 (allowed), then a ServerInfo
# that must still be answered.
unknown = lambda n: u(9999, 0) * n
files["too-many-fields-protobuf-c-memory"] = (
    frame(u(1, 111) + s(10, b"") + unknown(257))
    + req(112, 16, s(1, mutation() + unknown(257)) + s(2, A) + u(3, 1))
    + frame(u(1, 113) + unknown(16_000))
    + frame(u(1, 114) + s(10, b"") + unknown(254))
    + server_info(115))
# Issue 8: a prefix over the maximum must be refused before anything is
# buffered (id 0 RESOURCE_EXHAUSTED, then the connection ends). Here: the
# maximum plus one, after a request that must be answered first.
files["frame-prefix-over-maximum-by-one"] = server_info(121) + struct.pack('>I', MAX + 1) + b"\x08\x01" * 40
# Issue 8 (now tools/torture partial-frame): a frame of the maximum that
# stops one byte short held twice its size, the decoder having doubled its
# buffer past the frame; it now grows to the frame's size only. Here: a
# whole frame of exactly the maximum (one unknown field 9999 filling it,
# answered UNIMPLEMENTED), then the same frame one byte short.
pad_tag = key(9999, 2)
def at_limit(id, tag):
    head = u(1, id)
    pad = MAX - len(head) - len(tag) - 3   # a 3-byte length
    body = head + tag + varint(pad) + bytes(pad)
    assert len(body) == MAX, len(body)
    return frame(body)
whole = at_limit(131, pad_tag)
files["partial-frame-at-maximum"] = whole + at_limit(132, pad_tag)[:-1]
# tools/torture (4e365b7): its at-limit frame carried its padding as field
# 31, which became CancelWatch; the zeros were read as a CancelWatch of too
# many fields and every such frame was refused INVALID_ARGUMENT id 0, which
# torture counted as 50 broken expectations. The daemon was right; the input
# stays: field 31 of zeros, of the harness's maximum, then the same with a
# field no method has, then a real CancelWatch of no watch.
files["at-limit-frame-field-31-cancel-watch-zeros"] = (
    at_limit(42, key(31, 2)) + at_limit(43, pad_tag) + req(44, 31, u(1, 42)))

os.makedirs(out, exist_ok=True)
for name, data in files.items():
    with open(os.path.join(out, name), "wb") as f: f.write(data)
    print(f"{name}: {len(data)} bytes")
