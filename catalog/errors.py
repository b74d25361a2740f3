"""The one exception family the domain raises; each carries the HTTP status it means."""

from typing import Any


class EnvhubError(Exception):
    status_code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def payload(self) -> dict[str, Any]:
        """The JSON body of the error response: the message as detail, and what a subclass adds."""
        return {"detail": self.message}


class NotFoundError(EnvhubError):
    status_code = 404


class InvalidInputError(EnvhubError):
    status_code = 422


class UnauthorizedError(EnvhubError):
    status_code = 401


class ForbiddenError(EnvhubError):
    status_code = 403


class ConflictError(EnvhubError):
    status_code = 409


class TooManyRequestsError(EnvhubError):
    status_code = 429


class HubUnavailableError(EnvhubError):
    """The Hub could not be reached or kept failing after retries."""

    status_code = 503
