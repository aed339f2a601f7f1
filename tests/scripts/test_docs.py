"""The documentation's links resolve, and the README stays short.

Every Markdown file of the repository (README.md, docs/**, bench/README.md, data/README.md, ...;
not .venv, .git, runs/ or predictions/) is read; every relative link, inline `[text](target)` or
by reference `[text][label]` with `[label]: target`, must name a file or folder that exists
relative to the linking file, and a `#anchor` into a Markdown file must be the GitHub slug of one
of its headings. Links inside code (fenced blocks, `spans`) are not links.

A test a page names as `tests/test_NAME.py::test_function` (docs/extending.md names the test that runs each
worked example) must exist: a function of that name defined in that file.
"""
import ast
import os
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]
SKIP_DIRS = {"runs", "predictions", "node_modules", "__pycache__"}
README_MAX_LINES = 200

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# [text](target) and ![alt](target); the text may hold one level of brackets.
INLINE_LINK = re.compile(
    r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^()\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
)
REF_USE = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])+)\]\[([^\[\]]*)\]")
REF_DEF = re.compile(r"^ {0,3}\[([^\[\]]+)\]:\s*(<[^>]*>|\S+)")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
NAMED_TEST = re.compile(r"\b(tests/[\w/]+\.py)::(\w+)")


def markdown_files(root=REPO):
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".md")]
    return found


def prose_lines(text):
    """(line number, line) outside fenced code blocks, HTML comments blanked."""
    text = HTML_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
            continue
        if fence is not None:
            closing = line.strip()
            if closing and set(closing) == {fence[0]} and len(closing) >= len(fence):
                fence = None
            continue
        yield number, line


def plain_heading(text):
    """The text GitHub renders for a heading's Markdown."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags
    return text.replace("`", "")


def slugify(text):
    """GitHub's heading anchor: lower case, punctuation dropped, each space a hyphen."""
    text = plain_heading(text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def heading_slugs(path):
    """Every anchor a Markdown file offers, duplicates numbered as GitHub numbers them."""
    occurrences = {}
    slugs = set()
    previous = ""
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        heading = None
        atx = ATX.match(line)
        if atx:
            heading = atx.group(2) or ""
        elif SETEXT.match(line) and previous.strip() and not previous.lstrip().startswith(
            ("|", "-", "*", "+", ">", "#")
        ):
            heading = previous.strip()
        previous = line
        for anchor in HTML_ANCHOR.findall(line):
            slugs.add(anchor)
        if heading is None:
            continue
        base = slugify(heading)
        slug = base
        while slug in occurrences:
            occurrences[base] += 1
            slug = f"{base}-{occurrences[base]}"
        occurrences[slug] = 0
        slugs.add(slug)
    return slugs


def links(path):
    """(line number, target) of every link in a Markdown file, and errors of undefined labels."""
    lines = list(prose_lines(path.read_text(encoding="utf-8")))
    definitions = {}
    for number, line in lines:
        match = REF_DEF.match(line)
        if match:
            definitions[normal_label(match.group(1))] = (number, match.group(2))
    found, errors = [], []
    for number, line in lines:
        if REF_DEF.match(line):
            continue
        line = INLINE_CODE.sub("", line)
        found += [(number, m.group(2)) for m in INLINE_LINK.finditer(line)]
        for match in REF_USE.finditer(INLINE_LINK.sub("", line)):
            label = normal_label(match.group(2) or match.group(1))
            if label not in definitions:
                errors.append(f"{path}:{number}: [{match.group(1)}][{match.group(2)}]: no such label")
    found += list(definitions.values())
    return found, errors


def normal_label(label):
    return " ".join(label.split()).lower()


def check_links(path, root=REPO):
    """Every broken relative link of one Markdown file, one message each."""
    path = Path(path)
    found, errors = links(path)
    for number, target in found:
        target = target.strip("<>")
        if SCHEME.match(target):  # http:, https:, mailto: ...
            continue
        where = f"{path}:{number}: ({target})"
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / unquote(file_part)).resolve() if file_part else path.resolve()
        if not resolved.exists():
            errors.append(f"{where}: no such file or folder")
            continue
        try:
            resolved.relative_to(Path(root).resolve())
        except ValueError:
            errors.append(f"{where}: outside the repository")
            continue
        if not anchor:
            continue
        if resolved.suffix != ".md":
            if not re.fullmatch(r"L\d+(-L\d+)?", anchor):
                errors.append(f"{where}: an anchor into a file that is not Markdown")
            continue
        if unquote(anchor) not in heading_slugs(resolved):
            errors.append(f"{where}: no heading #{anchor} in {resolved.name}")
    return errors


