"""The clients that reach an environment's server over the network: its /ws (ws), its health probe (health), and
what it says about itself (interface). The protocol's pure vocabulary they speak is protocol/."""
