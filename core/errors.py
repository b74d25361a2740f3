"""Every error envhub raises on purpose, in one family: each carries the HTTP status it means, its message and a
stable code.

One handler (app.main) turns any of them into `{"detail": "...", "code": "..."}` with that status (plus
what a subclass adds to its payload); the UI shows the same message, and the gateway raises them too. The
message is for people and may be reworded; the code is for programs and is not: each class has one, and a
raise may name a finer one where one class covers cases a client tells apart (which limit was reached).
"""

from typing import Any

__all__ = [
    "BackendUnavailableError",
    "BadRequestError",
    "ConflictError",
    "EndpointStartingError",
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
    code = "internal_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code  # this raise's finer code, in place of its class's

    def payload(self) -> dict[str, Any]:
        """The JSON body of the error response: the message as detail, its code, and what a subclass adds."""
        return {"detail": self.message, "code": self.code}

    def headers(self) -> dict[str, str]:
        """The error response's headers beyond the JSON body's."""
        return {}


class BadRequestError(EnvhubError):
    """A request envhub cannot make sense of (a sign-in callback without its state, a path out of an endpoint)."""

    status_code = 400
    code = "bad_request"


class UnauthorizedError(EnvhubError):
    status_code = 401
    code = "unauthorized"


class ForbiddenError(EnvhubError):
    status_code = 403
    code = "forbidden"


class NotFoundError(EnvhubError):
    status_code = 404
    code = "not_found"


class ConflictError(EnvhubError):
    status_code = 409
    code = "conflict"


class SlotsInUseError(ConflictError):
    """envhub's own sessions on an endpoint's replicas (a quality report's) gave way to its clients: a client's
    session waited for a slot, or none was free."""

    code = "slots_in_use"


class PayloadTooLargeError(EnvhubError):
    status_code = 413
    code = "payload_too_large"


class InvalidInputError(EnvhubError):
    status_code = 422
    code = "invalid_input"


class RefusedURLError(InvalidInputError):
    """A user-supplied URL envhub will not fetch, and why."""

    code = "refused_url"


class NonConformingError(InvalidInputError):
    """An endpoint failed core checks; the response names them and the filed report."""

    code = "non_conforming"

    def __init__(self, message: str, failing: list[dict[str, Any]], report_id: int) -> None:
        super().__init__(message)
        self.failing = failing
        self.report_id = report_id

    def payload(self) -> dict[str, Any]:
        return super().payload() | {"failing": self.failing, "report_id": self.report_id}


class TooManyRequestsError(EnvhubError):
    """A limit is reached: endpoints running, checks at once."""

    status_code = 429
    code = "too_many_requests"


class UpstreamError(EnvhubError):
    """An environment's server did not answer as it should (it stopped, or redirected out of its endpoint)."""

    status_code = 502
    code = "upstream_error"


class LaunchError(UpstreamError):
    """The environment could not be started; the message says why and what to do."""

    code = "launch_failed"


class EndpointStartingError(EnvhubError):
    """An endpoint has no server ready yet (it is starting, or starting again with envhub): clients retry."""

    status_code = 503
    code = "endpoint_starting"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "5"}


class HubUnavailableError(EnvhubError):
    """The Hub could not be reached or kept failing after retries."""

    status_code = 503
    code = "hub_unavailable"


class ShuttingDownError(EnvhubError):
    """envhub is stopping: work under way is given up, and says so."""

    status_code = 503
    code = "shutting_down"


class BackendUnavailableError(EnvhubError):
    """A launch backend's engine (Docker, say) cannot be reached."""

    status_code = 503
    code = "backend_unavailable"
