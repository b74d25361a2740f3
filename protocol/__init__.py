"""The OpenEnv vocabulary, with no I/O: everything envhub knows of the protocol's wire is here.

frames: WebSocket and JSON-RPC messages; schemas: `$ref` resolution and example values;
tools: MCP tool lists, the tool-call rule, example actions; observations: what an observation holds.
The clients that speak it to a server are in envclient/.
The conformance checks speak the wire raw on purpose (they test what a lenient client
would forgive), using the same names and rules from here.
"""
