"""Every console example of README.md and docs/CLI.md is run, and its output
checked, against the release binaries (standard library and pytest only).

    GROSER_BIN_DIR=/work/main/.build/release \
        python3 -m pytest -p no:cacheprovider -q tools/python/test_doc_examples.py

The examples are read out of the documents, never copied here. The
convention:

- an example is a fenced block whose info string is `console`;
- a line starting `$ ` is a command (a line ending in `\\` continues it); the
  lines after it, up to the next `$ ` or the end of the block, are what the
  terminal shows: standard output and standard error as they interleave,
  prompts included, with what was typed at a prompt that echoes;
- a command shown with no lines after it is run and must exit 0; its output
  is not compared (the document leaves it out);
- a line `...` elides: the lines before the first `...` must be the first
  lines of the output, each later group must follow, in order, contiguous;
  without `...` the output must be exactly the lines shown;
- trailing spaces are not compared (Markdown does not keep them), nor
  carriage returns and colour/bold escape sequences on a terminal;
- a `# comment` after a command is the document's, not the shell's: it is
  cut off (a `#` inside quotes is kept).

A document is a story: one groserd on the sample catalog with a fresh data
directory, one HOME (so `set-city` and the cart session carry over from one
block to the next), one working directory. A block whose first command is in
STORIES starts a story of its own (a fresh groserd, HOME and directory).
Each command is one test case, named after its document, line and text; the
cases of a story run in order (selecting one with -k runs the ones before it
first).

How each command is run:

- `bash -c COMMAND` in the story's directory, with PATH starting with a
  directory of symlinks to groser-client and groserd, GROSER_SOCKET the
  story's socket, HOME and XDG_CONFIG_HOME private, COLUMNS=120, LANG
  C.UTF-8, and CARD/CVC set to a test card (4111111111111111, 123);
  `tools` in the directory is a symlink to the repo's tools/;
- a command whose shown output holds a prompt (PROMPTS) runs on a
  pseudo-terminal that is its standard input, output, error and
  controlling terminal; each answer is typed once the prompt is shown (and,
  for a secret, once echo is off);
- a command that runs until Ctrl-C (`latency`/`--latency` or `watch` or
  `call Watch` without --count) gets SIGINT (to its process group) once it
  printed the lines shown, or after INTERRUPT_AFTER seconds; DURING names
  what another terminal does meanwhile;
- a command ending in `&` starts a daemon: it is left running (output in
  the story directory's daemon-*.log) until the story ends, and the next
  command waits for the socket;
- `source <(groser-client completion bash)` is run again followed by
  `complete -p groser-client`, which must name groser-client;
- PATH_REWRITES moves system paths (/srv, /var/lib) into the story
  directory; FILES writes the files an example implies (request.json,
  fixes.jsonl) before the first command naming them;
- EXPECTED_EXIT gives the non-zero exit codes, with the reason; VARYING
  lists the values matched by pattern (dates, uptimes, latencies); SKIP
  and XFAIL name the commands that cannot run here or fail because of a
  known bug in the binaries. Every key of these tables must name a command
  of the documents, so they cannot go stale.
"""
from __future__ import annotations

import errno
import fcntl
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("GROSER_BIN_DIR") or REPO / ".build" / "release")
DOCUMENTS = ["README.md", "docs/CLI.md"]
COLUMNS = 120
CARD = "4111111111111111"
CVC = "123"
PASSWORD = "correct horse battery staple"
COMMAND_TIMEOUT = 20.0

# --- the tables -------------------------------------------------------------

# A block whose first command is one of these starts a story of its own.
# daemon=False: the story's commands start groserd themselves.
STORIES: dict[str, tuple[str, bool]] = {
    "tools/gen-catalog --cities 2 --stores-per-city 2 --products-per-store 2500 --seed 1 --output chain.jsonl":
        ("import", False),
    "groser-client watch --city SPB": ("watch", True),
}

