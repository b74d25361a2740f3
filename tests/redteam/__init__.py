"""Red-team tests: each module attacks a real envhub over the wire, as a hostile client or a hostile server of
our own, and asserts the door holds. Read together, they are envhub's threat model, one entry per door:

- The gateway: a replica's endless first message, an answer read whole and a client's body are bounded
  however long they claim to be; frames a client must never send get RFC 6455's close codes; a request head
  that never arrives whole gets 408; a percent-encoded line break stays encoded on its way upstream; unknown
  endpoint ids cost no SQL on the event loop; a foreign web page's sockets are refused, idle or junk-sending
  sockets wait without growing a pool, one client may have only so many sessions waiting, and a waiting one
  parks only so many bytes; a request head that never ends gets 431 and stalls no one else, a body that never
  arrives whole gets 408 (test_gateway). Through the MCP door and /ws alike, sessions opened to hold slots
  rather than to play (door sessions, openenv's own MCP sessions, idle sockets) grow no pool, one client holds
  only its share of an endpoint, a door session nobody calls gives its slot back (its next call takes one again
  and says its episode was lost), and a quiet /ws session yields its slot to a waiting one (test_door_slots).
- The MCP door: a replica's frame claiming exabytes is refused by its header (1009) and messages it sends
  unasked past the same 16 MiB (1008), both at a bounded cost in memory; a 64 MiB /schema is cut at 1 MiB; a
  body nested too deep is a JSON-RPC parse error, not a 500; a /schema read that failed does not shut the door
  until envhub restarts (test_mcp_door).
- Recordings: an anonymous client's large tool arguments and reset options over many episodes are kept as a
  start and a sha256, within a budget per session and per client, the oldest episodes going first; reading a
  large recording back costs envhub a bounded amount of memory (test_recordings).
- Access: a private endpoint answers only its owner's Hub token or its own token, on HTTP, /ws and /mcp;
  listings show strangers nothing of an endpoint's variables, log or servers; a Space's own server never
  receives the Hub token it was launched with (test_access).
- Shared Spaces: stopping one of two endpoints launched on one Space (same namespace and name) neither pauses
  it nor makes the other replace its replica; the last one to stop pauses it (tests/test_spaces.py).
- Hub code: a Space's Dockerfile that copies from outside its repo cannot make the process backend serve from
  outside the Space's snapshot (test_snapshots).
- Model calls: a model server that redirects an evaluation's requests to an internal address reaches nothing
  there, and nothing an internal address would answer reaches a run, its episodes or the API
  (test_model_calls).
- Tasksets: a linked dataset whose files are small and huge once read (one long string every row shares, one
  huge value, one huge line) costs envhub a bounded amount of memory: it is read a few rows at a time, or what
  it passes is that dataset's problem; an evaluation's rows are capped; dataset downloads are capped per request
  and per hour, and one client asking again and again, or one dataset of many files, spends only its own share
  of the hour: another client still reads another dataset; a row nested 100,000 deep is its split's problem (the
  other splits read) or a 422 when played, never a traceback (test_tasksets).
- Quality reports: a server whose observations are large costs the report a bounded amount of memory, however
  many it sends (test_quality_memory).
- Evaluations: a signed-in user cannot run evaluations on another user's private endpoint, ask for more
  episodes, concurrency or steps than the caps, or start more runs at once than allowed
  (test_evaluation_limits); an evaluation on her own server whose observations are large, over many steps and
  episodes at once, costs envhub a bounded amount of memory, and the database what the run's storage budget allows
  (test_evaluation_memory); a stranger (anonymous or signed in) finds a private endpoint's runs in no listing or
  leaderboard and gets 404 for them, their episodes, exports, push and cancel, also once the endpoint has
  stopped (test_evaluation_visibility).
- Process servers: a signed-in user's launch variables cannot make a process server run code of their own
  (PYTHONWARNINGS with BROWSER, UVICORN_LOG_CONFIG, PYTHONSTARTUP and BASH_ENV, MPLBACKEND and GTK_MODULES are
  refused with a 422 naming them, and nothing runs); a server's own code runs as an unprivileged user, forked or
  from scratch, and reads neither envhub's database, its data folder nor its process's secrets; a non-admin's
  server is sandboxed: it sees none of envhub's folders or processes and reaches no network but its own loopback;
  a server out of the sandbox (the admin's, forked or not) sees only its own processes in /proc, reads no other
  server's variables, and lists no other server's home nor the Spaces' snapshots; a server that forks endlessly,
  holds memory or writes a file past its limits gets EAGAIN, MemoryError or EFBIG, and envhub serves on
  (test_process).
"""
