"""What the Launch tab says of backend options it cannot use: where the JSON breaks, and what an option takes."""

import pytest
from pydantic import ValidationError

from app.ui.launch import _reason, parse_options
from hosting.options import LaunchRequest


def refused(options: object) -> str:
    with pytest.raises(ValidationError) as caught:
        LaunchRequest.model_validate({"environment": "template:maze", "backend": "process", "options": options})
    return _reason(caught.value)


def test_options_that_are_not_json_say_where_and_show_an_example() -> None:
    with pytest.raises(ValueError, match=r"not valid JSON \(Extra data at line 1, column 4\).*\{\"replicas\": 2\}"):
        parse_options("{} x")
    with pytest.raises(ValueError, match="must be one JSON object"):
        parse_options("[1]")
    assert parse_options("") == {}


def test_an_option_of_the_wrong_shape_says_what_it_takes() -> None:
    said = refused({"replicas": "2"})
    assert said.startswith("option replicas: takes servers behind the endpoint's one URL: a count N")
    assert "ReplicaRange" not in said and "instance of" not in said
    assert refused({"replicas": {"min": "a"}}).startswith("option replicas.min: Input should be a valid integer")
    unknown = refused({"colour": 1})
    assert unknown.startswith("the process backend takes [") and unknown.endswith("not ['colour']")
