// Package sim is the engine of cmd/retrysim: seeded, reproducible simulations
// that show what a retry strategy does to the server it retries against.
//
// Three experiments:
//
//   - OCC, the optimistic-concurrency contention experiment of the AWS
//     Architecture Blog post "Exponential Backoff And Jitter" (Marc Brooker,
//     2015): clients race to update one versioned row.
//   - Outage: a crowd of clients retries through a server outage and the
//     capacity-limited recovery after it.
//   - Amplification: layers of services, each retrying the layer below.
//
// OCC and Outage are discrete-event simulations in virtual time: a priority
// queue of timed events, so a run that spans minutes of simulated time takes
// milliseconds. Every delay a simulated client waits comes from
// backoff.Policy.Delay, the engine Retrykit itself uses, fed with a seeded
// math/rand/v2 PCG source; Amplification runs the real retry.Do and
// retry.Quota. Nothing here re-implements a backoff formula, so the figures
// describe the library as shipped.
//
// The same configuration and seed always give the same figures, however many
// goroutines share the work.
package sim
