#!/usr/bin/env python3
"""Floods from another local user, measured from a victim's side (tools/attack-floods).

A real groserd (the release build) listens on a socket of group nogroup. Two
real users connect: the attacker (uid 65534, nobody) floods it one way, and
the victim (uid 65533) meanwhile runs `info` on a new connection every 20 ms
and logs in to its own account with the right password every second. Prints,
per flood: what the attacker got, the victim's info latencies (p50, p99,
max) and failures, its logins, and groserd's VmRSS idle, at the end of the
flood and after it. A flood passes when the victim's info never failed and
its p99 is under 50 ms, every login of the victim succeeded, and VmRSS after
the flood is within 20 MB of idle (docs/RELIABILITY.md §7).

The floods (issue 32):
  sessions     4 connections pipelining OpenSession as fast as they are answered
  connections  4,200 connections opened and left idle
  register     200 Registers in flight for the victim's (existing) email
  register-new 200 Registers in flight, each for a new email
  guess        wrong passwords for the victim's email, 40 in flight

Runs as root (it switches users with setpriv). The workers are this file run
by /usr/bin/python3 as the two users, from a copy in a temporary directory
they can read; they need nothing outside Python's standard library.
"""
import argparse
import json
import os
import selectors
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

ATTACKER_UID = 65534
VICTIM_UID = 65533
GROUP = 65534  # nogroup: the socket's group, and both users' only group
VICTIM_EMAIL = "victim@example.com"
VICTIM_PASSWORD = "correct horse battery staple"

# --- protobuf, by hand (the workers cannot import the generated modules) ---


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_bytes(number: int, data: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(data)) + data


def request(id_: int, method_field: int, body: bytes = b"") -> bytes:
    """One framed Request: id, and the method's message in its oneof field."""
    payload = varint(1 << 3) + varint(id_) + field_bytes(method_field, body)
    return struct.pack(">I", len(payload)) + payload


SERVER_INFO, OPEN_SESSION, REGISTER, LOGIN = 10, 14, 26, 27


def credentials(email: str, password: str, name: str = "") -> bytes:
    body = field_bytes(1, email.encode()) + field_bytes(2, password.encode())
    return body + (field_bytes(3, name.encode()) if name else b"")


