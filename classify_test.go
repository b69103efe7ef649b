package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// refusedErr dials a loopback port that was just closed: a real
// "connection refused" from the kernel.
func refusedErr(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		t.Skip("a closed port accepted a connection")
	}
	return err
}

// timeoutErr reads from a connection that never answers, past its deadline.
func timeoutErr(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	return err
}

func TestIsTransient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refusedErr(t), true},
		{"read timeout", timeoutErr(t), true},
		{"wrapped refused", fmt.Errorf("call: %w", refusedErr(t)), true},
		{"unexpected EOF", fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), true},
		{"temporary DNS", &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}, true},
		{"no such host", &net.DNSError{Err: "no such host", Name: "x", IsNotFound: true}, false},
		{"attempt deadline", context.DeadlineExceeded, true},
		{"cancelled", context.Canceled, false},
		{"not found file", fs.ErrNotExist, false},
		{"plain", errors.New("bad request"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := retry.IsTransient(tt.err); got != tt.want {
				t.Errorf("IsTransient(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

type codeError struct{ code int }

func (e *codeError) Error() string { return fmt.Sprint("code ", e.code) }

func TestClassifiers(t *testing.T) {
	t.Parallel()
	errA, errB := errors.New("a"), errors.New("b")
	chain := retry.Classifiers{
		retry.NoRetryIf(func(err error) bool { return errors.Is(err, errB) }),
		retry.RetryOn(errA, errB),
		retry.RetryOnType[*codeError](),
	}
	tests := []struct {
		name string
		c    retry.Classifier
		err  error
		want retry.Decision
	}{
		{"RetryOn match", retry.RetryOn(errA), fmt.Errorf("x: %w", errA), retry.Retry},
		{"RetryOn miss", retry.RetryOn(errA), errB, retry.Unknown},
		{"RetryOnType match", retry.RetryOnType[*codeError](), fmt.Errorf("x: %w", &codeError{3}), retry.Retry},
		{"RetryOnType miss", retry.RetryOnType[*codeError](), errA, retry.Unknown},
		{"first answer wins", chain, errB, retry.NoRetry},
		{"later answer", chain, &codeError{1}, retry.Retry},
		{"nobody knows", chain, errors.New("c"), retry.Unknown},
		{"empty chain", retry.Classifiers{}, errA, retry.Unknown},
		{"func", retry.ClassifierFunc(func(error) retry.Decision { return retry.NoRetry }), errA, retry.NoRetry},
		{"transient", retry.Transient(), io.ErrUnexpectedEOF, retry.Retry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.c.Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// asError answers errors.As through a method rather than by its type.
type asError struct{}

func (asError) Error() string { return "as" }
func (asError) As(target any) bool {
	if p, ok := target.(*interface{ RetryAfter() time.Duration }); ok {
		*p = retry.After(time.Minute, errFlaky).(interface{ RetryAfter() time.Duration })
		return true
	}
	return false
}

func TestHintsAreFoundThroughTheTree(t *testing.T) {
	t.Parallel()
	joined := errors.Join(errors.New("other"), fmt.Errorf("wrapped: %w", retry.After(3*time.Second, errFlaky)))
	if d, ok := retry.RetryAfter(joined); !ok || d != 3*time.Second {
		t.Errorf("RetryAfter(joined) = %v, %v; want 3s", d, ok)
	}
	if d, ok := retry.RetryAfter(fmt.Errorf("x: %w", asError{})); !ok || d != time.Minute {
		t.Errorf("RetryAfter through an As method = %v, %v; want 1m", d, ok)
	}
	if _, ok := retry.RetryAfter(errFlaky); ok {
		t.Error("RetryAfter found a hint in a plain error")
	}
	if code, ok := retry.StatusCode(fmt.Errorf("x: %w", statusError(429))); !ok || code != 429 {
		t.Errorf("StatusCode = %d, %v; want 429", code, ok)
	}
	if !retry.IsPermanent(fmt.Errorf("x: %w", retry.Permanent(os.ErrInvalid))) || !errors.Is(retry.Permanent(os.ErrInvalid), os.ErrInvalid) {
		t.Error("Permanent is not found through wrapping, or hides its error")
	}
	if retry.Permanent(nil) != nil || retry.After(time.Second, nil) != nil {
		t.Error("wrapping nil gave an error")
	}
}

// TestClassifierFallback pins what happens to errors nobody claims.
func TestClassifierFallback(t *testing.T) {
	t.Parallel()
	withClassifier := retry.Policy{MaxAttempts: 3, Classifier: retry.RetryOn(io.EOF)}
	p, _ := setup(t, withClassifier)
	op, calls := failing(5, errFlaky)
	if err := retry.Do(context.Background(), p, op); !errors.Is(err, retry.ErrNotRetryable) || *calls != 1 {
		t.Errorf("unclaimed error with a classifier: %v after %d calls, want not retried", err, *calls)
	}
	op, calls = failing(5, statusError(503))
	if err := retry.Do(context.Background(), p, op); !errors.Is(err, retry.ErrAttemptsExhausted) || *calls != 3 {
		t.Errorf("a 503 the classifier does not know: %v after %d calls, want retried by its status", err, *calls)
	}
	op, calls = failing(5, selfClassified(true))
	if err := retry.Do(context.Background(), p, op); !errors.Is(err, retry.ErrAttemptsExhausted) || *calls != 3 {
		t.Errorf("a self-classified retryable error: %v after %d calls, want retried", err, *calls)
	}
}

func TestPolicyClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy retry.Policy
		err    error
		want   retry.Decision
	}{
		{"no classifier retries all", retry.Policy{}, errFlaky, retry.Retry},
		{"permanent first", retry.Policy{Classifier: retry.RetryOn(errFlaky)}, retry.Permanent(errFlaky), retry.NoRetry},
		{"classifier knows", retry.Policy{Classifier: retry.RetryOn(errFlaky)}, errFlaky, retry.Retry},
		{"classifier does not know", retry.Policy{Classifier: retry.RetryOn(io.EOF)}, errFlaky, retry.NoRetry},
		{"status by the policy's codes", retry.Policy{RetryableStatusCodes: []int{418}}, statusError(418), retry.Retry},
		{"status outside the codes", retry.Policy{}, statusError(404), retry.NoRetry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.policy.Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
