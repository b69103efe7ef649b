package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/retrykit/retry/client"
)

// watchFlags is "tasks watch TASK_ID": it follows a task until it ends.
func watchFlags(fs *flag.FlagSet) func(context.Context, *runner, []string) error {
	interval := fs.Duration("interval", time.Second, "ask retryd for news every `D`")
	return func(ctx context.Context, r *runner, args []string) error {
		if *interval <= 0 {
			return usagef("--interval must be positive, got %s", *interval)
		}
		w := &watch{r: r, id: args[0]}
		return w.run(ctx, *interval)
	}
}

// watch follows one task by polling it and its attempt log: the API has no
// stream, and a poll a second is nothing to retryd.
//
// The log is read by position, not by attempt number: a redrive starts the
// numbers again at 1 and appends the new attempts to the old.
type watch struct {
	r  *runner
	id string
	// cursor is the page token of the attempt page that holds the next
	// entry to print, and cursorPos the position of that page's first
	// entry, so that a long log is not read again at each poll.
	cursor    string
	cursorPos int
	printed   int          // how many log entries were printed
	shown     *client.Task // the task as its last state line showed it
	failing   bool         // the last poll failed, and the failure was told
}

// watchEvent is one line of "tasks watch --json".
type watchEvent struct {
	Event   string          `json:"event"` // "attempt", "state" or "end"
	Attempt *client.Attempt `json:"attempt,omitempty"`
	Task    *client.Task    `json:"task,omitempty"`
}

// endedErr is a watch whose task ended otherwise than SUCCEEDED: exit 1,
// as a script waiting on the task wants to know.
type endedErr struct {
	id     string
	status client.Status
}

func (e *endedErr) Error() string { return fmt.Sprintf("task %s ended %s", e.id, e.status) }

func (w *watch) run(ctx context.Context, interval time.Duration) error {
	tick := time.NewTimer(0)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return w.stopped(ctx.Err())
		case <-tick.C:
		}
		t, err := w.poll(ctx)
		if err != nil {
			if ctx.Err() != nil || w.shown == nil || !transient(err) {
				return w.stopped(err)
			}
			// A watch may last hours: a retryd restarting, or a proxy's
			// 502 on the way, should not end it. Told once, not at each
			// poll. The first poll must succeed, so that a wrong --url
			// fails at once.
			if !w.failing {
				fmt.Fprintf(w.r.env.Stderr, "retryctl: %s; trying again every %s\n", describe(err), interval)
				w.failing = true
			}
			tick.Reset(interval)
			continue
		}
		if w.failing {
			fmt.Fprintln(w.r.env.Stderr, "retryctl: retryd answers again")
			w.failing = false
		}
		if terminal(t.Status) {
			return w.end(t)
		}
		if err := w.state(t); err != nil {
			return err
		}
		tick.Reset(interval)
	}
}

// maxRounds bounds poll's rounds for a task whose attempts come faster
// than it reads them.
const maxRounds = 5

// poll prints the attempts logged since the last poll and returns the task
// as it is after the last of them: the state it shows follows every
// attempt printed, and no attempt printed follows it. The task is read
// first, then the log, again until the log has nothing new: whatever the
// task shows was logged before it was read (an attempt is logged in the
// store's change that counts it), and a read of the log that finds nothing
// new means nothing came in between.
func (w *watch) poll(ctx context.Context) (*client.Task, error) {
	for round := 1; ; round++ {
		t, err := w.r.c.GetTask(ctx, w.id)
		if err != nil {
			return nil, err
		}
		n, err := w.attempts(ctx)
		if err != nil {
			return nil, err
		}
		if n == 0 || round == maxRounds {
			return t, nil
		}
	}
}

// transient reports whether err may pass if asked again: no answer, or
// an answer saying the service or a proxy is unavailable or busy. A 4xx
// (the task is gone, the token refused) will not.
func transient(err error) bool {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return true
	}
	return ae.StatusCode >= 500 || ae.StatusCode == http.StatusTooManyRequests
}

func terminal(s client.Status) bool {
	switch s {
	case client.Succeeded, client.Exhausted, client.Failed, client.Cancelled:
		return true
	}
	return false
}

// attempts prints the entries logged since the last printed, and returns
// how many it printed.
func (w *watch) attempts(ctx context.Context) (int, error) {
	n := 0
	for {
		p, err := w.r.c.ListAttempts(ctx, w.id, client.ListOptions{PageToken: w.cursor, Limit: 1000})
		if err != nil {
			return n, err
		}
		for i := min(w.printed-w.cursorPos, len(p.Items)); i < len(p.Items); i++ {
			if err := w.attempt(&p.Items[i]); err != nil {
				return n, err
			}
			n++
		}
		w.printed = max(w.printed, w.cursorPos+len(p.Items))
		if p.NextPageToken == "" {
			return n, nil
		}
		w.cursor, w.cursorPos = p.NextPageToken, w.cursorPos+len(p.Items)
	}
}

func (w *watch) attempt(a *client.Attempt) error {
	if w.r.json {
		return w.emit(watchEvent{Event: "attempt", Attempt: a})
	}
	status := "-"
	if a.ResponseStatus != 0 {
		status = strconv.Itoa(a.ResponseStatus)
	}
	line := fmt.Sprintf("attempt %d  %s  %s  %s", a.AttemptNumber, when(a.StartedAt), ms(a.DurationMs), status)
	if a.ErrorMessage != "" {
		line += "  " + clip(a.ErrorMessage, 100)
	}
	_, err := fmt.Fprintln(w.r.env.Stdout, line)
	return err
}

// state prints t's state when it differs from the last shown.
func (w *watch) state(t *client.Task) error {
	if s := w.shown; s != nil && s.Status == t.Status && s.AttemptNumber == t.AttemptNumber && s.NextAttemptAt == t.NextAttemptAt {
		return nil
	}
	w.shown = t
	if w.r.json {
		return w.emit(watchEvent{Event: "state", Task: t})
	}
	var line string
	switch {
	case t.Status == client.InFlight:
		line = fmt.Sprintf("IN_FLIGHT: attempt %d under way", t.AttemptNumber)
	case t.Status == client.Pending && t.AttemptNumber == 0:
		line = "PENDING: first attempt at " + when(t.NextAttemptAt)
	case t.Status == client.Pending:
		line = fmt.Sprintf("PENDING: next attempt (%d) at %s", t.AttemptNumber+1, when(t.NextAttemptAt))
	default:
		line = string(t.Status)
	}
	_, err := fmt.Fprintln(w.r.env.Stdout, line)
	return err
}

// end prints the final state; a task that did not succeed is an error.
func (w *watch) end(t *client.Task) error {
	if w.r.json {
		if err := w.emit(watchEvent{Event: "end", Task: t}); err != nil {
			return err
		}
	} else {
		line := fmt.Sprintf("%s after %d attempt(s), at %s", t.Status, t.AttemptNumber, when(t.FinishedAt))
		if t.Status != client.Succeeded && t.LastError != "" {
			line += ": " + clip(t.LastError, 100)
		}
		if _, err := fmt.Fprintln(w.r.env.Stdout, line); err != nil {
			return err
		}
	}
	if t.Status != client.Succeeded {
		return &endedErr{w.id, t.Status}
	}
	return nil
}

// stopped explains a watch that ended before its task: Ctrl-C, or a
// request that failed.
func (w *watch) stopped(err error) error {
	return fmt.Errorf("stopped watching task %s before it ended: %w", w.id, err)
}

func (w *watch) emit(e watchEvent) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w.r.env.Stdout, "%s\n", b)
	return err
}
