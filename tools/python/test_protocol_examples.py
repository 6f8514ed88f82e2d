"""docs/PROTOCOL.md checks itself: every block of example frames in it is run
against a real groserd on the sample catalog.

The blocks are read out of docs/PROTOCOL.md itself, never copied here. The
convention (stated in PROTOCOL.md's paragraph "The examples are checked"):

- an example is a fenced code block whose info string is `frames`;
- a line beginning `Request` starts a frame to send, a line beginning
  `Response` the answer expected to the request before it; the text from the
  word to the first line of bytes is the frame decoded, `{...}` in protobuf
  text format, ending with `:`;
- a line of bytes holds lower-case hex byte pairs separated by one or two
  spaces; text after three or more spaces is an annotation and is ignored;
  a Request's or Response's bytes are one whole frame, prefix included;
- `Resend N` sends the example's request with id N again and expects the same
  answer bytes as the first time;
- a block marked `frames continued` continues the example of the block
  before it (same connection, same session), so prose can stand between;
- a Request with no Response after it must get an OK answer with its id;
- the session token ddef55b8b5a9aee50216bd8f79830b6e4f1a2c3b5d6e7f8091a2b3c4d5e6f708 stands for a session the
  test opens before the block; its token replaces that one (same length).

Besides running them, the test checks that each frame's length prefix is
right, that its bytes decode to the decoded form given, and that a request's
bytes are what a protobuf encoder makes of it (fields in number order).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import pytest
from google.protobuf import text_format

from groserd_harness import REPO, Daemon, StatusCode, open_session, read_raw_frame, service_pb2, status_of

DOC = REPO / "docs" / "PROTOCOL.md"
EXAMPLE_SESSION = "ddef55b8b5a9aee50216bd8f79830b6e4f1a2c3b5d6e7f8091a2b3c4d5e6f708"
FENCE = re.compile(r"^```(.*)$")
HEX_BYTES = re.compile(r"^[0-9a-f]{2}(?: {1,2}[0-9a-f]{2})*$")
ANNOTATION = re.compile(r" {3,}")


def bytes_of_line(line: str) -> Optional[bytes]:
    """The bytes a line holds under the convention, or None for a text line."""
    head = ANNOTATION.split(line.strip(), maxsplit=1)[0]
    if not HEX_BYTES.match(head):
        return None
    return bytes.fromhex(head)


@dataclass
class CodeBlock:
    info: str
    first_line: int  # 1-based line number of the opening fence
    lines: list[str]
    heading: str


def code_blocks(text: str) -> list[CodeBlock]:
    blocks, heading, cur = [], "", None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if cur is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            if m:
                cur = CodeBlock(m.group(1).strip(), n, [], heading)
        elif m and not m.group(1).strip():
            blocks.append(cur)
            cur = None
        else:
            cur.lines.append(line)
    assert cur is None, f"PROTOCOL.md: the code block opened at line {cur.first_line} is never closed"
    return blocks


@dataclass
class Frame:
    kind: str  # "Request" or "Response"
    line: int
    text: list[str] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray)
    expect: Optional["Frame"] = None  # for a Request: the Response given after it

    def decoded_text(self) -> str:
        t = " ".join(s.strip() for s in self.text)
        t = t[len(self.kind):].strip()
        assert t.endswith(":"), f"line {self.line}: the decoded form must end with ':' before the bytes"
        t = t[:-1].strip()
        assert t.startswith("{") and t.endswith("}"), f"line {self.line}: the decoded form must be {{...}}"
        return t[1:-1]


@dataclass
class Resend:
    line: int
    request_id: int


def parse_frames(blocks: list[CodeBlock]) -> list:
    """An example's steps: Frames (Requests, each with its expected Response if
    any) and Resends, strictly by the convention."""
    steps: list = []
    for block in blocks:
        steps += _parse_block(block, steps)
    return steps


def _parse_block(block: CodeBlock, before: list) -> list:
    steps: list = []
    cur: Optional[Frame] = None
    for off, line in enumerate(block.lines, 1):
        n = block.first_line + off
        word = line.split(" ", 1)[0].rstrip(":")
        if not line.strip():
            continue
        if word in ("Request", "Response") and not line[0].isspace():
            cur = Frame(word, n, [line])
            if word == "Request":
                steps.append(cur)
            else:
                prev = (before + steps)[-1:] or [None]
                assert isinstance(prev[0], Frame) and prev[0].expect is None, \
                    f"line {n}: a Response must follow a Request that has none yet"
                prev[0].expect = cur
            continue
        if word == "Resend":
            m = re.match(r"^Resend (\d+)\s*$", ANNOTATION.split(line, maxsplit=1)[0])
            assert m, f"line {n}: write `Resend N` with the id of an earlier request"
            steps.append(Resend(n, int(m.group(1))))
            cur = None
            continue
        assert cur is not None, f"line {n}: text outside a Request or Response: {line!r}"
        data = bytes_of_line(line)
        if data is not None:
            cur.data += data
        else:
            assert not cur.data, f"line {n}: neither bytes nor annotation after the bytes began: {line!r}"
            cur.text.append(line)
    return steps


def check_frame(frame: Frame, session: Optional[str]):
    """Static checks of one frame; returns (its bytes and decoded message)
    with the example session token replaced by `session`."""
    data = bytes(frame.data)
    text = frame.decoded_text()
    if session is not None:
        assert len(session) == len(EXAMPLE_SESSION)
        data = data.replace(EXAMPLE_SESSION.encode(), session.encode())
        text = text.replace(EXAMPLE_SESSION, session)
    where = f"line {frame.line} ({frame.kind})"
    assert len(data) >= 4, f"{where}: no bytes"
    n = int.from_bytes(data[:4], "big")
    assert n == len(data) - 4, f"{where}: the length prefix says {n}, the body has {len(data) - 4} bytes"
    cls = service_pb2.Request if frame.kind == "Request" else service_pb2.Response
    from_bytes = cls()
    from_bytes.ParseFromString(data[4:])
    from_text = cls()
    text_format.Parse(text, from_text)
    assert from_bytes == from_text, (f"{where}: the bytes decode to\n{from_bytes}\nbut the text says\n{from_text}")
    if frame.kind == "Request":
        assert from_text.SerializeToString() == data[4:], (
            f"{where}: the bytes are not what an encoder makes of the decoded form:\n"
            f"{from_text.SerializeToString().hex(' ')}")
    return data, from_bytes


def describe(data: bytes) -> str:
    r = service_pb2.Response()
    try:
        r.ParseFromString(data[4:])
    except Exception:  # noqa: BLE001 - for the failure message only
        return "(undecodable)"
    return str(r)


DOC_TEXT = DOC.read_text(encoding="utf-8")


def examples(blocks: list[CodeBlock]) -> list[list[CodeBlock]]:
    """The blocks marked `frames`, each with the `frames continued` ones after it."""
    out: list[list[CodeBlock]] = []
    for b in blocks:
        if b.info == "frames":
            out.append([b])
        elif b.info == "frames continued":
            assert out, f"PROTOCOL.md line {b.first_line}: `frames continued` with no example before it"
            out[-1].append(b)
    return out


EXAMPLES = examples(code_blocks(DOC_TEXT))


@pytest.fixture(scope="module")
def daemon():
    d = Daemon()
    try:
        yield d
    finally:
        d.cleanup()


def test_the_document_has_checked_examples():
    """The parser finds the examples: §1's two and §7.9's at least."""
    headings = [ex[0].heading for ex in EXAMPLES]
    assert len(EXAMPLES) >= 3, headings
    assert any("ServerInfo" in h for h in headings), headings
    assert any("AddItem" in h for h in headings), headings
    for ex in EXAMPLES:
        steps = parse_frames(ex)
        assert any(isinstance(s, Frame) for s in steps), f"example at line {ex[0].first_line} has no Request"
    assert any(EXAMPLE_SESSION in "\n".join(ln for b in ex for ln in b.lines) for ex in EXAMPLES)


def test_every_frame_example_is_marked():
    """No code block with frame bytes escapes the check by a missing `frames` mark."""
    for b in code_blocks(DOC_TEXT):
        if b.info in ("frames", "frames continued"):
            continue
        hexy = [ln for ln in b.lines if (d := bytes_of_line(ln)) is not None and len(d) >= 2]
        assert not hexy, (f"PROTOCOL.md line {b.first_line} ({b.heading}): a code block with frame bytes "
                          f"not marked ```frames, so not checked: {hexy[:2]}")
        assert not any(ln.startswith(("Request ", "Response ")) for ln in b.lines), (
            f"PROTOCOL.md line {b.first_line} ({b.heading}): a decoded frame outside a ```frames block")


def test_the_document_states_the_convention():
    for needle in ("test_protocol_examples.py", "```frames", EXAMPLE_SESSION, "Resend", "three or more spaces"):
        assert needle in DOC_TEXT, f"PROTOCOL.md's paragraph on checked examples should mention {needle!r}"


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"line{ex[0].first_line}" for ex in EXAMPLES])
def test_example(daemon, example):
    """Runs one example (its blocks in order) on a new connection."""
    steps = parse_frames(example)
    uses_session = EXAMPLE_SESSION in "\n".join(ln for b in example for ln in b.lines)
    session = None
    if uses_session:
        with daemon.client() as c:
            session = open_session(c)
    sock = daemon.raw_socket()
    buf = bytearray()
    sent: dict[int, tuple[bytes, bytes]] = {}  # request id -> (request bytes, answer bytes)
    try:
        for step in steps:
            if isinstance(step, Resend):
                assert step.request_id in sent, f"line {step.line}: no earlier request with id {step.request_id}"
                data, answer = sent[step.request_id]
                sock.sendall(data)
                got = read_raw_frame(sock, buf)
                assert got == answer, (f"line {step.line}: Resend {step.request_id} got\n{describe(got)}\n"
                                       f"not the first answer\n{describe(answer)}")
                continue
            data, req = check_frame(step, session)
            expected = check_frame(step.expect, session)[0] if step.expect else None
            sock.sendall(data)
            got = read_raw_frame(sock, buf)
            assert got is not None, f"line {step.line}: the connection ended without an answer"
            if expected is not None:
                assert got == expected, (
                    f"PROTOCOL.md line {step.expect.line}: groserd answered\n{got.hex(' ')}\n{describe(got)}\n"
                    f"not the documented\n{expected.hex(' ')}\n{describe(expected)}")
            else:
                resp = service_pb2.Response()
                resp.ParseFromString(got[4:])
                code, message = status_of(resp)
                assert resp.id == req.id, f"line {step.line}: answer id {resp.id}, request id {req.id}"
                assert code == StatusCode.OK, f"line {step.line}: answered {StatusCode.Name(code)}: {message}"
                assert resp.WhichOneof("body") == req.WhichOneof("method")
            sent[req.id] = (data, got)
    finally:
        sock.close()
