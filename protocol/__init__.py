"""The one OpenEnv client: everything envhub knows of the protocol's wire is here.

frames: WebSocket and JSON-RPC messages; schemas: `$ref` resolution and example values;
tools: MCP tool lists, the tool-call rule, example actions; interface: what a server says
about itself; health: GET /health and one reset; client: openenv's client on a pinned socket.
The conformance checks speak the wire raw on purpose (they test what a lenient client
would forgive), using the same names and rules from here.
"""
