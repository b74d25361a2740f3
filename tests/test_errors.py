"""Errors' stable codes: one per kind of error, for programs to tell them apart while the messages stay free to
change; a raise may name a finer one."""

import re

from core import errors
from core.errors import EnvhubError, NonConformingError, TooManyRequestsError


def test_each_kind_of_error_has_a_code_of_its_own() -> None:
    kinds = [getattr(errors, name) for name in errors.__all__]
    codes = {kind.code for kind in kinds}

    assert len(codes) == len(kinds), sorted(kind.code for kind in kinds)
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", code) for code in codes), codes


def test_a_raise_names_a_finer_code_without_changing_its_kinds() -> None:
    message = "this server runs at most 2 endpoints; stop one first"
    limit = TooManyRequestsError(message, code="endpoints_limit")

    assert limit.payload() == {"detail": message, "code": "endpoints_limit"}
    assert TooManyRequestsError("checks at once").payload()["code"] == "too_many_requests"
    assert (limit.status_code, TooManyRequestsError.code) == (429, "too_many_requests")


def test_what_a_kind_adds_to_its_payload_comes_with_the_code() -> None:
    refused = NonConformingError("2 core checks fail", [{"id": "14"}], 7)

    assert refused.payload() == {
        "detail": "2 core checks fail",
        "code": "non_conforming",
        "failing": [{"id": "14"}],
        "report_id": 7,
    }
    assert isinstance(refused, EnvhubError)
