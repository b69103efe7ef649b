package dispatch

// LeanHTTP tells the tests whether http:// targets go through h1.
const LeanHTTP = leanHTTP

// NetHTTP is the reference the tests hold the Dispatcher to (see netHTTP).
type NetHTTP = netHTTP

// NewNetHTTP returns a reference client; see netHTTP.
var NewNetHTTP = newNetHTTP
