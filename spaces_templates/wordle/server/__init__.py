"""The wordle environment server."""