def missing_tests(path, root=REPO):
    """Every `tests/FILE.py::NAME` the Markdown file names (in prose or code) whose file does not define NAME."""
    errors = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").split("\n"), 1):
        for file, name in NAMED_TEST.findall(line):
            source = Path(root) / file
            defined = {node.name for node in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
                       if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))} if source.exists() else set()
            if name not in defined:
                errors.append(f"{path}:{number}: {file}::{name}: " + ("no such test" if source.exists() else
                                                                       "no such file"))
    return errors


def headings(path):
    return [line for _, line in prose_lines(path.read_text(encoding="utf-8")) if ATX.match(line)]


def test_the_markdown_files_are_found():
    names = {p.relative_to(REPO).as_posix() for p in markdown_files()}
    assert {"README.md", "bench/README.md", "data/README.md", "docs/README.md"} <= names
    assert not any(name.startswith((".venv/", ".git/")) for name in names)


@pytest.mark.parametrize(
    "path", markdown_files(), ids=lambda p: p.relative_to(REPO).as_posix()
)
def test_links_resolve(path):
    assert check_links(path) == []


@pytest.mark.parametrize(
    "path", markdown_files(), ids=lambda p: p.relative_to(REPO).as_posix()
)
def test_named_tests_exist(path):
    assert missing_tests(path) == []


def test_the_checker_finds_named_tests_that_do_not_exist(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_here():\n    pass\n")
    (tmp_path / "a.md").write_text("`tests/test_x.py::test_here` and tests/test_x.py::test_gone\n\n"
                                   "```\ntests/test_y.py::test_here\n```\n")
    errors = missing_tests(tmp_path / "a.md", root=tmp_path)
    assert len(errors) == 2, errors
    assert "a.md:1: tests/test_x.py::test_gone: no such test" in errors[0]
    assert "tests/test_y.py::test_here: no such file" in errors[1]


def test_readme_is_short():
    lines = (REPO / "README.md").read_text(encoding="utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_readme_starts_with_the_two_set_up_commands():
    # bench/e2e.py reads README command 1 from the first bash block; CI runs the second.
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.DOTALL | re.MULTILINE)
    assert len(blocks) >= 2
    first, second = (block.strip().split("\n") for block in blocks[:2])
    assert len(first) == 1 and first[0].startswith("python3 -m venv .venv")
    assert first[0].endswith("train_multitask.py")
    assert len(second) == 1 and second[0].endswith("-m pytest -q")


def test_bench_readme_holds_no_dated_log():
    dated = [h for h in headings(REPO / "bench" / "README.md") if DATE.search(h)]
    assert dated == [], "dated entries belong in docs/measurements/"
    assert not any("measurement log" in h.lower() for h in headings(REPO / "bench" / "README.md"))


@pytest.mark.parametrize(
    "heading, slug",
    [
        ("README command 1 at 4793215", "readme-command-1-at-4793215"),
        ("Speed: `bench/`", "speed-bench"),
        ("Do the papers' findings hold here? `reproduce.py`", "do-the-papers-findings-hold-here-reproducepy"),
        ("Course assignment: Part 1, Part 2 and the submission zip",
         "course-assignment-part-1-part-2-and-the-submission-zip"),
        ("Throughput, fp32, at 9099684", "throughput-fp32-at-9099684"),
        ("`--task-file`: your own tasks", "--task-file-your-own-tasks"),
        ("A [linked](x.md) heading", "a-linked-heading"),
    ],
)
def test_slugify_as_github(heading, slug):
    assert slugify(heading) == slug


def test_the_checker_finds_broken_links(tmp_path):
    (tmp_path / "b.md").write_text("# Same\n\ntext\n\n## Same\n\nSub title\n---------\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "a.md").write_text(
        "# A\n\n"
        "[good](b.md#same) [second](b.md#same-1) [setext](b.md#sub-title) [folder](folder)\n"
        "[here](#a) [web](https://example.com/missing) [mail](mailto:x@example.com)\n"
        "[missing file](missing.md) and [missing anchor](b.md#nope) and [third](b.md#same-2)\n"
        "`[in code](missing-too.md)`\n\n"
        "```\n[in a block](missing-three.md)\n```\n\n"
        "[by label][lbl] and [undefined][nolabel]\n\n"
        "[lbl]: b.md#absent\n"
    )
    errors = check_links(tmp_path / "a.md", root=tmp_path)
    assert len(errors) == 5, errors
    assert any("(missing.md): no such file" in e for e in errors)
    assert any("no heading #nope in b.md" in e for e in errors)
    assert any("no heading #same-2 in b.md" in e for e in errors)
    assert any("no heading #absent in b.md" in e for e in errors)
    assert any("[nolabel]: no such label" in e for e in errors)
    assert not any("missing-too" in e or "missing-three" in e for e in errors)
