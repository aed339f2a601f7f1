"""Generated good and bad data files: every case either loads correctly or raises a
DataError whose message is one line starting with the file name (and naming the line)."""

import math
import pathlib
import random
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from minbert.errors import DataError  # noqa: E402
from tasks import data  # noqa: E402

HEADERS = {
    "sst": ["", "id", "sentence", "sentiment"],
    "quora": ["", "id", "sentence1", "sentence2", "is_duplicate"],
    "sts": ["", "id", "sentence1", "sentence2", "similarity"],
}
TEST_HEADERS = {
    "sst": ["0", "", "id", "sentence"],  # the course's SST test file has two index columns
    "quora": ["", "id", "sentence1", "sentence2"],
    "sts": ["", "id", "sentence1", "sentence2"],
}
GOOD_LABEL = {"sst": "3", "quora": "1.0", "sts": "2.4"}


class Warnings(list):
    def __call__(self, message):
        self.append(message)


def good_row(task, i, label=None):
    label = GOOD_LABEL[task] if label is None else label
    if task == "sst":
        return [str(i), f"id{i}", f" sentence number {i} .", label]
    return [str(i), f"id{i}", f"first question {i}?", f"second question {i}?", label]


def good_test_row(task, i):
    if task == "sst":
        return [str(i), f"{i}.0", f"id{i}", f" sentence number {i} ."]
    return [str(i), f"id{i}", f"first {i}", f"second {i}"]


def render(rows, newline="\n"):
    return "".join("\t".join(r) + newline for r in rows)


def write(tmp_path, task, split, text, encoding="utf-8"):
    path = data.split_path(tmp_path, task, split)
    if isinstance(text, str):
        text = text.encode(encoding)
    path.write_bytes(text)
    return path


def make_file(tmp_path, task, n=100, split="train", bad=None, bad_at=50):
    """A file of `n` good rows with `bad` (a raw line, without newline) inserted at row `bad_at`."""
    if split == "test":
        rows = [TEST_HEADERS[task]] + [good_test_row(task, i) for i in range(n)]
    else:
        rows = [HEADERS[task]] + [good_row(task, i) for i in range(n)]
    lines = [("\t".join(r)) for r in rows]
    if bad is not None:
        lines.insert(bad_at + 1, bad)
    return write(tmp_path, task, split, "\n".join(lines) + "\n")


def load(tmp_path, task, split="train", strict=False):
    w = Warnings()
    ds = data.read_split(tmp_path, task, split, strict=strict, warn=w)
    return ds, w


def expect_error(tmp_path, task, split="train", strict=False, line=None, contains=()):
    with pytest.raises(DataError) as exc:
        data.read_split(tmp_path, task, split, strict=strict, warn=Warnings())
    msg = str(exc.value)
    assert "\n" not in msg and "\r" not in msg, msg
    assert msg.startswith(data.split_path(tmp_path, task, split).name), msg
    if line is not None:
        assert f"line {line}" in msg, msg
    for c in contains:
        assert c in msg, msg
    return msg


# ---------------------------------------------------------------- tolerated input


@pytest.mark.parametrize("task", data.TASKS)
def test_good_file_loads(tmp_path, task):
    make_file(tmp_path, task, n=7)
    ds, w = load(tmp_path, task)
    assert w == [] and ds.n_rows == 7 and len(ds.examples) == 7 and ds.skipped == {}
    e = ds.examples[3]
    assert e.id == "id3" and e.line == 5
    if task == "sst":
        assert e.a == "sentence number 3 ." and e.b is None and e.label == 3 and type(e.label) is int
    elif task == "quora":
        assert (e.a, e.b, e.label) == ("first question 3?", "second question 3?", 1)
        assert type(e.label) is int
    else:
        assert e.label == 2.4 and type(e.label) is float


@pytest.mark.parametrize("task", data.TASKS)
def test_test_split_has_no_labels(tmp_path, task):
    make_file(tmp_path, task, n=5, split="test")
    ds, w = load(tmp_path, task, "test")
    assert w == [] and len(ds.examples) == 5 and all(e.label is None for e in ds.examples)
    # A labelled file used as the test split: the labels are ignored.
    make_file(tmp_path, task, n=5, split="train")
    data.split_path(tmp_path, task, "test").write_bytes(data.split_path(tmp_path, task, "train").read_bytes())
    ds, _ = load(tmp_path, task, "test")
    assert all(e.label is None for e in ds.examples)


