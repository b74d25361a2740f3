"""The arithmetic tasks environment served over HTTP and WebSocket by openenv's create_app."""

import os

from fastapi import Request
from fastapi.responses import JSONResponse
from models import ArithmeticAction, ArithmeticObservation, ArithmeticState
from openenv.core.env_server.http_server import create_app

from server.environment import ArithmeticEnvironment
from server.options import InvalidResetOption
from server.tasks import UnknownSplitError


def max_concurrent_envs() -> int:
    """Sessions served at once; each WebSocket connection holds its own environment."""
    return max(1, int(os.environ.get("MAX_CONCURRENT_ENVS", "64")))


async def unknown_split(request: Request, error: Exception) -> JSONResponse:
    # openenv's Task API routes only map IndexError (400) and NotImplementedError (501); anything else would be a 500.
    return JSONResponse({"detail": str(error), "code": "split_unknown"}, status_code=404)


async def invalid_reset_option(request: Request, error: Exception) -> JSONResponse:
    # openenv's HTTP /reset lets an exception from reset() escape as a bare 500; a bad option is the caller's error.
    code = error.code if isinstance(error, InvalidResetOption) else "reset_option_invalid"
    return JSONResponse({"detail": str(error), "code": code}, status_code=422)


app = create_app(
    ArithmeticEnvironment,
    ArithmeticAction,
    ArithmeticObservation,
    env_name="arithmetic_tasks",
    max_concurrent_envs=max_concurrent_envs(),
    state_cls=ArithmeticState,
)
app.add_exception_handler(UnknownSplitError, unknown_split)
app.add_exception_handler(InvalidResetOption, invalid_reset_option)
