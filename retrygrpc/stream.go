package retrygrpc

import (
	"context"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/retrykit/retry"
)

// StreamClientInterceptor returns an interceptor that retries streaming calls
// as far as that is invisible to the caller: opening any stream, and, for a
// call with a single request (server-streaming), every failure that comes
// before the first response, by opening a new stream and sending the same
// request again. The package documentation says exactly when, and why
// client-streaming and bidirectional calls are retried only while opening.
// Every attempt carries the same idempotency key. c.AttemptTimeout is not
// used. The interceptor and the streams it returns follow gRPC's rules for
// concurrent use of a ClientStream.
func StreamClientInterceptor(c Config) grpc.StreamClientInterceptor {
	c.Codes = cloneCodes(c.Codes)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx = withIdempotencyKey(ctx)
		if desc.ClientStreams {
			// The stream lives on after DoValue returns, so it is opened on
			// the caller's context, not on the attempt's, which ends then.
			cs, err := retry.DoValue(ctx, c.policy(method, cc), func(context.Context) (grpc.ClientStream, error) {
				cs, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil {
					return nil, c.attemptFailed(err, nil, 0)
				}
				return cs, nil
			})
			if err != nil {
				return nil, gaveUp(ctx, err)
			}
			return cs, nil
		}
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			// Reported, and retried, by the first RecvMsg: see replayStream.
			cs = failedStream{ctx: ctx, err: err}
		}
		return &replayStream{c: &c, ctx: ctx, desc: desc, cc: cc, method: method, streamer: streamer, opts: opts, cur: cs}, nil
	}
}

// replayStream is a single-request stream that may be replaced by a new
// attempt until it is committed: until the caller has seen a response
// message or the server's headers, or has used the stream in a way that
// could not be replayed. The first RecvMsg runs the one retry execution of
// the call; the attempt that fails first is the stream the caller already
// holds (or failedStream when opening it failed).
type replayStream struct {
	c        *Config
	ctx      context.Context
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption

	// committed set: no more retries; every call goes straight to cur.
	committed atomic.Bool

	// mu serialises the calls that may lead to a retry, until committed.
	// It is never held while a committed stream blocks, and never while
	// the caller could still need SendMsg (the retry waits for CloseSend).
	mu     sync.Mutex
	req    any // the request, kept for replay (gRPC forbids changing it after SendMsg)
	sent   bool
	closed bool

	curMu sync.Mutex // guards cur only; never held while blocking
	cur   grpc.ClientStream
}

func (s *replayStream) stream() grpc.ClientStream {
	s.curMu.Lock()
	defer s.curMu.Unlock()
	return s.cur
}

func (s *replayStream) setStream(cs grpc.ClientStream) {
	s.curMu.Lock()
	defer s.curMu.Unlock()
	s.cur = cs
}

// Context returns the current attempt's context.
func (s *replayStream) Context() context.Context { return s.stream().Context() }

// Trailer returns the current attempt's trailer: after RecvMsg has failed or
// returned io.EOF, the last attempt's.
func (s *replayStream) Trailer() metadata.MD { return s.stream().Trailer() }

// SendMsg keeps the request for replay and sends it on the current attempt.
// A second message cannot be replayed and commits the stream.
func (s *replayStream) SendMsg(m any) error {
	if s.committed.Load() {
		return s.stream().SendMsg(m)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent || s.closed {
		s.committed.Store(true)
		return s.stream().SendMsg(m)
	}
	s.req, s.sent = m, true
	err := s.stream().SendMsg(m)
	if err != nil {
		// gRPC reports transport failures of these calls through RecvMsg;
		// what comes here (encoding, size limits) would recur on a retry.
		s.committed.Store(true)
	}
	return err
}

// CloseSend closes the sending side of the current attempt; after it, the
// first RecvMsg may retry.
func (s *replayStream) CloseSend() error {
	if s.committed.Load() {
		return s.stream().CloseSend()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.stream().CloseSend()
	s.closed = err == nil
	return err
}

// Header returns the current attempt's headers. Headers commit the stream:
// the caller has seen this attempt's answer.
func (s *replayStream) Header() (metadata.MD, error) {
	if s.committed.Load() {
		return s.stream().Header()
	}
	s.mu.Lock()
	if !s.closed {
		// Header blocks until the server answers, which it may do only
		// after SendMsg, and SendMsg needs mu: give up retrying instead.
		s.committed.Store(true)
		s.mu.Unlock()
		return s.stream().Header()
	}
	defer s.mu.Unlock()
	md, err := s.stream().Header()
	if md != nil {
		s.committed.Store(true)
	}
	return md, err
}

// RecvMsg receives a message. The first call, once the request is sent and
// the sending side closed, retries the call until a response (or the clean
// end of the stream, io.EOF) arrives or the policy gives up.
func (s *replayStream) RecvMsg(m any) error {
	if !s.committed.Load() {
		if done, err := s.recvFirst(m); done {
			return err
		}
	}
	return s.stream().RecvMsg(m)
}

// recvFirst runs the call's retry execution; done is false when the stream
// was committed, or cannot be replayed, and RecvMsg should go straight on.
func (s *replayStream) recvFirst(m any) (done bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed.Load() || !s.sent || !s.closed {
		s.committed.Store(true)
		return false, nil
	}
	first := true
	var got error // nil or io.EOF: the successful attempt's answer
	err = retry.Do(s.ctx, s.c.policy(s.method, s.cc), func(ctx context.Context) error {
		if !first {
			// On the caller's context: the attempt's ends with Do, and the
			// stream that succeeds is the caller's from then on.
			if err := s.reopen(s.ctx); err != nil {
				return err
			}
		}
		first = false
		cs := s.stream()
		got = cs.RecvMsg(m)
		if got == nil || got == io.EOF {
			return nil
		}
		awaitPassedDeadline(ctx)
		return s.c.attemptFailed(got, cs.Trailer(), 0)
	})
	s.committed.Store(true)
	if err != nil {
		return true, gaveUp(s.ctx, err)
	}
	return true, got
}

// reopen opens a new attempt and sends it the request again.
func (s *replayStream) reopen(ctx context.Context) error {
	cs, err := s.streamer(ctx, s.desc, s.cc, s.method, s.opts...)
	if err != nil {
		s.setStream(failedStream{ctx: ctx, err: err})
		awaitPassedDeadline(ctx)
		return s.c.attemptFailed(err, nil, 0)
	}
	s.setStream(cs)
	if err = cs.SendMsg(s.req); err == nil {
		err = cs.CloseSend()
	}
	if err != nil {
		// As in SendMsg: such an error would recur; gRPC has already
		// finished the stream, and its RecvMsg will report the same.
		return retry.Permanent(s.c.attemptFailed(err, nil, 0))
	}
	return nil
}

// failedStream stands for a single-request stream that could not be
// opened, until a retry opens one: sends are kept for the replay, and the
// error is RecvMsg's to report, as gRPC does for such calls.
type failedStream struct {
	ctx context.Context
	err error
}

func (f failedStream) Header() (metadata.MD, error) { return nil, nil }
func (f failedStream) Trailer() metadata.MD         { return nil }
func (f failedStream) CloseSend() error             { return nil }
func (f failedStream) Context() context.Context     { return f.ctx }
func (f failedStream) SendMsg(any) error            { return nil }
func (f failedStream) RecvMsg(any) error            { return f.err }

var (
	_ grpc.ClientStream = (*replayStream)(nil)
	_ grpc.ClientStream = failedStream{}
)