def test_bom_is_tolerated(tmp_path):
    text = render([HEADERS["sst"], good_row("sst", 0), good_row("sst", 1)])
    write(tmp_path, "sst", "train", b"\xef\xbb\xbf" + text.encode())
    ds, w = load(tmp_path, "sst")
    assert w == [] and [e.id for e in ds.examples] == ["id0", "id1"]


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_crlf_and_cr_line_endings(tmp_path, newline):
    write(tmp_path, "quora", "train", render([HEADERS["quora"]] + [good_row("quora", i) for i in range(4)], newline))
    ds, w = load(tmp_path, "quora")
    assert w == [] and len(ds.examples) == 4
    assert [e.line for e in ds.examples] == [2, 3, 4, 5]
    assert all("\r" not in e.b and e.label == 1 for e in ds.examples)


def test_embedded_newline_in_quoted_field(tmp_path):
    rows = [HEADERS["sts"], good_row("sts", 0), ["1", "id1", '"two\nline ""quoted"" sentence"', "other", "3.0"],
            good_row("sts", 2)]
    write(tmp_path, "sts", "train", render(rows))
    ds, w = load(tmp_path, "sts")
    assert w == []
    assert ds.examples[1].a == 'two\nline "quoted" sentence'
    assert [e.line for e in ds.examples] == [2, 3, 5]  # the record after spans lines 3-4


def test_extra_trailing_columns_are_ignored(tmp_path):
    rows = [HEADERS["sst"] + ["extra"], good_row("sst", 0) + ["x"], good_row("sst", 1) + ["y", "z"],
            good_row("sst", 2)]
    write(tmp_path, "sst", "train", render(rows))
    ds, w = load(tmp_path, "sst")
    assert w == [] and len(ds.examples) == 3 and all(e.label == 3 for e in ds.examples)


def test_long_sentence_loads(tmp_path):
    long = "word " * 20000  # 100,000 characters
    rows = [HEADERS["sst"], good_row("sst", 0), ["1", "id1", long, "4"]]
    write(tmp_path, "sst", "train", render(rows))
    ds, w = load(tmp_path, "sst")
    assert w == [] and len(ds.examples[1].a) == len(long.strip()) and ds.examples[1].label == 4


def test_blank_lines_are_ignored(tmp_path):
    text = "\n" + render([HEADERS["sst"]]) + "\n" + render([good_row("sst", 0)]) + "\n\n"
    write(tmp_path, "sst", "train", text)
    ds, w = load(tmp_path, "sst")
    assert w == [] and ds.n_rows == 1 and ds.examples[0].line == 4


@pytest.mark.parametrize(
    "task,raw,value",
    [("sst", "0", 0), ("sst", "4.0", 4), ("sst", " 2 ", 2), ("quora", "0", 0), ("quora", "1", 1),
     ("quora", "0.0", 0), ("sts", "0", 0.0), ("sts", "5.0", 5.0), ("sts", "4.6", 4.6), ("sts", "3e0", 3.0)],
)
def test_label_formats(tmp_path, task, raw, value):
    write(tmp_path, task, "train", render([HEADERS[task], good_row(task, 0, label=raw)]))
    ds, w = load(tmp_path, task)
    assert w == [] and ds.examples[0].label == value
    assert type(ds.examples[0].label) is (float if task == "sts" else int)


def test_quoted_fields(tmp_path):
    rows = [HEADERS["quora"], ["0", '"id0"', '"a, b\tc"', '"say ""hi"""', '"0.0"']]
    write(tmp_path, "quora", "train", render(rows))
    ds, w = load(tmp_path, "quora")
    assert w == [] and (ds.examples[0].id, ds.examples[0].a, ds.examples[0].b) == ("id0", "a, b\tc", 'say "hi"')


# ---------------------------------------------------------------- unusable rows

