-- wrk's request script for the servers `go run ./loadtest compare -serve` starts: each request
-- a POST of the body loadtest/load sends, with a new orderId and customerId per request (per
-- wrk thread: its own prefix), so the sold-out answer tests the holder filter as under
-- loadtest/load. The same script serves the pass-through pair: the checkout API answers any body.
--
--   wrk -t1 -c8 -d10s -s loadtest/compare/wrk.lua http://127.0.0.1:PORT/vouchers/FLASH100/reservations

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("prefix", "wrk" .. threads .. "-")
end

local seq = 0

function request()
  seq = seq + 1
  local body = '{"customerId":"c-' .. prefix .. seq .. '","orderId":"late-' .. prefix .. seq .. '","orderAmount":150000}'
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end
