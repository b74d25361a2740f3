"""Red-team tests: each module attacks a real envhub over the wire, as a hostile client or a hostile server of
our own, and asserts the door holds. Read together, they are envhub's threat model, one entry per door:

- The gateway: a replica's endless first message, an answer read whole and a client's body are bounded
  however long they claim to be; frames a client must never send get RFC 6455's close codes; a request head
  that never arrives whole gets 408; a percent-encoded line break stays encoded on its way upstream; unknown
  endpoint ids cost no SQL on the event loop; a foreign web page's sockets are refused, idle or junk-sending
  sockets wait without growing a pool, one client may have only so many sessions waiting, and a waiting one
  parks only so many bytes (test_gateway).
- Access: a private endpoint answers only its owner's Hub token or its own token, on HTTP, /ws and /mcp;
  listings show strangers nothing of an endpoint's variables, log or servers; a Space's own server never
  receives the Hub token it was launched with (test_access).
- Hub code: a Space's Dockerfile that copies from outside its repo cannot make the process backend serve from
  outside the Space's snapshot (test_snapshots).
- Model calls: a model server that redirects an evaluation's requests to an internal address reaches nothing
  there, and nothing an internal address would answer reaches a run, its episodes or the API
  (test_model_calls).
- Tasksets: a linked dataset whose files are small and huge once read (one long string every row shares, one
  huge value, one huge line) costs envhub a bounded amount of memory: it is read a few rows at a time, or what
  it passes is that dataset's problem; an evaluation's rows are capped; dataset downloads are capped per request
  and per hour (test_tasksets).
- Quality reports: a server whose observations are large costs the report a bounded amount of memory, however
  many it sends (test_quality_memory).
- Evaluations: a signed-in user cannot run evaluations on another user's private endpoint, ask for more
  episodes, concurrency or steps than the caps, or start more runs at once than allowed
  (test_evaluation_limits); a stranger (anonymous or signed in) finds a private endpoint's runs in no listing or
  leaderboard and gets 404 for them, their episodes, exports, push and cancel, also once the endpoint has
  stopped (test_evaluation_visibility).
- Process servers: a signed-in user's launch variables cannot make a process server run code of their own
  (PYTHONWARNINGS with BROWSER, UVICORN_LOG_CONFIG, PYTHONSTARTUP and BASH_ENV, MPLBACKEND and GTK_MODULES are
  refused with a 422 naming them, and nothing runs); a server's own code runs as an unprivileged user, forked or
  from scratch, and reads neither envhub's database, its data folder nor its process's secrets; a non-admin's
  server is sandboxed: it sees none of envhub's folders or processes and reaches no network but its own loopback
  (test_process).
"""
