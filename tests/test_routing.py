"""Gateway paths, built and parsed in one place, and the rules that keep requests and redirects inside one."""

import pytest

from gateway.paths import endpoint_in_path, gateway_location, gateway_path, inner_path

UPSTREAM = "http://127.0.0.1:5000"


def test_the_gateway_path_is_built_and_parsed_alike() -> None:
    assert gateway_path("3f9c1a2b7d") == "/endpoints/3f9c1a2b7d"
    assert endpoint_in_path(gateway_path("3f9c1a2b7d")) == "3f9c1a2b7d"
    assert endpoint_in_path("/endpoints/3f9c1a2b7d/") == "3f9c1a2b7d"
    assert endpoint_in_path("/endpoints/3f9c1a2b7d/health") is None
    assert endpoint_in_path("/api/endpoints/3f9c1a2b7d") is None


@pytest.mark.parametrize(
    ("path", "inside"),
    [("", ""), ("health", "health"), ("a/../b", "b"), ("a/./b/", "a/b/"), ("./", ""), ("web/", "web/")],
)
def test_dot_segments_are_resolved_inside_the_endpoint(path: str, inside: str) -> None:
    assert inner_path(path) == inside


@pytest.mark.parametrize("path", ["..", "../../api/me", "a/../../b", "a/b/../../.."])
def test_a_path_that_climbs_out_is_refused(path: str) -> None:
    assert inner_path(path) is None


@pytest.mark.parametrize(
    ("location", "asked", "kept"),
    [
        ("/web/", "web", "/endpoints/ab/web/"),
        ("/endpoints/ab/web/", "web", "/endpoints/ab/web/"),
        ("/endpoints/ab", "x", "/endpoints/ab"),
        ("/", "x", "/endpoints/ab/"),
        (f"{UPSTREAM}/web/?tab=1#top", "web", "/endpoints/ab/web/?tab=1#top"),
        ("web/", "web", "/endpoints/ab/web/"),
        ("../x", "a/b", "/endpoints/ab/x"),
        ("?page=2", "list", "/endpoints/ab/list?page=2"),
    ],
)
def test_redirects_are_kept_in_the_gateway_path(location: str, asked: str, kept: str) -> None:
    assert gateway_location(location, UPSTREAM, "ab", asked) == kept


@pytest.mark.parametrize(
    ("location", "asked"),
    [
        ("https://elsewhere.example/", "web"),
        ("//elsewhere.example/x", "web"),
        ("http://127.0.0.1:5001/web/", "web"),  # another port is another origin
        ("/endpoints/ab/../../api/me", "x"),
        ("/../api/me", "x"),
        ("../../api/me", "web"),
    ],
)
def test_redirects_out_of_the_endpoint_are_refused(location: str, asked: str) -> None:
    assert gateway_location(location, UPSTREAM, "ab", asked) is None