BAD_ROWS = [
    # (task, raw line, reason)
    ("sst", "50\tidX\t only two fields", "too few fields"),
    ("sst", "50\tidX", "too few fields"),
    ("quora", "50\tidX\tfirst?\tsecond?", "too few fields"),
    ("sst", "50\tidX\t a sentence .\t", "empty label"),
    ("sst", "50\tidX\t a sentence .\t  ", "empty label"),
    ("sst", "50\tidX\t a sentence .\tpositive", "non-numeric label"),
    ("sts", "50\tidX\ta\tb\t1_0", "non-numeric label"),
    ("sts", "50\tidX\ta\tb\tnan", "non-finite label"),
    ("sts", "50\tidX\ta\tb\tinf", "non-finite label"),
    ("quora", "50\tidX\ta\tb\t-inf", "non-finite label"),
    ("sst", "50\tidX\t a sentence .\t5", "label out of range"),
    ("sst", "50\tidX\t a sentence .\t-1", "label out of range"),
    ("quora", "50\tidX\ta\tb\t2.0", "label out of range"),
    ("sts", "50\tidX\ta\tb\t5.01", "label out of range"),
    ("sts", "50\tidX\ta\tb\t-0.5", "label out of range"),
    ("sst", "50\tidX\t a sentence .\t2.5", "non-integer label"),
    ("quora", "50\tidX\ta\tb\t0.5", "non-integer label"),
    ("sst", "50\tidX\t   \t2", "empty sentence"),
    ("quora", "50\tidX\t\tb\t1.0", "empty sentence"),
    ("quora", "50\tidX\ta\t \t1.0", "empty sentence"),
    ("sts", "50\t\ta\tb\t1.0", "empty id"),
    ("sst", "50\tid7\t a duplicate .\t1", "duplicate id"),
    ("quora", "50\tid7\ta\tb\t0.0", "duplicate id"),
    # The shape of the course files' quirky Quora rows: a quoted question with doubled
    # quotes, then an empty is_duplicate.
    ("quora", '50\tidX\tAny idea?\t"""Where can I find a dress? ""Any"" forums?"\t', "empty label"),
    # An unbalanced quote that swallows the rest of the row (the tabs become text).
    ("quora", '50\tidX\tAny idea?\t"Where ""is\tit?\t1.0"', "too few fields"),
]


@pytest.mark.parametrize("task,bad,reason", BAD_ROWS)
def test_bad_row_is_skipped_with_one_warning(tmp_path, task, bad, reason):
    make_file(tmp_path, task, n=200, bad=bad, bad_at=50)
    ds, w = load(tmp_path, task)
    bad_line = 52  # header on line 1, good rows 0..49 on lines 2..51
    assert ds.n_rows == 201 and len(ds.examples) == 200
    assert ds.skipped == {reason: 1} and ds.skipped_lines == [bad_line]
    assert len(w) == 1
    assert w[0] == f"{ds.path.name}: skipped 1 of 201 rows ({reason}: 1) at lines {bad_line}"
    assert all(e.line != bad_line for e in ds.examples)
    if reason == "duplicate id":  # the first occurrence wins
        assert [e.line for e in ds.examples if e.id == "id7"] == [9]


@pytest.mark.parametrize("task,bad,reason", BAD_ROWS)
def test_bad_row_strict_raises(tmp_path, task, bad, reason):
    make_file(tmp_path, task, n=200, bad=bad, bad_at=50)
    expect_error(tmp_path, task, strict=True, line=52, contains=(reason,))


def test_bad_rows_in_test_split(tmp_path):
    make_file(tmp_path, "sts", n=200, split="test", bad="50\tid3\tdup\tdup", bad_at=10)
    ds, w = load(tmp_path, "sts", "test")
    assert ds.skipped == {"duplicate id": 1} and ds.skipped_lines == [12] and len(w) == 1


def test_warning_lists_first_five_lines_and_reasons(tmp_path):
    rows = [HEADERS["sts"]] + [good_row("sts", i) for i in range(1000)]
    for i in (10, 20, 30, 40, 50, 60):
        rows[i] = rows[i][:-1] + (["9"] if i % 20 else [""])
    write(tmp_path, "sts", "train", render(rows))
    ds, w = load(tmp_path, "sts")
    assert ds.n_rows == 1000 and len(ds.examples) == 994
    assert ds.skipped == {"empty label": 3, "label out of range": 3}
    assert ds.skipped_lines == [11, 21, 31, 41, 51]
    assert w == ["sts-train.csv: skipped 6 of 1000 rows (empty label: 3, label out of range: 3) "
                 "at lines 11, 21, 31, 41, 51, ..."]


# ---------------------------------------------------------------- too many unusable rows


@pytest.mark.parametrize("n_good,n_bad,fails", [(1, 1, False), (198, 2, False), (197, 3, True), (0, 2, True),
                                               (5, 5, True)])
def test_more_than_one_percent_unusable(tmp_path, n_good, n_bad, fails):
    rows = [HEADERS["sst"]] + [good_row("sst", i) for i in range(n_good)]
    rows += [[str(i), f"bad{i}", " x .", "7"] for i in range(n_bad)]
    write(tmp_path, "sst", "train", render(rows))
    if fails:
        expect_error(tmp_path, "sst", contains=(f"{n_bad} of {n_good + n_bad} rows", "label out of range",
                                                f"lines {n_good + 2}"))
    else:
        ds, w = load(tmp_path, "sst")
        assert len(ds.examples) == n_good and len(w) == 1


