package dispatch

// NetHTTP is the reference the tests hold the Dispatcher to (see netHTTP).
type NetHTTP = netHTTP

// NewNetHTTP returns a reference client; see netHTTP.
var NewNetHTTP = newNetHTTP
