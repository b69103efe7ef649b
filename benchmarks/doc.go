// Package benchmarks measures what Retrykit costs next to the retry libraries
// Go programs use today: cenkalti/backoff v5, avast/retry-go v4 and v5,
// failsafe-go and sethvargo/go-retry. It lives in its own module so that
// users of Retrykit never inherit these dependencies.
//
// Every library runs the same workloads, each in its idiomatic best form:
//
//   - Success: the operation succeeds at once; the policy is built once.
//   - TwoFailures: the operation fails twice, then succeeds; zero delay
//     between attempts, at most three attempts.
//   - Delays: the delays before retries 1 to 10 of exponential backoff from
//     100 ms, doubling, capped at 10 s, with the library's jitter.
//
// The tests check that each library's setup really does what the workload
// says (how many calls, which result), so the numbers compare like with like.
// Run the benchmarks with scripts/benchmarks.sh at the repository root; the
// results are in docs/BENCHMARKS.md.
package benchmarks
