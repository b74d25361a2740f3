"""What envhub's terminal shows: `serve` logs what happens, but not the web page's own requests (its assets and
Gradio's queue, a line per poll); every other command logs only warnings, so that its output is what was asked."""

import logging

# Requests the web page makes by itself: shown only when they fail on the server's side.
PAGE_PATHS = ("/assets/", "/static/", "/gradio_api/", "/theme.css", "/favicon.ico", "/manifest.json", "/config")
_QUIET = {
    "huggingface_hub": logging.ERROR,  # envhub reports Hub failures itself, in one line; not each retry
    "httpx": logging.WARNING,  # a line per outbound request (gateway, probes, checks) would drown the rest
    "httpx2": logging.WARNING,  # the model client's
    "alembic": logging.WARNING,  # a line per migration step, on every start
}


class PageRequests(logging.Filter):
    """Drops uvicorn's access lines of the web page's own requests, unless they failed with a 5xx."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) < 5:
            return True
        path, status = str(args[2]), args[4]
        failed = isinstance(status, int) and status >= 500
        return failed or not path.startswith(PAGE_PATHS)


def configure(command: str) -> None:
    """Logging for one CLI command; call it before anything logs."""
    level = logging.INFO if command == "serve" else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for name, quiet in _QUIET.items():
        logging.getLogger(name).setLevel(quiet)


def quiet_page_requests() -> None:
    """After uvicorn has configured its loggers: no access line per page asset or queue poll."""
    logging.getLogger("uvicorn.access").addFilter(PageRequests())
