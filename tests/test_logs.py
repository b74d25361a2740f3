"""What the terminal shows while serving: uvicorn's access lines, but none for the web page's own requests."""

import logging

from app.logs import PageRequests


def access(path: str, status: int) -> logging.LogRecord:
    """An access line as uvicorn logs it: client, method, path, HTTP version, status."""
    return logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", path, "1.1", status),
        None,
    )


def test_the_pages_own_requests_are_left_out_unless_they_fail() -> None:
    shown = PageRequests().filter
    assert not shown(access("/gradio_api/queue/data?session_hash=x", 200))
    assert not shown(access("/assets/Index-x.js", 200))
    assert not shown(access("/theme.css?v=1", 200))
    assert shown(access("/gradio_api/queue/join", 500))
    assert shown(access("/api/environments", 200))
    assert shown(access("/endpoints/abc/reset", 200))
    assert shown(access("/?env=template:maze", 200))
