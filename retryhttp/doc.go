// Package retryhttp retries HTTP requests through an http.RoundTripper driven
// by the retry engine of package retry: the same policies, classification,
// budgets, hooks and logging as retry.Do, no second delay engine.
//
//	client := retryhttp.NewClient(retry.Policy{MaxAttempts: 5, Budget: 10 * time.Second})
//	resp, err := client.Get("https://api.example.com/orders/42")
//
// The zero Transport is safe: exponential backoff with full jitter,
// DefaultMaxAttempts attempts, a DefaultBudget time budget. It retries only
// what can be sent again without harm — idempotent methods, or a POST or
// PATCH that carries an Idempotency-Key header (AddIdempotencyKey adds one) —
// and only connection failures and the retryable statuses (408, 425, 429,
// 500, 502, 503, 504 by default), honouring Retry-After. The response the
// caller gets is the last one, untouched; the ones it does not get are
// drained and closed so their connections are reused.
//
// With Transport.Limiters set, each host has a retry.Limiter of its own:
// its 429s and Retry-After answers slow every request to it down, as do
// its 503s, refused connections and timeouts while they are most answers
// (an outage), and a host that answers nothing but those is left alone for
// a while (see retry.Limiter).
package retryhttp