def read_varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def response_status(payload: bytes) -> tuple[int, int, str]:
    """(id, status code, message) of a Response; code 0 when OK."""
    i, id_, code, message = 0, 0, 0, ""
    while i < len(payload):
        key, i = read_varint(payload, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(payload, i)
            if number == 1:
                id_ = value
        elif wire == 2:
            length, i = read_varint(payload, i)
            if number == 2:
                j, end = i, i + length
                while j < end:
                    k, j = read_varint(payload, j)
                    if k & 7 == 0:
                        v, j = read_varint(payload, j)
                        if k >> 3 == 1:
                            code = v
                    elif k & 7 == 2:
                        n, j = read_varint(payload, j)
                        if k >> 3 == 2:
                            message = payload[j:j + n].decode(errors="replace")
                        j += n
                    else:
                        j = end
            i += length
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            break
    return id_, code, message


class Frames:
    """Splits what a socket delivers into response payloads."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        out = []
        while len(self.buffer) >= 4:
            n = struct.unpack(">I", self.buffer[:4])[0]
            if len(self.buffer) < 4 + n:
                break
            out.append(bytes(self.buffer[4:4 + n]))
            del self.buffer[:4 + n]
        return out


def call_once(path: str, frame: bytes, timeout: float = 10.0) -> tuple[int, str]:
    """Connects, sends one request, reads its answer: (code, message)."""
    s = socket.socket(socket.AF_UNIX)
    try:
        # A blocking connect, as groser-client's: while the listen backlog
        # is full it waits for room instead of failing with EAGAIN.
        s.connect(path)
        s.settimeout(timeout)
        s.sendall(frame)
        frames = Frames()
        while True:
            data = s.recv(65536)
            if not data:
                return -1, "closed without an answer"
            got = frames.feed(data)
            if got:
                _, code, message = response_status(got[0])
                return code, message
    except OSError as e:
        return -2, str(e)
    finally:
        s.close()


# --- the workers, run as the two users ---


def worker_victim(path: str, seconds: float) -> dict:
    """info every 20 ms and, beside it, a login every second, each on a new connection."""
    import threading
    infos, logins, failures = [], [], {}
    counts = {"info_failures": 0, "login_failures": 0}
    deadline = time.monotonic() + seconds

    def failed(what: str, code: int, message: str) -> None:
        counts[what + "_failures"] += 1
        key = f"{what}: {code} {message}"
        failures[key] = failures.get(key, 0) + 1

    def log_in() -> None:
        n = 0
        while time.monotonic() < deadline:
            n += 1
            t0 = time.monotonic()
            code, message = call_once(path, request(n, LOGIN, credentials(VICTIM_EMAIL, VICTIM_PASSWORD)), timeout=30)
            if code == 0:
                logins.append(time.monotonic() - t0)
            else:
                failed("login", code, message)
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))

    logger = threading.Thread(target=log_in)
    logger.start()
    n = 0
    while time.monotonic() < deadline:
        n += 1
        t0 = time.monotonic()
        code, message = call_once(path, request(n, SERVER_INFO))
        if code == 0:
            infos.append(time.monotonic() - t0)
        else:
            failed("info", code, message)
        time.sleep(0.02)
    logger.join()
    return {"infos": infos, "logins": logins, "failures": failures, **counts}


def pipeline(path: str, seconds: float, connections: int, in_flight: int, make) -> dict:
    """`connections` connections, each keeping `in_flight` requests of
    `make(n)` outstanding until `seconds` pass; counts answers by status."""
    sel = selectors.DefaultSelector()
    codes: dict = {}
    examples: dict = {}
    sent = 0
    conns = []
    for _ in range(connections):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
        except OSError as e:
            codes["connect: " + e.strerror] = codes.get("connect: " + e.strerror, 0) + 1
            continue
        burst = b"".join(make(sent + k + 1) for k in range(in_flight))
        sent += in_flight
        s.sendall(burst)
        s.setblocking(False)
        state = {"frames": Frames(), "out": bytearray()}
        sel.register(s, selectors.EVENT_READ, state)
        conns.append(s)
    deadline = time.monotonic() + seconds
    while conns and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.2):
            s, state = key.fileobj, key.data
            try:
                data = s.recv(1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                s.close()
                conns.remove(s)
                codes["closed by groserd"] = codes.get("closed by groserd", 0) + 1
                continue
            answers = state["frames"].feed(data)
            for payload in answers:
                _, code, message = response_status(payload)
                codes[code] = codes.get(code, 0) + 1
                if code:
                    examples.setdefault(code, message)
            more = b"".join(make(sent + k + 1) for k in range(len(answers)))
            sent += len(answers)
            try:
                s.setblocking(True)
                s.sendall(more)
                s.setblocking(False)
            except OSError:
                pass
    for s in conns:
        s.close()
    return {"sent": sent, "answers": {str(k): v for k, v in codes.items()}, "examples": {str(k): v for k, v in examples.items()}}


def worker_attacker(path: str, flood: str, seconds: float) -> dict:
    if flood == "sessions":
        return pipeline(path, seconds, 4, 64, lambda n: request(n, OPEN_SESSION))
    if flood == "register":
        return pipeline(path, seconds, 4, 50,
                        lambda n: request(n, REGISTER, credentials(VICTIM_EMAIL, f"guess-{n:08d}", "Mallory")))
    if flood == "register-new":
        tag = os.getpid()
        return pipeline(path, seconds, 4, 50,
                        lambda n: request(n, REGISTER, credentials(f"m{tag}-{n}@example.com", "password-1234", "Mallory")))
    if flood == "guess":
        return pipeline(path, seconds, 4, 10, lambda n: request(n, LOGIN, credentials(VICTIM_EMAIL, f"guess-{n:08d}")))
    if flood == "connections":
        # Holds up to 4,200 connections, opening a new one for each that
        # groserd refuses or closes, so that any slot freed goes to the attacker.
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
        held, failed, reasons = [], {}, {}
        opened = closed = 0
        deadline = time.monotonic() + seconds
        while True:
            while len(held) < 4200:
                s = socket.socket(socket.AF_UNIX)
                try:
                    s.connect(path)
                except OSError as e:
                    failed[e.strerror] = failed.get(e.strerror, 0) + 1
                    s.close()
                    break
                s.setblocking(False)
                held.append(s)
                opened += 1
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
            for s in list(held):
                try:
                    data = s.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                closed += 1
                if len(data) > 4:
                    _, code, message = response_status(data[4:4 + struct.unpack(">I", data[:4])[0]])
                    reasons[message] = reasons.get(message, 0) + 1
                held.remove(s)
                s.close()
        open_at_end = len(held)
        for s in held:
            s.close()
        return {"opened": opened, "open_at_end": open_at_end, "connect_failed": failed,
                "closed_by_groserd": closed, "refusals": reasons}
    raise SystemExit(f"unknown flood {flood}")


# --- the orchestrator, run as root ---


def as_user(uid: int, argv: list) -> list:
    return ["setpriv", f"--reuid={uid}", f"--regid={GROUP}", "--clear-groups", "/usr/bin/python3"] + argv


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def log_bytes(directory: str) -> int:
    """Bytes of the customer log's records: each file up to its last byte
    that is not zero (a segment has zeros written ahead of its data)."""
    total = 0
    for root, _, names in os.walk(directory):
        for name in names:
            if name.startswith("log-") or name.startswith("snapshot-"):
                with open(os.path.join(root, name), "rb") as f:
                    total += len(f.read().rstrip(b"\0"))
    return total


def percentile(values: list, p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def run_flood(groserd: str, flood: str, seconds: float, extra: list, p99_bound_ms: float) -> bool:
    scratch = tempfile.mkdtemp(prefix="gsr-flood-")
    os.chmod(scratch, 0o711)
    worker = os.path.join(scratch, "floods.py")
    shutil.copy(__file__, worker)
    os.chmod(worker, 0o644)
    sock = os.path.join(scratch, "g.sock")
    log = open(os.path.join(scratch, "groserd.log"), "w")
    daemon = subprocess.Popen([groserd, "--socket", sock, "--data", os.path.join(scratch, "data"),
                               "--socket-group", str(GROUP)] + extra, stderr=log, stdout=log)
    try:
        deadline = time.monotonic() + 60
        while call_once(sock, request(1, SERVER_INFO), timeout=2)[0] != 0:
            if daemon.poll() is not None or time.monotonic() > deadline:
                print(f"floods: groserd did not start; its log: {open(log.name).read()[-2000:]}")
                return False
            time.sleep(0.1)
        # The victim's account (made before the flood, as root: any uid may register).
        code, message = call_once(sock, request(1, REGISTER, credentials(VICTIM_EMAIL, VICTIM_PASSWORD, "Victor")), timeout=30)
        if code != 0:
            print(f"floods: cannot register the victim: {code} {message}")
            return False
        time.sleep(2)
        idle = rss_kb(daemon.pid)
        customers = os.path.join(scratch, "data", "customers")
        log_before = log_bytes(customers)
        victim = subprocess.Popen(as_user(VICTIM_UID, [worker, "--worker", "victim", "--socket", sock,
                                                       "--seconds", str(seconds)]), stdout=subprocess.PIPE)
        attacker = subprocess.Popen(as_user(ATTACKER_UID, [worker, "--worker", flood, "--socket", sock,
                                                           "--seconds", str(seconds)]), stdout=subprocess.PIPE)
        peak = idle
        while victim.poll() is None:
            time.sleep(0.5)
            if daemon.poll() is not None:
                break
            peak = max(peak, rss_kb(daemon.pid))
        end = rss_kb(daemon.pid) if daemon.poll() is None else 0
        v = json.loads(victim.communicate()[0] or b"{}")
        a = json.loads(attacker.communicate()[0] or b"{}")
        time.sleep(5)
        alive = daemon.poll() is None
        after = rss_kb(daemon.pid) if alive else 0
        infos = v.get("infos", [])
        p50, p99, worst = (percentile(infos, 0.5) * 1000, percentile(infos, 0.99) * 1000,
                           max(infos, default=float("nan")) * 1000)
        logins = v.get("logins", [])
        ok = (alive and v.get("info_failures", 1) == 0 and p99 < p99_bound_ms and v.get("login_failures", 1) == 0
              and after - idle <= 20 * 1024)
        print(f"## flood: {flood} ({seconds:g} s)")
        print(f"attacker (uid {ATTACKER_UID}): {json.dumps(a, ensure_ascii=False)}")
        print(f"victim (uid {VICTIM_UID}) info: {len(infos)} answered, {v.get('info_failures')} failed; "
              f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {worst:.1f} ms")
        print(f"victim logins: {len(logins)} succeeded, {v.get('login_failures')} failed; "
              f"p50 {percentile(logins, 0.5) * 1000:.0f} ms, p99 {percentile(logins, 0.99) * 1000:.0f} ms, "
              f"max {max(logins, default=0) * 1000:.0f} ms")
        for what, count in v.get("failures", {}).items():
            print(f"  victim failure x{count}: {what}")
        print(f"groserd VmRSS: idle {idle / 1024:.1f} MB, peak {peak / 1024:.1f} MB, end of flood {end / 1024:.1f} MB, "
              f"5 s after {after / 1024:.1f} MB ({(after - idle) / 1024:+.1f} MB)")
        print(f"customer log: {log_before} → {log_bytes(customers)} bytes of records")
        print(f"result: {'PASS' if ok else 'FAIL'}{'' if alive else ' (groserd died)'}\n", flush=True)
        return ok
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            try:
                daemon.wait(15)
            except subprocess.TimeoutExpired:
                daemon.kill()
        log.close()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--socket", help=argparse.SUPPRESS)
    ap.add_argument("--groserd")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--floods", default="sessions,connections,register,register-new,guess")
    ap.add_argument("--p99-bound-ms", type=float, default=50,
                    help="the victim's info p99 a flood must stay under (tools/check-tools, on a loaded machine, loosens it)")
    ap.add_argument("extra", nargs="*", help="more groserd arguments (after --)")
    args = ap.parse_args()
    if args.worker:
        result = worker_victim(args.socket, args.seconds) if args.worker == "victim" else \
            worker_attacker(args.socket, args.worker, args.seconds)
        print(json.dumps(result))
        return 0
    if os.getuid() != 0:
        print("tools/attack-floods runs as root: it switches to two other users with setpriv", file=sys.stderr)
        return 2
    results = [run_flood(args.groserd, f, args.seconds, args.extra, args.p99_bound_ms) for f in args.floods.split(",")]
    print(f"floods: {sum(results)} of {len(results)} passed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
