-- POST /v1/check for one key, as a service asks Sluice before serving a request
wrk.method = "POST"
wrk.body = '{"policy":"bench","key":"127.0.0.1"}'
wrk.headers["Content-Type"] = "application/json"
