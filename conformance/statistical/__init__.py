"""The statistical lane: reference players play an endpoint, and seven checks say whether it teaches (RFC 008)."""