# Non-zero exit codes the documents show (commands compared with their
# whitespace collapsed), and why.
EXPECTED_EXIT: dict[str, tuple[int, str]] = {
    "groser-client get-store --city NOPE --json":
        (69, "NOT_FOUND (64 + 5); with --json the error goes to stdout as JSON, same exit code"),
    "groser-client carts": (2, "usage error: an unknown command"),
    "groser-client cart remove prd-spb-1-0005":
        (130, "the question is answered n: nothing changed, exit 130 (docs/CLI.md, cart remove)"),
    "groser-client admin import fixes.jsonl": (67, "the file is refused: INVALID_ARGUMENT (64 + 3)"),
    "groser-client --latency": (130, "runs until Ctrl-C; the summary is printed, then exit 130"),
    "groser-client call Watch -d '{\"cityCode\": \"SPB\"}'": (130, "runs until Ctrl-C (exit 130)"),
    "groser-client watch --city SPB": (130, "runs until Ctrl-C (exit 130)"),
    "groser-client watch --store store-spb-1 --since 1 --json": (130, "runs until Ctrl-C (exit 130)"),
}

# What a second terminal does while a command that runs until Ctrl-C runs,
# once the command printed its first line.
DURING: dict[str, tuple[str, str]] = {
    "groser-client watch --city SPB": (
        "groser-client admin set-product prd-spb-1-0001 --price 99.90 --stock 5",
        "the second line shown is the change README's cart story makes with admin set-product"),
}

# Seconds a command that runs until Ctrl-C is given when it shows no lines
# (or before its shown lines came).
INTERRUPT_AFTER = 0.6
INTERRUPT_MAX_WAIT = 5.0

# Prompts, and what the test types at each: (prompt as printed, answer, secret).
# The `[y/N]` answer is the text the document shows after the prompt.
PROMPTS: list[tuple[str, Optional[str], bool]] = [
    ("[y/N] ", None, False),
    ("Card number: ", CARD, True),
    ("CVC: ", CVC, True),
    ("Password again: ", PASSWORD, True),
    ("Password: ", PASSWORD, True),
]

