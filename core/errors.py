"""Every error envhub raises on purpose, in one family: each carries the HTTP status it means and its message.

One handler (app.main) turns any of them into `{"detail": "..."}` with that status (plus what a
subclass adds to its payload); the UI shows the same message, and the gateway raises them too.
"""

from typing import Any

__all__ = [
    "BackendUnavailableError",
    "BadRequestError",
    "ConflictError",
    "EnvhubError",
    "ForbiddenError",
    "HubUnavailableError",
    "InvalidInputError",
    "LaunchError",
    "NonConformingError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RefusedURLError",
    "ShuttingDownError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UpstreamError",
]


class EnvhubError(Exception):
    status_code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def payload(self) -> dict[str, Any]:
        """The JSON body of the error response: the message as detail, and what a subclass adds."""
        return {"detail": self.message}


class BadRequestError(EnvhubError):
    """A request envhub cannot make sense of (a sign-in callback without its state, a path out of an endpoint)."""

    status_code = 400


class UnauthorizedError(EnvhubError):
    status_code = 401


class ForbiddenError(EnvhubError):
    status_code = 403


class NotFoundError(EnvhubError):
    status_code = 404


class ConflictError(EnvhubError):
    status_code = 409


class PayloadTooLargeError(EnvhubError):
    status_code = 413


class InvalidInputError(EnvhubError):
    status_code = 422


class RefusedURLError(InvalidInputError):
    """A user-supplied URL envhub will not fetch, and why."""


class NonConformingError(InvalidInputError):
    """An endpoint failed core checks; the response names them and the filed report."""

    def __init__(self, message: str, failing: list[dict[str, Any]], report_id: int) -> None:
        super().__init__(message)
        self.failing = failing
        self.report_id = report_id

    def payload(self) -> dict[str, Any]:
        return {"detail": self.message, "failing": self.failing, "report_id": self.report_id}


class TooManyRequestsError(EnvhubError):
    """A limit is reached: endpoints running, checks at once."""

    status_code = 429


class UpstreamError(EnvhubError):
    """An environment's server did not answer as it should (it stopped, or redirected out of its endpoint)."""

    status_code = 502


class LaunchError(UpstreamError):
    """The environment could not be started; the message says why and what to do."""


class HubUnavailableError(EnvhubError):
    """The Hub could not be reached or kept failing after retries."""

    status_code = 503


class ShuttingDownError(EnvhubError):
    """envhub is stopping: work under way is given up, and says so."""

    status_code = 503


class BackendUnavailableError(EnvhubError):
    """A launch backend's engine (Docker, say) cannot be reached."""

    status_code = 503
