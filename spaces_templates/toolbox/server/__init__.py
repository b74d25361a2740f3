"""The toolbox environment server."""
