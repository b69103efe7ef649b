package run

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
)

// apiClient talks to a retryd's API over one keep-alive connection of its
// own, as one user's client would. Its HTTP client is fasthttp's (lean) or
// Go's (net/http): the bench shares the machine with retryd, and Go's
// client costs about twice the CPU a request, with two goroutine hand-offs
// each way, which the figures would count as retryd's. River and asynq,
// beside which the figures are read, insert through in-process calls.
type apiClient struct {
	base string
	hc   *http.Client         // net/http
	fc   *fasthttp.HostClient // lean
}

// clientTimeout bounds each request.
const clientTimeout = 30 * time.Second

func newAPIClient(addr, kind string) *apiClient {
	if kind == targetLean {
		return &apiClient{base: "http://" + addr, fc: &fasthttp.HostClient{
			Addr: addr, MaxConns: 1, MaxConnWaitTimeout: clientTimeout, MaxIdleConnDuration: time.Minute,
			NoDefaultUserAgentHeader: true, DisablePathNormalizing: true,
		}}
	}
	tr := &http.Transport{
		Proxy:               nil, // loopback only, whatever the environment says
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
	}
	return &apiClient{base: "http://" + addr, hc: &http.Client{Transport: tr, Timeout: clientTimeout}}
}

func (c *apiClient) close() {
	if c.fc != nil {
		c.fc.CloseIdleConnections()
		return
	}
	c.hc.CloseIdleConnections()
}

// do sends a request and returns the response's status and body; the body
// is read whole so that the connection is reused.
func (c *apiClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	if c.fc != nil {
		return c.doLean(ctx, method, path, body)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return resp.StatusCode, b, nil
}

// doLean is do with fasthttp, which takes a deadline rather than a
// context: ctx's, or clientTimeout's if sooner.
func (c *apiClient) doLean(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(c.base + path)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
	}
	deadline := time.Now().Add(clientTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.fc.DoDeadline(req, resp, deadline); err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode(), bytes.Clone(resp.Body()), nil
}

// benchTask is a POST /retry-tasks body.
type benchTask struct {
	TargetURL      string `json:"targetUrl"`
	PolicyID       string `json:"policyId"`
	IdempotencyKey string `json:"idempotencyKey"`
	Body           string `json:"body"`
}

// benchPolicyID names the policy every API run registers: a fixed 1 s
// delay, so that a second attempt's due time is known exactly.
const benchPolicyID = "bench-fixed-1s"

const benchPolicyJSON = `{"policyId":"` + benchPolicyID + `","backoff":"FIXED","initialDelayMs":1000,"jitterType":"NONE","maxAttempts":3}`

// registerPolicy registers the bench's policy.
func (c *apiClient) registerPolicy(ctx context.Context) error {
	status, body, err := c.do(ctx, http.MethodPost, "/retry-policies", []byte(benchPolicyJSON))
	if err != nil {
		return fmt.Errorf("register the policy: %w", err)
	}
	if status != http.StatusCreated && status != http.StatusOK {
		return fmt.Errorf("register the policy: POST /retry-policies answered %d: %s", status, bytes.TrimSpace(body))
	}
	return nil
}

// batchAnswer is a POST /retry-tasks/batch answer, with what the bench
// reads of it.
type batchAnswer struct {
	Items []struct {
		Status int `json:"status"`
		Error  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
		} `json:"error"`
	} `json:"items"`
}

// taskCounts reads the retry_tasks gauges of /metrics: the store's task
// count in each state, which costs one count query rather than a read of
// every task.
func (c *apiClient) taskCounts(ctx context.Context) (map[string]int64, error) {
	status, body, err := c.do(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("read /metrics: %w", err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics answered %d", status)
	}
	counts := map[string]int64{}
	const prefix = `retry_tasks{status="`
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(prefix)) {
			continue
		}
		state, value, ok := bytes.Cut(line[len(prefix):], []byte(`"} `))
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(string(value), 64)
		if err != nil {
			return nil, fmt.Errorf("/metrics: bad line %q", line)
		}
		counts[string(state)] = int64(n)
	}
	if len(counts) == 0 {
		// retryd leaves the gauges out when it cannot count.
		return nil, fmt.Errorf("/metrics has no retry_tasks gauges (the store did not answer the count)")
	}
	return counts, nil
}

// notSucceeded lists up to limit tasks not SUCCEEDED, for the report of a
// run that lost some: "key STATUS attempts N lastError".
func (c *apiClient) notSucceeded(ctx context.Context, limit int) ([]string, error) {
	status, body, err := c.do(ctx, http.MethodGet,
		"/retry-tasks?status=PENDING,IN_FLIGHT,EXHAUSTED,FAILED,CANCELLED&limit="+strconv.Itoa(limit), nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /retry-tasks answered %d", status)
	}
	var list struct {
		Items []struct {
			IdempotencyKey string `json:"idempotencyKey"`
			Status         string `json:"status"`
			AttemptNumber  int    `json:"attemptNumber"`
			LastError      string `json:"lastError"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET /retry-tasks: %w", err)
	}
	var out []string
	for _, t := range list.Items {
		out = append(out, fmt.Sprintf("%s %s attempts %d %s", t.IdempotencyKey, t.Status, t.AttemptNumber, t.LastError))
	}
	return out, nil
}
