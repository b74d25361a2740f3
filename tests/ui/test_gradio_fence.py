"""A fence around the two settings of Gradio's queue that envhub's page tunes (app/ui/page.py): they are plain
attributes, so a Gradio that renamed one would be set in vain and silently. This fails instead, naming it."""

import inspect

import pytest
from gradio.queueing import Queue


@pytest.mark.parametrize("name", ["sleep_when_free", "ANAYLTICS_CACHE_FREQUENCY"])
def test_the_queue_settings_envhub_tunes_are_ones_gradios_queue_reads(name: str) -> None:
    source = inspect.getsource(Queue)
    assert f"self.{name}" in source.replace(f"self.{name} =", ""), (
        f"gradio's Queue no longer reads {name}: see what took its place and tune that in app/ui/page.py"
    )
