module github.com/retrykit/retry/benchmarks

go 1.26.8

require (
	github.com/avast/retry-go/v4 v4.7.0
	github.com/avast/retry-go/v5 v5.1.1
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/retrykit/retry v0.0.0
	github.com/sethvargo/go-retry v0.5.0
)

require github.com/bits-and-blooms/bitset v1.24.4 // indirect

// The benchmarks measure the Retrykit in this repository.
replace github.com/retrykit/retry => ../
