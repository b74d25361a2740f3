"""The connect-four environment server."""
