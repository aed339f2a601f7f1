import pytest

from tasks.task_file import declare_tasks
from tests.helpers.glue import write_cola, write_mrpc


@pytest.fixture
def glue_dir(tmp_path):
    folder = tmp_path / "glue"
    folder.mkdir()
    labels = write_cola(folder)
    write_mrpc(folder)
    yield folder, labels
    declare_tasks(None)  # leave the registry as the course's
