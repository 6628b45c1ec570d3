"""The documentation's examples run: every block marked `runnable` in README.md and docs/*.md runs
against a real `errtriage serve`, and what the `expected` block after it shows must be in its output.
The convention is written for authors in docs/README.md ("Runnable examples"). In short: blocks talk
to `localhost:8080` (replaced by the server's address, and put back in the output); they run in a
folder whose `rules/` is what the server serves; the blocks of a page run in order against a fresh
server of the page's own. Each block is one test case named page:line. Relative links between the
pages, anchors included, are checked too."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import Process

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINKED = [*PAGES, ROOT / "clients" / "python" / "README.md"]
DOC_ADDRESS = "localhost:8080"
TOKEN = "docs-admin-token"
BLOCK_TIMEOUT = 120
FALLBACK_TIMEOUT = 180  # training takes 2-5 s on a quiet machine, much longer on a busy one


# --- Reading the pages -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Fenced:
    line: int  # 1-based line of the opening fence
    info: list[str]  # the info string's words: ["bash", "runnable"]
    body: str


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    expected: tuple[str, str] | None  # (json | text, the expected block's text)
    index: int  # its place among the page's runnable blocks

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def fenced_blocks(text: str) -> list[Fenced]:
    """Every fenced code block (CommonMark: a closing fence of the same character, at least as long)."""
    blocks: list[Fenced] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                break
            line = lines[j]
            body.append(line[min(indent, len(line) - len(line.lstrip())):])  # a block in a list item is indented
            j += 1
        blocks.append(Fenced(i + 1, opening["info"].split(), "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def page_blocks(page: Path) -> tuple[list[Block], list[str]]:
    """The page's runnable blocks, and what is wrong with its markers (an `expected` block that
    follows no runnable one, an unknown language)."""
    fenced = fenced_blocks(page.read_text())
    blocks: list[Block] = []
    problems: list[str] = []
    where = page.relative_to(ROOT)
    for n, block in enumerate(fenced):
        tags = block.info[1:]
        if "expected" in tags:
            before = fenced[n - 1] if n else None
            if before is None or "runnable" not in before.info[1:]:
                problems.append(f"{where}:{block.line}: an expected block that follows no runnable block")
            if block.info[0] not in ("json", "text"):
                problems.append(f"{where}:{block.line}: expected blocks are json or text, not {block.info[0]}")
        if "runnable" not in tags:
            continue
        lang = block.info[0] if block.info else ""
        if lang not in ("bash", "python"):
            problems.append(f"{where}:{block.line}: runnable blocks are bash or python, not {lang!r}")
            continue
        after = fenced[n + 1] if n + 1 < len(fenced) else None
        expected = (after.info[0], after.body) if after is not None and "expected" in after.info[1:] else None
        blocks.append(Block(page, block.line, lang, block.body, expected, len(blocks)))
    return blocks, problems


BLOCKS = {page: page_blocks(page)[0] for page in PAGES}
ALL = [block for blocks in BLOCKS.values() for block in blocks]


# --- Comparing with what a page shows ----------------------------------------------------------------

def json_documents(output: str) -> list[Any]:
    """The JSON objects and arrays printed, in order (curl's answers often have no newline between)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    i = 0
    while i < len(output):
        if output[i] in "{[":
            try:
                value, end = decoder.raw_decode(output, i)
            except json.JSONDecodeError:
                i += 1
                continue
            found.append(value)
            i = end
        else:
            i += 1
    return found


def mismatch(expected: Any, actual: Any, path: str = "$") -> str | None:
    """Why `actual` does not show what `expected` shows, or None when it does."""
    if expected == "...":
        return None
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {actual!r}"
        for key, value in expected.items():
            if key not in actual:
                return f"{path}: no key {key!r} (keys: {sorted(actual)})"
            problem = mismatch(value, actual[key], f"{path}.{key}")
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: expected a list, got {actual!r}"
        if expected and expected[-1] == "...":
            for n, item in enumerate(expected[:-1]):
                if all(mismatch(item, candidate) for candidate in actual):
                    return f"{path}[{n}]: no item of {actual!r} matches {item!r}"
            return None
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} items, got {len(actual)}: {actual!r}"
        for n, (item, candidate) in enumerate(zip(expected, actual, strict=True)):
            problem = mismatch(item, candidate, f"{path}[{n}]")
            if problem:
                return problem
        return None
    if isinstance(expected, bool) or isinstance(actual, bool):
        same = type(expected) is type(actual) and expected == actual
    else:
        same = expected == actual
    return None if same else f"{path}: expected {expected!r}, got {actual!r}"


def missing_lines(expected: str, output: str) -> list[str]:
    """The lines of a text expected block that the output does not hold (`...`: anything)."""
    missing = []
    for line in expected.splitlines():
        if not line.strip():
            continue
        pattern = ".*?".join(re.escape(part) for part in line.strip().split("..."))
        if re.search(pattern, output) is None:
            missing.append(line)
    return missing


def check_output(block: Block, output: str) -> None:
    if block.expected is None:
        return
    kind, text = block.expected
    if kind == "json":
        documents = json_documents(output)
        assert documents, f"{block.id}: printed no JSON; output:\n{output[-3000:]}"
        problem = mismatch(json.loads(text), documents[-1])
        assert problem is None, (f"{block.id}: the last JSON printed does not show what the page shows: {problem}\n"
                                 f"printed: {json.dumps(documents[-1])[:3000]}")
    else:
        missing = missing_lines(text, output)
        assert not missing, f"{block.id}: output lacks {missing}; output:\n{output[-3000:]}"