def test_wrong_delimiter_in_rows_only(tmp_path):
    rows = "\t".join(HEADERS["sst"]) + "\n" + "".join(f"{i},id{i},sentence,3\n" for i in range(50))
    write(tmp_path, "sst", "train", rows)
    expect_error(tmp_path, "sst", contains=("too few fields",))


# ---------------------------------------------------------------- wrong files


@pytest.mark.parametrize("src,dst", [("sst", "sts"), ("sst", "quora"), ("sts", "sst"), ("quora", "sst")])
def test_wrong_task_file(tmp_path, src, dst):
    text = render([HEADERS[src]] + [good_row(src, i) for i in range(5)])
    write(tmp_path, dst, "train", text)
    expect_error(tmp_path, dst, line=1, contains=("header lacks",))


def test_sts_labels_in_quora_file_fail_as_wrong_file(tmp_path):
    rows = [HEADERS["quora"]] + [good_row("quora", i, label="3.4") for i in range(20)]
    write(tmp_path, "quora", "train", render(rows))
    expect_error(tmp_path, "quora", contains=("20 of 20 rows", "non-integer label"))


@pytest.mark.parametrize("task", data.TASKS)
def test_test_file_as_train(tmp_path, task):
    make_file(tmp_path, task, n=5, split="test")
    data.split_path(tmp_path, task, "train").write_bytes(data.split_path(tmp_path, task, "test").read_bytes())
    label = HEADERS[task][-1]
    expect_error(tmp_path, task, line=1, contains=(label,))


@pytest.mark.parametrize("sep", [",", ";", "|"])
def test_not_tab_separated(tmp_path, sep):
    text = "".join(sep.join(r) + "\n" for r in [HEADERS["sts"]] + [good_row("sts", i) for i in range(5)])
    write(tmp_path, "sts", "train", text)
    expect_error(tmp_path, "sts", line=1, contains=("is it tab-separated?",))


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_not_utf8(tmp_path, encoding):
    rows = [HEADERS["sst"]] + [good_row("sst", i) for i in range(5)] + [["5", "id5", " café crème .", "2"]]
    write(tmp_path, "sst", "train", render(rows), encoding=encoding)
    msg = expect_error(tmp_path, "sst", contains=("not UTF-8", "byte offset"))
    if encoding == "latin-1":
        assert "line 7" in msg


def test_binary_garbage(tmp_path):
    write(tmp_path, "sst", "dev", bytes(random.Random(0).randrange(256) for _ in range(4000)))
    expect_error(tmp_path, "sst", "dev")


@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"\n\n", b"  \r\n\t\n"])
def test_empty_file(tmp_path, content):
    write(tmp_path, "quora", "dev", content)
    expect_error(tmp_path, "quora", "dev", contains=("empty",))


@pytest.mark.parametrize("content", ["\tid\tsentence\tsentiment\n", "\tid\tsentence\tsentiment",
                                     "\tid\tsentence\tsentiment\n\n\n"])
def test_header_only(tmp_path, content):
    write(tmp_path, "sst", "train", content)
    expect_error(tmp_path, "sst", contains=("no data rows",))


def test_runaway_quote_larger_than_field_limit(tmp_path):
    rows = [HEADERS["sst"], ["0", "id0", '"never closed', "1"]]
    rows += [good_row("sst", i) for i in range(1, 6000)]  # > 131,072 characters
    write(tmp_path, "sst", "train", render(rows))
    expect_error(tmp_path, "sst", line=2)


def test_nul_byte(tmp_path):
    write(tmp_path, "sst", "train", render([HEADERS["sst"], good_row("sst", 0), ["1", "id1", " a\0b .", "1"]]))
    try:
        ds, _ = load(tmp_path, "sst")
    except DataError as exc:
        assert str(exc).startswith("ids-sst-train.csv") and "\n" not in str(exc)
    else:
        assert len(ds.examples) == 2


def test_path_is_a_directory(tmp_path):
    data.split_path(tmp_path, "sts", "dev").mkdir()
    expect_error(tmp_path, "sts", "dev", contains=("cannot read",))


# ---------------------------------------------------------------- missing files, bad names


@pytest.mark.parametrize("split", ["train", "dev"])
def test_missing_train_or_dev(tmp_path, split):
    msg = expect_error(tmp_path, "sts", split, contains=("not found",))
    assert "--data-dir" in msg and data.DATA_DIR_ENV in msg and str(tmp_path) in msg


