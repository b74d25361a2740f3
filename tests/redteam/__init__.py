"""Red-team tests: each module attacks a real envhub over the wire, as a hostile client or a hostile server of
our own, and asserts the door holds. Read together, they are envhub's threat model, one entry per door:

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
  (test_evaluation_limits).
- Process servers: a signed-in user's launch variables cannot make a process server run code of their own
  (PYTHONWARNINGS with BROWSER, UVICORN_LOG_CONFIG, PYTHONSTARTUP and BASH_ENV are refused with a 422 naming
  them, and nothing runs); a server's own code runs as an unprivileged user, forked or from scratch, and reads
  neither envhub's database, its data folder nor its process's secrets; a non-admin's server is sandboxed: it
  sees none of envhub's folders or processes and reaches no network but its own loopback (test_process).
"""