# --- Running them --------------------------------------------------------------------------------------

@dataclass
class Workspace:
    """One page's server and working folder."""

    page: Path
    folder: Path
    server: Process
    ran: set[int] = field(default_factory=set)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.port}"


class Workspaces:
    """A fresh server per page, started when the page's first block runs; one at a time."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.current: Workspace | None = None

    def for_page(self, page: Path) -> Workspace:
        if self.current is not None and self.current.page == page:
            return self.current
        self.close()
        name = str(page.relative_to(ROOT).with_suffix("")).replace(os.sep, "-")  # README, docs-README
        folder = self.base / name
        shutil.copytree(ROOT / "rules", folder / "rules")
        server = Process(["--rules", str(folder / "rules")],
                         {"ERRTRIAGE_ADMIN_TOKEN": TOKEN, "ERRTRIAGE_LOG_FORMAT": "json", "ERRTRIAGE_REDIS_URL": ""},
                         self.base / f"{name}.server.log")
        self.current = Workspace(page, folder, server)
        server.wait_ready(timeout=60)
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.server.stop()
            self.current = None


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspaces]:
    spaces = Workspaces(tmp_path_factory.mktemp("docs"))
    yield spaces
    spaces.close()


def wait_for_fallback(space: Workspace) -> None:
    """Examples the learned fallback decides need it trained: it retrains after every reload."""
    deadline = time.monotonic() + FALLBACK_TIMEOUT
    while time.monotonic() < deadline:
        state = httpx.get(f"http://{space.address}/v1/rules", timeout=10).json()["fallback"]["state"]
        if state != "training":
            return
        time.sleep(0.2)
    raise AssertionError(f"the fallback was still training after {FALLBACK_TIMEOUT} s")


def run(block: Block, space: Workspace) -> str:
    space.ran.add(block.index)
    wait_for_fallback(space)
    scripts = space.folder.with_name(f"{space.folder.name}.blocks")
    scripts.mkdir(exist_ok=True)
    script = scripts / f"line{block.line}.{'sh' if block.lang == 'bash' else 'py'}"
    script.write_text(block.code.replace(DOC_ADDRESS, space.address))
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "ERRTRIAGE_ADMIN_TOKEN": TOKEN, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "no_proxy": ",".join(filter(None, ["127.0.0.1,localhost", os.environ.get("no_proxy")]))}
    command = ["bash", "-euo", "pipefail", str(script)] if block.lang == "bash" else [sys.executable, str(script)]
    try:
        done = subprocess.run(command, check=False, cwd=space.folder, env=env, capture_output=True, text=True,
                              timeout=BLOCK_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{block.id}: still running after {BLOCK_TIMEOUT} s") from exc
    output = done.stdout.replace(space.address, DOC_ADDRESS)
    assert done.returncode == 0, (f"{block.id}: exit {done.returncode}\n--- stdout\n{output[-3000:]}\n"
                                  f"--- stderr\n{done.stderr[-3000:]}\n--- server log\n"
                                  f"{space.server.log.read_text()[-2000:]}")
    return output


@pytest.mark.parametrize("block", ALL, ids=[block.id for block in ALL])
def test_runnable_example(block: Block, workspaces: Workspaces) -> None:
    space = workspaces.for_page(block.page)
    for earlier in BLOCKS[block.page][:block.index]:  # what a reader did above this block
        if earlier.index not in space.ran:
            check_output(earlier, run(earlier, space))
    check_output(block, run(block, space))


def test_the_docs_have_runnable_examples_and_well_formed_markers() -> None:
    problems = [problem for page in PAGES for problem in page_blocks(page)[1]]
    assert not problems, "\n".join(problems)
    runnable_pages = {block.page.name for block in ALL}
    assert {"README.md", "agents.md", "http-api.md", "notifications.md", "operations.md", "rules.md"} <= runnable_pages


# --- Links between the pages -------------------------------------------------------------------------

_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def outside_fences(text: str) -> list[str]:
    """The lines of a page that are not in a fenced block."""
    kept: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        opening = _FENCE.match(line)
        if fence is None and opening is not None:
            fence = opening["fence"]
        elif fence is not None:
            if line.strip() and set(line.strip()) == {fence[0]} and len(line.strip()) >= len(fence):
                fence = None
        else:
            kept.append(line)
    return kept


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces to `-`,
    a repeated heading's anchor numbered."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    for line in outside_fences(page.read_text()):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading[1].lower()).replace(" ", "-")
            n = counts.get(slug, 0)
            counts[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


@pytest.mark.parametrize("page", LINKED, ids=[str(page.relative_to(ROOT)) for page in LINKED])
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    text = "\n".join(re.sub(r"`+[^`]*`+", "", line) for line in outside_fences(page.read_text()))  # not in code
    for target in _LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with that anchor in {linked.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_is_a_front_page_that_links_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    unlinked = [page.name for page in (ROOT / "docs").glob("*.md") if f"docs/{page.name}" not in readme]
    assert not unlinked, f"README.md links no {unlinked}"
