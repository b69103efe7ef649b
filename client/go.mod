module github.com/retrykit/retry/client

go 1.26.8

require github.com/retrykit/retry v0.0.0

// The modules of this repository, at the commit being built.
replace github.com/retrykit/retry => ../
