"""Server side of the Lights Out environment."""
