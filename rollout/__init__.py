"""How a player meets an environment, for whoever plays one: the brief a model is given and how its replies are read
(harness), the players (players: the random and first-legal baselines; model: any OpenAI-compatible server), and one
episode played to its end over an endpoint's session (episodes; door: an MCP environment's, through its MCP door).
Evaluations run it over many episodes; the quality suite and the Play tab's autoplay use its players and brief."""
