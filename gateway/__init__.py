"""The data plane: what carries trainers' and agents' traffic to environment servers, asyncio only."""

__all__: list[str] = []
