"""Server side of the arithmetic tasks environment."""
