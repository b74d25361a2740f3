"""The playground connects to live URLs other than envhub's own endpoints only through the outbound guard."""

import asyncio

import pytest

from app.ui.live import outbound_refusal
from catalog.outbound import OutboundGuard

OWN = "http://envhub.test/endpoints/"


def refusal(url: str, *, allow_private: bool = False) -> str | None:
    return asyncio.run(outbound_refusal(OutboundGuard(allow_private=allow_private), url, OWN))


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000", "http://10.0.0.7", "http://169.254.169.254/latest", "http://[::1]:8000"],
)
def test_private_and_metadata_addresses_are_refused(url: str) -> None:
    reason = refusal(url)
    assert reason is not None
    assert "refused" in reason or "metadata" in reason


def test_envhubs_own_endpoints_and_public_hosts_are_allowed() -> None:
    assert refusal(OWN + "3f9c1a2b7d") is None
    assert refusal("https://93.184.216.34") is None


def test_local_development_may_allow_private_addresses() -> None:
    assert refusal("http://127.0.0.1:8000", allow_private=True) is None
    assert refusal("http://169.254.169.254", allow_private=True) is not None  # metadata: never
