import tasks.openmp  # noqa: F401  (first: OMP_WAIT_POLICY is read when torch loads)

import json
import shutil

import pytest

pytest.register_assert_rewrite("tests.helpers")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from tests.helpers import find_data_dir  # noqa: E402
from tests.helpers.runs import TINY  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run where CUDA is available and are skipped, with the reason, elsewhere."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def data_dir():
    found = find_data_dir()
    if found is None:
        pytest.skip("course data not found (set MINBERT_DATA_DIR)")
    return found


@pytest.fixture(scope="session")
def pretrained():
    """The embedded checkpoint, loaded once; tests that change a model deep-copy it."""
    import minbert
    return minbert.from_pretrained("minilm")


@pytest.fixture(scope="session")
def tokenizer(pretrained):
    import minbert
    return minbert.Tokenizer.from_folder(pretrained.source.folder)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _matmul_precision():
    """A run on CUDA sets TF32 for its whole process (`--no-tf32` unset; bench gpu's fp32 comparison too):
    each test starts from the session's precision, so an fp32 parity test after such a run compares IEEE."""
    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)


@pytest.fixture(autouse=True)
def _course_predictions(tmp_path, monkeypatch):
    """Runs copy their predictions into the course-level folder: a test's own, never the checkout's."""
    monkeypatch.setenv("MINBERT_PREDICTIONS_DIR", str(tmp_path / "course-predictions"))


@pytest.fixture(scope="session")
def small_data_dir(data_dir, tmp_path_factory):
    """The course's files cut to their first rows: real format, seconds to train on."""
    out = tmp_path_factory.mktemp("small-data")
    for src in data_dir.glob("*.csv"):
        if "cfimdb" in src.name:
            continue
        lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
        (out / src.name).write_text("".join(lines[:41]), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def part1_data(data_dir, tmp_path_factory):
    """The course's SST and CFIMDB files cut to their first rows (real format)."""
    out = tmp_path_factory.mktemp("part1-data")
    for src in data_dir.glob("ids-*.csv"):
        lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
        (out / src.name).write_text("".join(lines[:25]), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A 2-layer BERT folder; its tokenizer_config.json claims 512 tokens, the model has 64 positions."""
    import minbert
    folder = tmp_path_factory.mktemp("tiny-bert")
    source = minbert.resolve("minilm")[0]
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(source / name, folder / name)
    (folder / "config.json").write_text(json.dumps(TINY))
    torch.manual_seed(0)
    model = minbert.BertModel(minbert.BertConfig(**TINY))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "model.safetensors"))
    return folder


@pytest.fixture(scope="session")
def base(tiny_model, small_data_dir):
    return ["--model", str(tiny_model), "--batch-size", "8", "--eval-batch-size", "64", "--precision", "fp32",
            "--data-dir", str(small_data_dir), "--checkpoint-every", "2", "--device", "cpu"]
