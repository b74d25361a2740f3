"""The zygote's parent side on its own: when a launch may be forked, and a zygote that fails to start.

Forked servers playing through the gateway, stopping, crashes and restarts are in
test_endpoints.py, where envhub launches them as users do.
"""

import os
from pathlib import Path

import pytest

from hosting.runtimes.zygote import ServerRequest, Zygote, forkable


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, True),
        ({"OPENENV_MODE": "production", "COUNT_START": "3", "HF_TOKEN": "hf_x"}, True),
        ({"PYTHONHASHSEED": "0"}, False),  # read by the interpreter as it starts
        ({"OMP_NUM_THREADS": "4"}, False),  # numpy's BLAS sizes its threads at import
        ({"GRADIO_ANALYTICS_ENABLED": "False"}, False),  # gradio reads its settings at import
        ({"HF_HUB_OFFLINE": "1"}, False),  # huggingface_hub's constants are set at import
        ({"TZ": "Europe/Paris"}, False),
    ],
)
def test_launches_that_set_start_up_variables_start_from_scratch(env: dict[str, str], expected: bool) -> None:
    assert forkable(env) is expected


def test_a_zygote_that_does_not_start_is_not_used(tmp_path: Path) -> None:
    zygote = Zygote(tmp_path / "runtime", {"PATH": os.environ["PATH"]}, ready_timeout_s=0.01)
    request = ServerRequest("server.app:app", str(tmp_path), [], {}, str(tmp_path / "server.log"), 1)

    assert zygote.spawn(request) is None
    assert zygote.broken is not None
    assert "did not answer within 0.01 s" in zygote.broken
    assert zygote.pid is None  # killed, not left importing
    assert zygote.spawn(request) is None  # and not tried again
    zygote.close()
