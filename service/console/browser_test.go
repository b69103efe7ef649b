package console_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry/service/servertest"
)

// The console's pages are driven in headless Chromium (Debian's chromium,
// which .ci/servers installs), as in cmd/retryd's console tests. Those use
// chromedp, which this module does not require; this file speaks the few
// DevTools commands the tests here need over --remote-debugging-pipe
// instead, with the same rules: a script exception or a
// Content-Security-Policy violation fails the test, and every flow saves
// a screenshot in the test's temp dir (and in $RETRYKIT_SCREENSHOTS when
// set).

// chromiumPath finds Chromium, or skips (fails in CI) without it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	servertest.Missing(t, "no chromium on PATH: .ci/servers installs Debian's chromium package")
	return ""
}

// stepTimeout bounds each step of a flow.
const stepTimeout = 30 * time.Second

// cdpMessage is a DevTools message either way: a command, its answer or
// an event.
type cdpMessage struct {
	ID        int64           `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    any             `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// browser is one headless Chromium tab.
type browser struct {
	t       *testing.T
	out     io.Writer // commands to Chromium
	session string    // the tab's

	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan cdpMessage
	errs    []string // exceptions and CSP violations the page reported
	closed  bool
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath(t)
	// Chromium reads commands from its fd 3 and writes to its fd 4.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
		"--user-data-dir="+t.TempDir(), "--window-size=1300,1000", "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, resW}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	cmdR.Close()
	resW.Close()
	b := &browser{t: t, out: cmdW, waiting: map[int64]chan cdpMessage{}}
	done := make(chan struct{})
	go b.read(resR, done)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = b.call(ctx, "", "Browser.close", nil)
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
		cmdW.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.errs) > 0 {
			t.Errorf("the console's page reported: %s", strings.Join(b.errs, "; "))
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.callInto(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		t.Fatalf("starting chromium: %v\n%s", err, stderr.String())
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.callInto(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		t.Fatalf("attaching to the tab: %v", err)
	}
	b.session = attached.SessionID
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		if _, err := b.call(ctx, b.session, m, nil); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
	return b
}

// read hands each answer to its caller and keeps what the page reports.
func (b *browser) read(r io.Reader, done chan struct{}) {
	defer close(done)
	br := bufio.NewReader(r)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.closed = true
			for id, ch := range b.waiting {
				close(ch)
				delete(b.waiting, id)
			}
			b.mu.Unlock()
			return
		}
		var m cdpMessage
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		if m.ID != 0 {
			b.mu.Lock()
			ch := b.waiting[m.ID]
			delete(b.waiting, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		if text := reported(m); text != "" {
			b.mu.Lock()
			b.errs = append(b.errs, text)
			b.mu.Unlock()
		}
	}
}

// reported is what an event says went wrong on the page: an exception a
// script threw, or a Content-Security-Policy violation (a sign that markup
// from data tried to run); "" for any other event.
func reported(m cdpMessage) string {
	raw, _ := json.Marshal(m.Params)
	switch m.Method {
	case "Runtime.exceptionThrown":
		var p struct {
			Details struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		_ = json.Unmarshal(raw, &p)
		return strings.TrimSpace(p.Details.Text + " " + p.Details.Exception.Description)
	case "Log.entryAdded", "Runtime.consoleAPICalled":
		if strings.Contains(string(raw), "Content Security Policy") {
			return string(raw)
		}
	}
	return ""
}

// call sends one command, to the tab's session or ("") to the browser.
func (b *browser) call(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: chromium is gone", method)
	}
	b.nextID++
	id := b.nextID
	ch := make(chan cdpMessage, 1)
	b.waiting[id] = ch
	msg, err := json.Marshal(cdpMessage{ID: id, SessionID: session, Method: method, Params: params})
	if err == nil {
		_, err = b.out.Write(append(msg, 0))
	}
	b.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%s: chromium is gone", method)
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		return m.Result, nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.waiting, id)
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

func (b *browser) callInto(ctx context.Context, session, method string, params, out any) error {
	res, err := b.call(ctx, session, method, params)
	if err != nil {
		return err
	}
	return json.Unmarshal(res, out)
}

// evaluate runs the JavaScript expression js in the page, awaiting it when
// it is a promise, into out.
func (b *browser) evaluate(ctx context.Context, js string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := b.callInto(ctx, b.session, "Runtime.evaluate", map[string]any{"expression": js, "returnByValue": true, "awaitPromise": true}, &res)
	if err != nil {
		return err
	}
	if e := res.Exception; e != nil {
		return fmt.Errorf("%s %s", e.Text, e.Exception.Description)
	}
	if out == nil || len(res.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(res.Result.Value, out)
}

// eval returns the value of the JavaScript expression js.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	var v T
	if err := b.evaluate(ctx, js, &v); err != nil {
		b.t.Fatalf("evaluate %s: %v\npage: %s", js, err, b.page())
	}
	return v
}

// page is the text of the page's main element, for failure messages.
func (b *browser) page() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var s string
	_ = b.evaluate(ctx, `document.querySelector('main') ? document.querySelector('main').innerText : ''`, &s)
	return s
}

// until waits for the JavaScript expression js to be true.
func (b *browser) until(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var ok bool
		err := b.evaluate(ctx, `!!(`+js+`)`, &ok)
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waiting until %s: %v\npage: %s", what, err, b.page())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// navigate loads url in the tab (a change of the hash alone routes the
// page that is loaded).
func (b *browser) navigate(url string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if _, err := b.call(ctx, b.session, "Page.navigate", map[string]any{"url": url}); err != nil {
		b.t.Fatalf("navigate to %s: %v", url, err)
	}
}

// click clicks the middle of the first element sel matches with the
// mouse, as a person would: an element hidden under another, or disabled,
// does not take the click.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.until(sel+" is there", `document.querySelector(`+jsString(sel)+`)`)
	xy := eval[[]float64](b, `(el => { el.scrollIntoView({block: 'center'}); const r = el.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })(document.querySelector(`+jsString(sel)+`))`)
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		ev := map[string]any{"type": typ, "x": xy[0], "y": xy[1]}
		if typ != "mouseMoved" {
			ev["button"], ev["clickCount"] = "left", 1
		}
		if _, err := b.call(ctx, b.session, "Input.dispatchMouseEvent", ev); err != nil {
			b.t.Fatalf("click %s: %v", sel, err)
		}
	}
}

// typeInto focuses the first element sel matches and types text into it.
func (b *browser) typeInto(sel, text string) {
	b.t.Helper()
	b.until(sel+" is there", `document.querySelector(`+jsString(sel)+`)`)
	eval[any](b, `document.querySelector(`+jsString(sel)+`).focus()`)
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	if _, err := b.call(ctx, b.session, "Input.insertText", map[string]any{"text": text}); err != nil {
		b.t.Fatalf("type into %s: %v", sel, err)
	}
}

// text is the text of the first element sel matches.
func (b *browser) text(sel string) string {
	b.t.Helper()
	b.until(sel+" is there", `document.querySelector(`+jsString(sel)+`)`)
	return eval[string](b, `document.querySelector(`+jsString(sel)+`).innerText`)
}

// screenshot saves the page as name.png in the test's temp dir, and in
// $RETRYKIT_SCREENSHOTS when set.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	var shot struct {
		Data string `json:"data"`
	}
	if err := b.callInto(ctx, b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	dirs := []string{b.t.TempDir()}
	if d := os.Getenv("RETRYKIT_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

// jsString quotes s as a JavaScript string.
func jsString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}
