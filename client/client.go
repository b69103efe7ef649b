// Package client is a Go client of retryd's HTTP API: register retry
// policies and destinations, submit retry tasks, follow them and their
// attempts, and redrive dead letters.
//
//	c := client.New("http://127.0.0.1:8080", os.Getenv("RETRYD_TOKEN"))
//	t, _, err := c.CreateTask(ctx, client.TaskRequest{
//		TargetURL: "https://example.com/hook", // no PolicyID: the "default" policy
//		Body: `{"event":"paid"}`,
//	})
//
// CreateTasks submits up to MaxBatch tasks in one request and one durable
// commit, with a TaskResult per task; TaskRequest.NotBefore holds a task's
// first attempt until a given time.
//
// A destination (CreateDestination) is a tenant's named target: its URL,
// auth, headers, signing secret and limits live in retryd, and tasks name
// it by TaskRequest.DestinationID with a Path instead of a TargetURL, so
// that a change of the destination, or a pause of it, reaches every task
// that names it. Its secrets are never shown back (see Secret).
//
// For an operator: DeadLetterCauses groups the dead letters by why they
// failed, RedriveTasks and CancelTasks (RedriveAll, CancelAll to the end)
// act on every task a BulkFilter matches, and PreviewPolicy shows the
// delays a policy makes before it is used.
//
// Errors the service answers are *Error values carrying the API's code, the
// faulty field and the HTTP status; errors.Is matches them against
// ErrNotFound, ErrConflict, ErrInvalid and ErrUnauthorized.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Client calls one retryd. It is safe for concurrent use.
type Client struct {
	base      string
	token     string
	http      *http.Client
	userAgent string
}

// Option configures New.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc instead of
// http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a Client of the retryd at baseURL (such as
// "http://127.0.0.1:8080"), sending token as a bearer token unless it is
// empty. A baseURL that is not an http(s) URL makes every call fail.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: http.DefaultClient, userAgent: "retrykit-client"}
	for _, o := range opts {
		o(c)
	}
	return c
}

// do sends one request, in (when not nil) as its JSON body, and decodes a
// 2xx answer into out (when not nil), returning the status; any other
// answer is an *Error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) (int, error) {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fmt.Errorf("retryd client: encoding the request: %w", err)
		}
		body = b
	}
	return c.send(ctx, method, path, query, body, "application/json", out)
}

// send is do with the body already encoded, as contentType; a nil body
// sends none.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, in []byte, contentType string, out any) (int, error) {
	u, err := url.Parse(c.base + path)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return 0, fmt.Errorf("retryd client: base URL %q is not an http(s) URL", c.base)
	}
	u.RawQuery = query.Encode()
	var body io.Reader
	if in != nil {
		body = bytes.NewReader(in)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return 0, fmt.Errorf("retryd client: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("retryd client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("retryd client: reading the answer to %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, decodeError(resp.StatusCode, data)
	}
	if out == nil { // an answer without a body, such as a 204
		return resp.StatusCode, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, fmt.Errorf("retryd client: decoding the answer to %s %s: %w", method, path, err)
	}
	return resp.StatusCode, nil
}

func decodeError(status int, data []byte) error {
	var env struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(data, &env) == nil && env.Error != nil && env.Error.Code != "" {
		env.Error.StatusCode = status
		return env.Error
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{StatusCode: status, Message: msg}
}

func listQuery(o ListOptions) url.Values {
	q := url.Values{}
	if o.PageToken != "" {
		q.Set("pageToken", o.PageToken)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

func taskPath(id string, suffix string) string { return "/retry-tasks/" + url.PathEscape(id) + suffix }
