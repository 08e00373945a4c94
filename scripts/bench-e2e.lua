-- wrk script for scripts/bench-e2e: POST one AdmissionReview over and over, then print
-- one parseable line with the counts and latency percentiles.
--
--   wrk -t1 -c16 -d10s -s scripts/bench-e2e.lua https://127.0.0.1:9443/mutate-machinesets -- REVIEW.json
--
-- The line (latencies in microseconds):
--   BENCH requests=N duration_us=N rps=F p50=N p99=N p999=N connect_errors=N read_errors=N write_errors=N status_errors=N timeouts=N

function init(args)
   local path = args[1]
   if path == nil then
      error("give the review file after --")
   end
   local f = assert(io.open(path, "rb"))
   local body = f:read("*a")
   f:close()
   wrk.method = "POST"
   wrk.body = body
   wrk.headers["Content-Type"] = "application/json"
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "BENCH requests=%d duration_us=%d rps=%.1f p50=%d p99=%d p999=%d " ..
      "connect_errors=%d read_errors=%d write_errors=%d status_errors=%d timeouts=%d\n",
      summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
      latency:percentile(50), latency:percentile(99), latency:percentile(99.9),
      e.connect, e.read, e.write, e.status, e.timeout))
end
