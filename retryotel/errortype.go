package retryotel

import (
	"errors"
	"reflect"
	"strconv"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/retrykit/retry"
)

// failure is what the attributes tell of a failed attempt's error.
type failure struct {
	// errType is error.type: the status code when the error carries one,
	// as OpenTelemetry's HTTP and RPC conventions ask, else what
	// semconv.ErrorType makes of the error.
	errType    string
	httpStatus int    // from an HTTPStatusCode() int method; 0 without one
	rpcStatus  string // from an RPCStatusCode() string method; "" without one
}

// The methods by which an error names its kind. Their types are the
// standard library's, so that neither side imports the other: retrygrpc's
// attempts name their code without this package, or this one gRPC.
type (
	httpStatuser = interface{ HTTPStatusCode() int }
	rpcStatuser  = interface{ RPCStatusCode() string }
	errorTyper   = interface{ ErrorType() string }
)

// describe reads err's status codes and error.type. It is on the path of
// every failed attempt, so it walks err's tree with type assertions, not
// errors.As (which allocates its target), and keeps the type names it
// made: semconv.ErrorType reflects and concatenates for each call.
func (o *Observer) describe(err error) failure {
	var f failure
	if code, ok := retry.StatusCode(err); ok {
		f.httpStatus, f.errType = code, strconv.Itoa(code)
		return f
	}
	if s, ok := find[rpcStatuser](err); ok && s.RPCStatusCode() != "" {
		f.rpcStatus = s.RPCStatusCode()
		f.errType = f.rpcStatus
		return f
	}
	if t, ok := find[errorTyper](err); ok && t.ErrorType() != "" {
		f.errType = t.ErrorType()
		return f
	}
	// Without an ErrorType method anywhere in the tree, semconv.ErrorType's
	// answer depends on the type of the error under the wrappers only.
	err = unwrap(err)
	t := reflect.TypeOf(err)
	if s, ok := o.types.Load(t); ok {
		f.errType = s.(string)
		return f
	}
	f.errType = semconv.ErrorType(err).Value.AsString()
	o.types.Store(t, f.errType)
	return f
}

// find returns the first error in err's tree that is a T, depth first, as
// errors.As would find it (an As method answers for its own tree, through
// errors.As).
func find[T any](err error) (T, bool) {
	var zero T
	for err != nil {
		if x, ok := err.(T); ok {
			return x, true
		}
		switch u := err.(type) {
		case interface{ As(any) bool }:
			var x T
			if errors.As(err, &x) {
				return x, true
			}
			return zero, false
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if x, ok := find[T](e); ok {
					return x, true
				}
			}
			return zero, false
		default:
			return zero, false
		}
	}
	return zero, false
}

// unwrap returns the error under err's wrappers that say nothing of the
// failure: fmt.Errorf's single %w, which semconv.ErrorType sees through
// too, and package retry's own (Permanent, After), which say how to retry;
// without this every error marked Permanent would be of one type.
func unwrap(err error) error {
	for {
		t := reflect.TypeOf(err)
		if t.Kind() != reflect.Pointer || !(t.Elem().PkgPath() == retryPath || t.Elem().PkgPath() == "fmt" && t.Elem().Name() == "wrapError") {
			return err
		}
		inner := errors.Unwrap(err)
		if inner == nil {
			return err
		}
		err = inner
	}
}

// retryPath is package retry's import path (TestGiveUps's "not retryable"
// fails if it is wrong).
const retryPath = "github.com/retrykit/retry"

// succeeded reads the status a successful attempt's Event.Result names.
// An HTTP status of 400 or more is an error to HTTP client spans even when
// the engine took it as final: it becomes error.type too.
func succeeded(result any) failure {
	var f failure
	switch r := result.(type) {
	case httpStatuser:
		if f.httpStatus = r.HTTPStatusCode(); f.httpStatus >= 400 {
			f.errType = strconv.Itoa(f.httpStatus)
		}
	case rpcStatuser:
		f.rpcStatus = r.RPCStatusCode()
	}
	return f
}