# Values that vary from run to run: in a shown line, text matching the
# pattern on the left matches, in the output, the pattern on the right.
VARYING: list[tuple[str, str, str]] = [
    (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", "an order's time"),
    (r"(?<=uptime_in_seconds:)\d+", r"\d+", "the daemon's uptime"),
    (r"(?<=usec=)\d+", r"\d+", "latencies in stats (usec, p50_usec, ...)"),
    (r"\d+\.\d{3} ms", r"\d+\.\d{3} ms", "round-trip times (-v, latency)"),
]

# System paths an example names, moved into the story's directory.
PATH_REWRITES: dict[str, str] = {
    "/srv/groser": "{dir}/srv/groser",
    "/var/lib/node_exporter/textfile/": "{dir}/var/lib/node_exporter/textfile/",
}


def _request_json(directory: Path) -> None:
    (directory / "request.json").write_text('{"cityCode": "SPB", "includeProducts": false}\n')


def _fixes_jsonl(directory: Path) -> None:
    """A partial catalog file for store-spb-1 of chain.jsonl whose line 7,
    prd-spb-1-000002, misspells "stock" as "stok": the README's bad line."""
    lines = (directory / "chain.jsonl").read_text(encoding="utf-8").splitlines()
    wanted = ['"uid":"city-spb"', '"uid":"store-spb-1"', '"uid":"dep-spb-1-01"', '"uid":"shelf-spb-1-01-01"',
              '"uid":"prd-spb-1-000001"', '"uid":"prd-spb-1-000002"']
    records = [next(line for line in lines if key in line) for key in wanted]
    assert '"stock":' in records[-1]
    records[-1] = records[-1].replace('"stock":', '"stok":')
    out = [lines[0]] + records + ['{"type":"end","records":%d}' % len(records)]
    (directory / "fixes.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")


# Files an example reads without making them, written before the first
# command that names them.
FILES: dict[str, Callable[[Path], None]] = {
    "request.json": _request_json,
    "fixes.jsonl": _fixes_jsonl,
}

# Commands that cannot run here: command -> reason. Kept as short as possible.
SKIP: dict[str, str] = {}

# Commands that fail because of a bug in the binaries: command -> the bug.
XFAIL: dict[str, str] = {}

# Documents whose lack of console examples is known: document -> why.
# Documents that show no command output: docs/CLI.md is generated from the
# command tree (tools/gen-cli-docs), which holds synopses, not sessions. For
# these the test checks that no `$ ` example hides outside a console block,
# where it would go unexecuted.
NO_CONSOLE_BLOCKS: set[str] = {"docs/CLI.md"}

# --- parsing ----------------------------------------------------------------


@dataclass
class Example:
    document: str
    line: int  # 1-based line of the `$ `
    block: int  # index of the console block in the document
    command: str  # as bash gets it (continuations kept, comment cut)
    comment: str
    shown: list[str]

    @property
    def key(self) -> str:
        return normalise(self.command)


def normalise(command: str) -> str:
    return " ".join(command.replace("\\\n", " ").split())


def split_comment(command: str) -> tuple[str, str]:
    """The command without a trailing `# comment` (outside quotes, at the
    start of a word), and the comment."""
    quote = None
    i = 0
    while i < len(command):
        c = command[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
        elif c == "\\":
            i += 1
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or command[i - 1] in " \t"):
            return command[:i].rstrip(), command[i + 1:].strip()
        i += 1
    return command.rstrip(), ""


def console_fences(text: str) -> int:
    """How many console blocks the text opens, counted without the parser."""
    return sum(1 for line in text.splitlines() if line.strip() == "```console")


def parse(document: str) -> list[Example]:
    lines = (REPO / document).read_text(encoding="utf-8").splitlines()
    examples: list[Example] = []
    in_block = False
    block = -1
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not in_block:
            if stripped == "```console":
                in_block = True
                block += 1
            i += 1
            continue
        if stripped.startswith("```"):
            in_block = False
            i += 1
            continue
        if line.startswith("$ "):
            start = i
            parts = [line[2:]]
            while parts[-1].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                parts.append(lines[i])
            command, comment = split_comment("\n".join(parts))
            shown = []
            i += 1
            while i < len(lines) and not lines[i].startswith("$ ") and not lines[i].strip().startswith("```"):
                shown.append(lines[i].rstrip())
                i += 1
            examples.append(Example(document, start + 1, block, command, comment, shown))
            continue
        raise AssertionError(f"{document}:{i + 1}: a console block line before any `$ ` command: {line!r}")
    return examples


EXAMPLES: dict[str, list[Example]] = {doc: parse(doc) for doc in DOCUMENTS}

# --- matching ---------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def line_pattern(shown: str) -> re.Pattern[str]:
    pieces: list[str] = []
    pos = 0
    spans: list[tuple[int, int, str]] = []
    for pattern, replacement, _ in VARYING:
        for m in re.finditer(pattern, shown):
            spans.append((m.start(), m.end(), replacement))
    spans.sort()
    for start, end, replacement in spans:
        if start < pos:
            continue
        pieces.append(re.escape(shown[pos:start]))
        pieces.append(replacement)
        pos = end
    pieces.append(re.escape(shown[pos:]))
    return re.compile("".join(pieces))


def lines_match(shown: list[str], actual: list[str]) -> bool:
    return len(shown) == len(actual) and all(line_pattern(s).fullmatch(a) for s, a in zip(shown, actual))


def output_matches(shown: list[str], actual: list[str]) -> Optional[str]:
    """None when the output is what the document shows, else why not."""
    if not shown:
        return None
    groups: list[list[str]] = [[]]
    for line in shown:
        if line.strip() == "...":
            groups.append([])
        else:
            groups[-1].append(line)
    if len(groups) == 1:
        return None if lines_match(shown, actual) else "the output differs from the lines shown"
    first = groups[0]
    if not lines_match(first, actual[:len(first)]):
        return "the output does not begin with the lines shown before the first `...`"
    pos = len(first)
    for group in groups[1:]:
        if not group:
            continue
        for start in range(pos, len(actual) - len(group) + 1):
            if lines_match(group, actual[start:start + len(group)]):
                pos = start + len(group)
                break
        else:
            return f"the lines shown after a `...` do not follow in the output: {group!r}"
    return None


def clean(raw: bytes) -> list[str]:
    text = ANSI.sub("", raw.decode("utf-8", errors="replace")).replace("\r", "")
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and lines[-1] == "":
        lines.pop()
    return lines


# --- running ----------------------------------------------------------------


def runs_until_interrupted(key: str) -> bool:
    if "--count" in key:
        return False
    return bool(re.search(r"groser-client (\S+ )*(--latency|latency|watch|call Watch)\b", key))


@dataclass
class Result:
    exit_code: int
    output: list[str]
    note: str = ""


def socket_answers(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_for_socket(path: str, process: Optional[subprocess.Popen], log: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"groserd exited with {process.returncode}: {log.read_text(errors='replace')}")
        if socket_answers(path):
            return
        time.sleep(0.02)
    raise AssertionError(f"groserd did not answer on {path} within 15 s: {log.read_text(errors='replace')}")


@dataclass
class Story:
    name: str
    document: str
    examples: list[Example]
    starts_daemon: bool
    directory: Path = field(init=False)
    results: dict[int, Result] = field(default_factory=dict)
    daemons: list[subprocess.Popen] = field(default_factory=list)
    counted: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="gsr-doc-"))
        self.socket = str(self.directory / "g.sock")
        home = self.directory / "home"
        (home / ".config").mkdir(parents=True)
        bin_links = self.directory / "bin"
        bin_links.mkdir()
        for name in ("groser-client", "groserd"):
            (bin_links / name).symlink_to(BIN_DIR / name)
        (self.directory / "tools").symlink_to(REPO / "tools")
        (self.directory / "srv").mkdir()
        (self.directory / "var/lib/node_exporter/textfile").mkdir(parents=True)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GROSER_", "XDG_", "LC_", "PYTEST_")) and k not in ("NO_COLOR", "TERM")}
        env.update({
            "PATH": f"{bin_links}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "GROSER_SOCKET": self.socket,
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local/share"),
            "COLUMNS": str(COLUMNS),
            "LINES": "40",
            "LANG": "C.UTF-8",
            "TERM": "xterm",
            "CARD": CARD,
            "CVC": CVC,
        })
        self.env = env
        if self.starts_daemon:
            self.start_daemon([str(BIN_DIR / "groserd"), "--socket", self.socket,
                               "--data", str(self.directory / "data"), "--threads", "2"])

    def start_daemon(self, argv: list[str]) -> None:
        log = self.directory / f"daemon-{len(self.daemons)}.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(argv, cwd=self.directory, env=self.env, stdin=subprocess.DEVNULL,
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.daemons.append(process)
        wait_for_socket(self.socket, process, log)

    def daemon_log(self) -> str:
        return "\n".join((self.directory / f"daemon-{i}.log").read_text(errors="replace")[-2000:]
                         for i in range(len(self.daemons)))

    def stop(self) -> None:
        for process in self.daemons:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)

    def result(self, index: int) -> Result:
        for i in range(index + 1):
            if i not in self.results:
                self.results[i] = self.run(self.examples[i])
        return self.results[index]

    # One command.
    def run(self, example: Example) -> Result:
        if example.key in SKIP:
            return Result(0, [], "skipped")
        command = example.command
        for path, replacement in PATH_REWRITES.items():
            command = command.replace(path, replacement.format(dir=self.directory))
        for name, make in FILES.items():
            if re.search(rf"(^|[\s@]){re.escape(name)}\b", command) and not (self.directory / name).exists():
                make(self.directory)
        if command.rstrip().endswith("&") and not command.rstrip().endswith("&&"):
            self.start_daemon(["bash", "-c", "exec " + command.rstrip()[:-1]])
            return Result(0, [], "started in the background")
        prompts = self.prompts_of(example)
        if prompts:
            return self.run_on_terminal(command, prompts)
        if runs_until_interrupted(example.key):
            return self.run_until_interrupted(example, command)
        completed = subprocess.run(["bash", "-c", command], cwd=self.directory, env=self.env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True, timeout=COMMAND_TIMEOUT)
        return Result(completed.returncode, clean(completed.stdout))

    @staticmethod
    def prompts_of(example: Example) -> list[tuple[str, str, bool]]:
        """The prompts the shown output holds, in order, with the answers."""
        found = []
        for line in example.shown:
            for prompt, answer, secret in PROMPTS:
                bare = prompt.rstrip()
                if bare in line and (line.endswith(bare) or not secret):
                    typed = answer if answer is not None else line.split(prompt, 1)[1]
                    found.append((prompt, typed, secret))
                    break
        return found

    def run_on_terminal(self, command: str, prompts: list[tuple[str, str, bool]]) -> Result:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, COLUMNS, 0, 0))

        def controlling_terminal() -> None:  # runs after setsid in the child
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        process = subprocess.Popen(["bash", "-c", command], cwd=self.directory, env=self.env,
                                   stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                                   preexec_fn=controlling_terminal)
        os.close(slave)
        transcript = b""
        searched = 0
        pending = list(prompts)
        deadline = time.monotonic() + COMMAND_TIMEOUT
        note = ""
        try:
            while True:
                if time.monotonic() > deadline:
                    note = f"timed out; prompts never shown: {[p for p, _, _ in pending]}"
                    os.killpg(process.pid, signal.SIGKILL)
                    break
                if pending:
                    prompt, answer, secret = pending[0]
                    at = transcript.find(prompt.encode(), searched)
                    echo_off = not (termios.tcgetattr(master)[3] & termios.ECHO)
                    if at >= 0 and (echo_off or not secret):
                        os.write(master, answer.encode() + b"\n")
                        searched = at + len(prompt.encode())
                        pending.pop(0)
                ready, _, _ = select.select([master], [], [], 0.02)
                if ready:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError as e:
                        if e.errno != errno.EIO:
                            raise
                        chunk = b""
                    if not chunk:
                        break  # every holder of the terminal is gone
                    transcript += chunk
        finally:
            os.close(master)
            code = process.wait(10)
        if pending and not note:
            note = f"prompts never shown: {[p for p, _, _ in pending]}"
        return Result(code, clean(transcript), note)

    def run_until_interrupted(self, example: Example, command: str) -> Result:
        process = subprocess.Popen(["bash", "-c", command], cwd=self.directory, env=self.env,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        fd = process.stdout.fileno()
        os.set_blocking(fd, False)
        wanted = len([line for line in example.shown if line.strip() != "..."])
        during = DURING.get(example.key)
        output = b""
        notes = []
        start = time.monotonic()
        while True:
            elapsed = time.monotonic() - start
            lines = output.count(b"\n")
            if during and lines >= 1:
                done = subprocess.run(["bash", "-c", during[0]], cwd=self.directory, env=self.env,
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      timeout=COMMAND_TIMEOUT)
                notes.append(f"meanwhile: $ {during[0]} -> exit {done.returncode}: {done.stdout.decode(errors='replace')!r}")
                during = None
            if (lines >= wanted and elapsed >= (INTERRUPT_AFTER if wanted == 0 else 0.1)) \
                    or elapsed > INTERRUPT_MAX_WAIT or process.poll() is not None:
                break
            select.select([fd], [], [], 0.02)
            try:
                output += os.read(fd, 65536)
            except BlockingIOError:
                pass
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        else:
            notes.append("it ended before Ctrl-C")
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            notes.append("it did not end within 10 s of Ctrl-C")
        os.set_blocking(fd, True)
        output += process.stdout.read()
        process.stdout.close()
        return Result(process.returncode, clean(output), "; ".join(notes))


def stories_of(document: str) -> list[tuple[str, bool, list[Example]]]:
    """The document's examples, story by story: (name, starts groserd,
    examples). A block goes to the story its first command starts (STORIES),
    else to the document's "main" story."""
    stories: dict[str, tuple[str, bool, list[Example]]] = {}
    name = "main"
    last_block = None
    for example in EXAMPLES[document]:
        if example.block != last_block:
            last_block = example.block
            name = STORIES.get(example.key, ("main", True))[0]
        if name not in stories:
            stories[name] = (name, dict(STORIES.values()).get(name, True), [])
        stories[name][2].append(example)
    return list(stories.values())


CASES = []
for _document in DOCUMENTS:
    for _name, _daemon, _examples in stories_of(_document):
        for _index, _example in enumerate(_examples):
            _marks = []
            if _example.key in SKIP:
                _marks.append(pytest.mark.skip(reason=SKIP[_example.key]))
            if _example.key in XFAIL:
                _marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[_example.key]))
            _id = f"{_document}:{_example.line} {_name}: {_example.key[:70]}"
            CASES.append(pytest.param(_document, _name, _daemon, _index, id=_id, marks=_marks))