def test_missing_train_in_read_task(tmp_path):
    make_file(tmp_path, "sst", split="dev")
    expect_error(tmp_path, "sst", "train")
    with pytest.raises(DataError):
        data.read_task(tmp_path, "sst", warn=Warnings())


def test_missing_test_is_none_with_one_warning(tmp_path):
    make_file(tmp_path, "quora", n=5, split="train")
    make_file(tmp_path, "quora", n=5, split="dev")
    w = Warnings()
    out = data.read_task(tmp_path, "quora", warn=w)
    assert set(out) == {"train", "dev", "test"}
    assert out["test"] is None and len(out["train"].examples) == 5
    assert len(w) == 1 and w[0].startswith("quora-test-student.csv not found") and "\n" not in w[0]


@pytest.mark.parametrize("task,split", [("cola", "train"), ("SST", "train"), ("sst", "test-student"),
                                        ("sst", "validation"), (None, "dev")])
def test_unknown_task_or_split(tmp_path, task, split):
    with pytest.raises(DataError) as exc:
        data.read_split(tmp_path, task, split, warn=Warnings())
    assert "\n" not in str(exc.value) and "unknown" in str(exc.value)
    with pytest.raises(DataError):
        data.split_path(tmp_path, task, split)


def test_unknown_task_in_read_task(tmp_path):
    with pytest.raises(DataError):
        data.read_task(tmp_path, "imdb")


# ---------------------------------------------------------------- random mutations


def _mutate(rng, text):
    pieces = ['"', "\t", "\n", "\r\n", "", "nan", "9", "\ufeff", "\x00", "é", " ", '""', "-1"]
    chars = list(text)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        pos = rng.randrange(len(chars) + 1)
        if op < 0.5:
            chars.insert(pos, rng.choice(pieces))
        elif op < 0.8 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif chars:
            chars[min(pos, len(chars) - 1)] = rng.choice(pieces)
    return "".join(chars)


@pytest.mark.parametrize("task", data.TASKS)
def test_random_mutations_load_or_fail_cleanly(tmp_path, task):
    rng = random.Random(1234 + data.TASKS.index(task))
    base = render([HEADERS[task]] + [good_row(task, i) for i in range(30)])
    outcomes = {"ok": 0, "error": 0}
    for _ in range(150):
        text = _mutate(rng, base)
        raw = text.encode("utf-8")
        if rng.random() < 0.1:  # sometimes a stray non-UTF-8 byte
            cut = rng.randrange(len(raw) + 1)
            raw = raw[:cut] + b"\xff" + raw[cut:]
        path = write(tmp_path, task, "train", raw)
        w = Warnings()
        try:
            ds = data.read_split(tmp_path, task, "train", warn=w)
        except DataError as exc:
            msg = str(exc)
            assert msg.startswith(path.name) and "\n" not in msg and "\r" not in msg, msg
            outcomes["error"] += 1
            continue
        outcomes["ok"] += 1
        assert len(w) <= 1 and all("\n" not in m and m.startswith(path.name) for m in w)
        assert ds.n_rows == len(ds.examples) + sum(ds.skipped.values())
        assert bool(w) == bool(ds.skipped)
        assert len({e.id for e in ds.examples}) == len(ds.examples)
        for e in ds.examples:
            assert e.a and e.a == e.a.strip() and e.line >= 2
            if task == "sts":
                assert isinstance(e.label, float) and math.isfinite(e.label) and 0 <= e.label <= 5
            else:
                assert type(e.label) is int and 0 <= e.label <= (4 if task == "sst" else 1)
    assert outcomes["ok"] > 0 and outcomes["error"] > 0


def test_quote_spanning_lines_keeps_line_numbers(tmp_path):
    lines = ["\t".join(HEADERS["quora"])] + ["\t".join(good_row("quora", i)) for i in range(10)]
    lines += ['10\tidX\t"open question', 'still inside" tail\tb\t1.0']
    lines += ["\t".join(good_row("quora", i)) for i in range(11, 15)]
    write(tmp_path, "quora", "train", "\n".join(lines) + "\n")
    ds, w = load(tmp_path, "quora")
    assert w == [] and ds.n_rows == 15
    merged = [e for e in ds.examples if e.id == "idx"][0]  # ids lower-cased, as the course reads them
    assert merged.line == 12 and merged.a.startswith("open question\nstill inside")
    assert [e.line for e in ds.examples if e.id == "id11"] == [14]
