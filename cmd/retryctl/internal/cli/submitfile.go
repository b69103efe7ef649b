package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/retrykit/retry/client"
)

// batchBytes caps the encoded tasks of one request: half of retryd's
// default batch limit (16 MiB), so that a batch of large tasks is split
// before the service refuses it whole.
const batchBytes = 8 << 20

// lineTask is one task of a --file, with the line it came from, or why
// the line is no task.
type lineTask struct {
	line int
	req  client.TaskRequest
	bad  error
}

// lineResult is what became of one task line.
type lineResult struct {
	Line   int           `json:"line"`
	Status int           `json:"status,omitempty"` // 0 when refused before sending
	Task   *client.Task  `json:"task,omitempty"`
	Error  *client.Error `json:"error,omitempty"`
}

// fileSubmit runs one "tasks submit --file".
type fileSubmit struct {
	r                          *runner
	batch                      []lineTask // in line order, bad lines included
	sending, bytes             int        // tasks of batch to send, and their encoded size
	lines, tasks               int        // read so far; tasks excludes blank lines
	created, repeated, refused int
	refusals                   []lineResult // for the summary
}

// submitFile sends the tasks of a JSON Lines file, one task object per
// line as POST /retry-tasks takes it, in batches of up to client.MaxBatch.
// It prints each refused line with its error and a summary, and fails when
// any task was refused. A line that is not a task object is refused before
// anything is sent for it.
func (r *runner) submitFile(ctx context.Context, path string) error {
	in := r.env.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	s := &fileSubmit{r: r}
	br := bufio.NewReaderSize(in, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			s.lines++
			if err := s.add(ctx, line); err != nil {
				return err
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
	}
	if err := s.flush(ctx); err != nil {
		return err
	}
	if s.tasks == 0 {
		return fmt.Errorf("%s holds no task (want one JSON task object per line)", path)
	}
	s.summary()
	if s.refused > 0 {
		return fmt.Errorf("%d of %d tasks refused", s.refused, s.tasks)
	}
	return nil
}

// add takes one line: a task to send, or a line refused at once. A full
// batch is sent only when another task comes, so that progress is told
// only for files of more than one batch.
func (s *fileSubmit) add(ctx context.Context, line []byte) error {
	if s.lines == 1 {
		line = bytes.TrimPrefix(line, []byte("\uFEFF"))
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	s.tasks++
	req, err := decodeTask(line)
	if err != nil {
		s.batch = append(s.batch, lineTask{line: s.lines, bad: err})
		return nil
	}
	enc, _ := json.Marshal(req)
	if s.sending == client.MaxBatch || s.sending > 0 && s.bytes+len(enc) > batchBytes {
		if err := s.flush(ctx); err != nil {
			return err
		}
		fmt.Fprintf(s.r.env.Stderr, "retryctl: %d tasks done (to line %d): %d created, %d repeated, %d refused\n",
			s.created+s.repeated+s.refused, s.lines-1, s.created, s.repeated, s.refused)
	}
	s.batch = append(s.batch, lineTask{line: s.lines, req: req})
	s.sending++
	s.bytes += len(enc)
	return nil
}

// decodeTask reads one line as a task object: no unknown field, nothing
// after it. The service checks the rest.
func decodeTask(line []byte) (client.TaskRequest, error) {
	var req client.TaskRequest
	if line[0] != '{' {
		return req, errors.New("not a JSON task object")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("not a task object: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, errors.New("not a task object: more after the JSON object (one task per line)")
	}
	return req, nil
}

// flush sends the batch and reports it, line by line. A failure of the
// whole request stops the run: the tasks after it are not sent, so that
// nothing is submitted twice by accident.
func (s *fileSubmit) flush(ctx context.Context) error {
	var reqs []client.TaskRequest
	for _, lt := range s.batch {
		if lt.bad == nil {
			reqs = append(reqs, lt.req)
		}
	}
	var res []client.TaskResult
	if len(reqs) > 0 {
		var err error
		if res, err = s.r.c.CreateTasks(ctx, reqs); err != nil {
			first, last := s.batch[0].line, s.batch[len(s.batch)-1].line
			s.summary()
			return fmt.Errorf("lines %d to %d: %s\n"+
				"nothing after line %d was sent; the tasks of lines %d to %d may have been stored (sending them again is safe for tasks with an idempotencyKey)",
				first, last, describe(err), last, first, last)
		}
	}
	j := 0 // the item of res answering lt
	for _, lt := range s.batch {
		lr := lineResult{Line: lt.line}
		if lt.bad != nil {
			// The service would answer such an item so, were it sent.
			lr.Error = &client.Error{Code: "invalid_request", Message: lt.bad.Error()}
		} else {
			tr := res[j]
			lr.Status, lr.Task = tr.Status, tr.Task
			if tr.Error != nil {
				lr.Error = ownFields(tr.Error, j)
			}
			j++
		}
		switch {
		case lr.Error != nil:
			s.refused++
			s.refusals = append(s.refusals, lr)
		case lr.Status == http.StatusCreated:
			s.created++
		default:
			s.repeated++
		}
		if s.r.json {
			b, _ := json.Marshal(lr)
			fmt.Fprintf(s.r.env.Stdout, "%s\n", b)
		}
	}
	s.batch, s.sending, s.bytes = s.batch[:0], 0, 0
	return nil
}

// summary tells the counts and every refused line; with --json, where
// stdout has a line per task, it tells only the counts, on stderr.
func (s *fileSubmit) summary() {
	w := s.r.env.Stdout
	if s.r.json {
		w = s.r.env.Stderr
	}
	fmt.Fprintf(w, "%d created, %d repeated, %d refused\n", s.created, s.repeated, s.refused)
	if s.r.json {
		return
	}
	for _, lr := range s.refusals {
		fmt.Fprintf(w, "line %d: %s\n", lr.Line, describeLine(lr.Error))
	}
}

func describeLine(e *client.Error) string {
	if e.StatusCode == 0 {
		return e.Message
	}
	return describe(e)
}

// ownFields returns the error of item i of a batch with its fields named
// as in the task's own line ("targetUrl", not "tasks[3].targetUrl"): the
// batch is retryctl's doing, the line is the user's.
func ownFields(e *client.Error, i int) *client.Error {
	prefix := fmt.Sprintf("tasks[%d]", i)
	strip := func(s string) string {
		if s == prefix {
			return ""
		}
		return strings.ReplaceAll(s, prefix+".", "")
	}
	out := *e
	out.Field = strip(e.Field)
	out.Message = strip(e.Message)
	out.Details = nil
	for _, d := range e.Details {
		out.Details = append(out.Details, client.FieldProblem{Field: strip(d.Field), Message: d.Message})
	}
	return &out
}