@pytest.fixture(scope="module")
def stories(request):
    if not (BIN_DIR / "groser-client").exists() or not (BIN_DIR / "groserd").exists():
        pytest.fail(f"no groser-client/groserd in {BIN_DIR}: build them with `swift build -c release` "
                    "or set GROSER_BIN_DIR")
    made: dict[tuple[str, str], Story] = {}
    yield made
    for story in made.values():
        story.stop()
    counts: dict[str, int] = {}
    for (document, _), story in made.items():
        ran = sum(1 for result in story.results.values() if result.note != "skipped")
        counts[document] = counts.get(document, 0) + ran
    line = "doc examples run: " + ", ".join(f"{doc}: {counts.get(doc, 0)} commands" for doc in DOCUMENTS)
    request.config.pluginmanager.register(_CountsReport(line), "doc-example-counts")


class _CountsReport:
    """Prints how many commands ran, per document, at the end of the run."""

    def __init__(self, line: str) -> None:
        self.line = line

    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminalreporter.write_line(self.line)


@pytest.mark.parametrize("document,story_name,starts_daemon,index", CASES)
def test_example(stories, document, story_name, starts_daemon, index):
    story = stories.get((document, story_name))
    if story is None:
        examples = next(e for n, _, e in stories_of(document) if n == story_name)
        story = stories[(document, story_name)] = Story(story_name, document, examples, starts_daemon)
    example = story.examples[index]
    result = story.result(index)
    expected_code, why = EXPECTED_EXIT.get(example.key, (0, "success"))
    problems = []
    if result.exit_code != expected_code:
        problems.append(f"exit code {result.exit_code}, expected {expected_code} ({why})")
    mismatch = output_matches(example.shown, result.output)
    if mismatch:
        problems.append(mismatch)
    if example.key.startswith("source <(groser-client completion bash)"):
        check = subprocess.run(["bash", "-c", example.command + "\ncomplete -p groser-client"], cwd=story.directory,
                               env=story.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20)
        if check.returncode != 0 or "groser-client" not in check.stdout:
            problems.append(f"`complete -p groser-client` after it: exit {check.returncode}, "
                            f"{check.stdout!r} {check.stderr!r}")
    if problems:
        pytest.fail(
            f"{document}:{example.line}: $ {example.command}\n"
            + "\n".join(f"  - {p}" for p in problems)
            + (f"\n  note: {result.note}" if result.note else "")
            + "\n--- shown in the document:\n" + "\n".join(example.shown)
            + "\n--- actual output (exit %d):\n" % result.exit_code + "\n".join(result.output)
            + "\n--- groserd's log (tail):\n" + story.daemon_log()[-1500:],
            pytrace=False)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_document_has_examples(document):
    text = (REPO / document).read_text(encoding="utf-8")
    fences = console_fences(text)
    blocks = len({e.block for e in EXAMPLES[document]})
    assert blocks == fences, f"{document}: {fences} console blocks, {blocks} parsed with commands"
    if document in NO_CONSOLE_BLOCKS:
        assert fences == 0, f"{document} now has console blocks: take it out of NO_CONSOLE_BLOCKS so they run"
        hidden = [n for n, line in enumerate(text.splitlines(), 1) if re.match(r"\s*\$ (groser|tools/)", line)]
        assert not hidden, f"{document}: `$ ` examples outside console blocks, never executed: lines {hidden}"
        return
    assert EXAMPLES[document], f"{document}: no console example parsed"


def test_tables_name_real_commands():
    keys = {e.key for examples in EXAMPLES.values() for e in examples}
    for name, table in [("STORIES", STORIES), ("EXPECTED_EXIT", EXPECTED_EXIT), ("DURING", DURING),
                        ("SKIP", SKIP), ("XFAIL", XFAIL)]:
        stale = [key for key in table if key not in keys]
        assert not stale, f"{name} names commands no document has: {stale}"
    for document in NO_CONSOLE_BLOCKS:
        assert document in DOCUMENTS


def test_parser_conventions():
    assert split_comment('groser-client search "a # b" --city SPB   # ranked') == \
        ('groser-client search "a # b" --city SPB', "ranked")
    assert split_comment("echo '#x' foo#bar # c") == ("echo '#x' foo#bar", "c")
    assert output_matches(["a", "...", "c"], ["a", "b", "c", "d"]) is None
    assert output_matches(["a", "c"], ["a", "b", "c"]) is not None
    assert output_matches(["x 2026-12-02 17:17 UTC"], ["x 2031-01-05 03:04 UTC"]) is None
    assert runs_until_interrupted("groser-client --latency")
    assert not runs_until_interrupted("groser-client watch --city SPB --count 2")
