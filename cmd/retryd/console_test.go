package main_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/retrykit/retry/service/servertest"
)

// The console is driven in headless Chromium (Debian's chromium, which
// .ci/servers installs), against retryd on each store, as an operator
// would use it. Every flow saves a screenshot in the test's temp dir (and
// in $RETRYKIT_SCREENSHOTS when set, which is how docs/console.png is made).

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

// browser is one headless Chromium tab that fails the test on any
// exception a page's script throws and on any Content-Security-Policy
// violation (a sign that markup from data tried to run).
type browser struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1300, 1000),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // starts the browser and its tab
		cancel()
		cancelAlloc()
		t.Fatalf("starting chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException || strings.Contains(m.Text, "Content Security Policy") {
				b.mu.Lock()
				b.errs = append(b.errs, m.Text)
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.errs) > 0 {
			t.Errorf("the console's page reported: %s", strings.Join(b.errs, "; "))
		}
	})
	return b
}

// timeout bounds each step of a flow.
const stepTimeout = 30 * time.Second

// do runs steps, failing the test on an error or after stepTimeout.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\npage: %s", what, err, b.page())
	}
}

// page is the text of the page's main element, for failure messages.
func (b *browser) page() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main') ? document.querySelector('main').innerText : ''`))
	return s
}

// eval returns the value of the JavaScript expression js.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// until waits for the JavaScript expression js to be true.
func (b *browser) until(what, js string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingTimeout(25*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting until %s: %v\npage: %s", what, err, b.page())
	}
}

// text is the text of the first element sel matches.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("read %s: %v\npage: %s", sel, err, b.page())
	}
	return s
}

// screenshot saves the page as name.png in the test's temp dir, and in
// $RETRYKIT_SCREENSHOTS when set.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
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

// consoleStores runs f against retryd on each store, started with args.
func consoleStores(t *testing.T, f func(t *testing.T, start func(args ...string) *daemon)) {
	for _, name := range []string{"sqlite", "postgres", "redis"} {
		t.Run(name, func(t *testing.T) {
			start := func(args ...string) *daemon { return storeStarter(t, name, nil, args...)() }
			f(t, start)
		})
	}
}

var quickPolicy = map[string]any{"backoff": "FIXED", "initialDelayMs": 50, "jitterType": "NONE", "maxAttempts": 3}

func TestConsole(t *testing.T) {
	chromiumPath(t)
	consoleStores(t, func(t *testing.T, start func(args ...string) *daemon) {
		target := newFlaky(t)
		d := start("--allow-target", "127.0.0.1/32")
		d.putPolicy("quick", quickPolicy)
		b := newBrowser(t)

		// GET / leads to the console, and the overview's counts follow the
		// tasks as they run, without a reload.
		b.do("open the console", chromedp.Navigate(d.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#counts [data-status=SUCCEEDED]`)))
		loc := eval[string](b, `location.href`)
		if !strings.HasPrefix(loc, d.url+"/ui/") {
			t.Fatalf("GET / led to %s, want the console at /ui/", loc)
		}
		if got := b.text(`#counts [data-status=SUCCEEDED] .n`); got != "0" {
			t.Fatalf("succeeded before any task: %q", got)
		}
		var keyed task
		d.call("POST", "/retry-tasks", map[string]any{"targetUrl": target.URL + "/fail/2", "policyId": "quick",
			"idempotencyKey": "order-4711", "headers": map[string]string{"Authorization": "Bearer top-secret-value"}}, http.StatusCreated, &keyed)
		for range 4 {
			d.submit(target.URL+"/fail/1", "quick")
		}
		b.until("the overview counts 5 succeeded", `document.querySelector('#counts [data-status=SUCCEEDED] .n').textContent === '5'`)
		b.until("the chart shows attempts", `[...document.querySelectorAll('polyline[data-series=succeeded]')].some(p => p.getAttribute('points').split(' ').some(xy => +xy.split(',')[1] < 200))`)
		b.screenshot("overview")

		// Find the task by its idempotency key and read its timeline.
		b.do("search by key", chromedp.Navigate(d.url+"/ui/#/tasks"), chromedp.WaitVisible(chromedp.CSS(`#f-key`)),
			chromedp.SetValue(chromedp.CSS(`#f-key`), "order-4711"), chromedp.Click(chromedp.CSS(`#task-filters button[type=submit]`)))
		b.until("one task found", `document.querySelectorAll('#tasks tbody tr[data-task]').length === 1`)
		if got := b.text(`#tasks tbody tr[data-task] a`); got != keyed.TaskID {
			t.Fatalf("search by key found %q, want %s", got, keyed.TaskID)
		}
		b.do("open the task", chromedp.Click(chromedp.CSS(`#tasks tbody tr[data-task] a`)), chromedp.WaitVisible(chromedp.CSS(`#timeline svg`)))
		b.until("three attempts drawn", `document.querySelectorAll('#timeline rect[data-attempt]').length === 3 && document.querySelectorAll('#attempts tr[data-attempt]').length === 3`)
		if h := b.text(`#headers`); strings.Contains(h, "top-secret-value") || !strings.Contains(h, "masked") {
			t.Fatalf("the Authorization header is shown as %q, want it masked", h)
		}
		b.screenshot("task")

		// A dead-letter group, redriven from the console once the target
		// is healthy: its tasks succeed.
		var dead []string
		for range 3 {
			dead = append(dead, d.submit(target.URL+"/switch", "quick").TaskID)
		}
		for _, id := range dead {
			d.waitTask(id, terminal)
		}
		b.do("dead letters", chromedp.Navigate(d.url+"/ui/#/dead"), chromedp.WaitVisible(chromedp.CSS(`#causes`)))
		b.until("the HTTP 503 group counts 3", `(r => r && r.children[1].textContent === '3')(document.querySelector('#causes tr[data-cause="HTTP 503"]'))`)
		b.screenshot("dead-letters")
		target.setHealthy()
		b.do("redrive the group", chromedp.Click(chromedp.CSS(`#causes tr[data-cause="HTTP 503"] .redrive-group`)),
			chromedp.Click(chromedp.CSS(`#causes tr[data-cause="HTTP 503"] .redrive-group`)))
		b.until("progress says 3", `document.querySelector('#bulk-progress').textContent === 'redriven 3'`)
		for _, id := range dead {
			if got := d.waitTask(id, func(t task) bool { return t.Status == "SUCCEEDED" }); got.Status != "SUCCEEDED" {
				t.Fatalf("redriven task %s ended %s", id, got.Status)
			}
		}

		// Another group, dismissed from the console: its tasks are cancelled.
		var gone []string
		for range 2 {
			gone = append(gone, d.submit(target.URL+"/status/500", "quick").TaskID)
		}
		for _, id := range gone {
			d.waitTask(id, terminal)
		}
		b.do("dead letters again", chromedp.Navigate(d.url+"/ui/#/dead"), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#causes tr[data-cause="HTTP 500"]`)))
		b.do("cancel the group", chromedp.Click(chromedp.CSS(`#causes tr[data-cause="HTTP 500"] .cancel-group`)),
			chromedp.Click(chromedp.CSS(`#causes tr[data-cause="HTTP 500"] .cancel-group`)))
		b.until("progress says 2", `document.querySelector('#bulk-progress').textContent === 'cancelled 2'`)
		for _, id := range gone {
			if got := d.task(id); got.Status != "CANCELLED" {
				t.Fatalf("a task of the cancelled group is %s", got.Status)
			}
		}

		// The preview of a policy typed on the page, never saved.
		spec := `{"backoff":"EXPONENTIAL","initialDelayMs":1000,"multiplier":2,"maxDelayMs":60000,"jitterType":"FULL","maxAttempts":6,"totalBudgetMs":20000}`
		b.do("preview", chromedp.Navigate(d.url+"/ui/#/preview"), chromedp.WaitVisible(chromedp.CSS(`#spec-input`)),
			chromedp.SetValue(chromedp.CSS(`#spec-input`), spec), chromedp.Click(chromedp.CSS(`#preview`)))
		b.until("six attempts previewed", `document.querySelectorAll('#preview-table tbody tr').length === 6 && !!document.querySelector('#budget-line')`)
		// Full jitter: the median wait before attempt 2 is half of 1 s.
		row2 := b.text(`#preview-table tbody tr:nth-child(2)`)
		if !strings.Contains(row2, "#2") || !(strings.Contains(row2, "49") || strings.Contains(row2, "50") || strings.Contains(row2, "51")) {
			t.Fatalf("preview row of attempt 2: %q, want a p50 near 500 ms", row2)
		}
		b.screenshot("preview")
		var policies struct{ Items []map[string]any }
		d.call("GET", "/retry-policies", nil, http.StatusOK, &policies)
		for _, p := range policies.Items {
			if p["maxAttempts"] == float64(6) {
				t.Fatalf("the preview saved a policy: %v", p)
			}
		}
	})
}

// Data a caller or a target controls renders as text: no script runs.
func TestConsoleEscapesData(t *testing.T) {
	chromiumPath(t)
	consoleStores(t, func(t *testing.T, start func(args ...string) *daemon) {
		d := start("--allow-target", "127.0.0.1/32")
		const script = `<script>window.pwned=1</script>`
		const img = `"><img src=x onerror="window.pwned=2">`
		const keyImg = `"><img/src=x/onerror=window.pwned=3>` // an idempotency key is visible ASCII
		d.putPolicy(`once`, map[string]any{"maxAttempts": 1})
		// The target answers with a redirect to markup, which the attempt's
		// error quotes; its body is markup too.
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "/"+script+img)
			w.WriteHeader(http.StatusFound)
			_, _ = io.WriteString(w, script+img)
		}))
		t.Cleanup(target.Close)
		var created task
		d.call("POST", "/retry-tasks", map[string]any{"targetUrl": target.URL + "/" + script + "?q=" + keyImg, "policyId": "once",
			"idempotencyKey": keyImg, "headers": map[string]string{"X-Note": script + img}}, http.StatusCreated, &created)
		got := d.waitTask(created.TaskID, terminal)
		if !strings.Contains(got.LastError, "<script>") {
			t.Fatalf("the attempt's error %q does not carry the markup this test is about", got.LastError)
		}
		b := newBrowser(t)
		b.do("open the task", chromedp.Navigate(d.url+"/ui/#/task/"+created.TaskID), chromedp.WaitVisible(chromedp.CSS(`#attempts`)))
		b.until("the attempt is listed", `document.querySelectorAll('#attempts tr[data-attempt]').length === 1`)
		for sel, want := range map[string]string{`#target`: script, `#headers`: img, `#last-error`: script, `#attempts`: script} {
			if got := b.text(sel); !strings.Contains(got, want) {
				t.Errorf("%s shows %q, want the text %q in it", sel, got, want)
			}
		}
		b.do("the task list", chromedp.Navigate(d.url+"/ui/#/tasks"), chromedp.WaitVisible(chromedp.CSS(`#tasks tbody tr[data-task]`)))
		b.do("the dead letters", chromedp.Navigate(d.url+"/ui/#/dead"), chromedp.WaitVisible(chromedp.CSS(`#causes`)))
		pwned := eval[int](b, `window.pwned || 0`)
		imgs := eval[int](b, `document.querySelectorAll('main img, main script').length`)
		if pwned != 0 || imgs != 0 {
			t.Fatalf("data ran as markup: window.pwned=%d, %d img/script elements in the page", pwned, imgs)
		}
		b.screenshot("escaped")
	})
}

// With a tokens file, the console asks for a token, keeps it in an
// HttpOnly SameSite=Strict cookie, and shows only that tenant's tasks.
func TestConsoleTenants(t *testing.T) {
	chromiumPath(t)
	consoleStores(t, func(t *testing.T, start func(args ...string) *daemon) {
		tokens := filepath.Join(t.TempDir(), "tokens")
		const tokenA, tokenB = "console-token-of-tenant-a-01234", "console-token-of-tenant-b-01234"
		if err := os.WriteFile(tokens, []byte(tokenA+" tenant-a\n"+tokenB+" tenant-b\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		target := newFlaky(t)
		d := start("--allow-target", "127.0.0.1/32", "--tokens-file", tokens)
		as := func(token string) *daemon { c := *d; c.token = token; return &c }
		a, bt := as(tokenA), as(tokenB)
		a.putPolicy("quick", quickPolicy)
		bt.putPolicy("quick", quickPolicy)
		mine := a.submit(target.URL+"/fail/0", "quick")
		theirs := bt.submit(target.URL+"/fail/0", "quick")
		a.waitTask(mine.TaskID, terminal)
		bt.waitTask(theirs.TaskID, terminal)

		b := newBrowser(t)
		b.do("open", chromedp.Navigate(d.url+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#login #token`)))
		b.screenshot("sign-in")
		b.do("sign in", chromedp.SetValue(chromedp.CSS(`#token`), tokenA), chromedp.Click(chromedp.CSS(`#login button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#counts`)))
		cookie := eval[string](b, `document.cookie`)
		if cookie != "" {
			t.Fatalf("a script can read the cookies %q; the session cookie must be HttpOnly", cookie)
		}
		b.do("tasks", chromedp.Navigate(d.url+"/ui/#/tasks"), chromedp.WaitVisible(chromedp.CSS(`#tasks tbody tr[data-task]`)))
		ids := eval[[]string](b, `[...document.querySelectorAll('#tasks tr[data-task]')].map(r => r.dataset.task)`)
		if len(ids) != 1 || ids[0] != mine.TaskID {
			t.Fatalf("tenant a's console lists %v, want only %s", ids, mine.TaskID)
		}
		b.do("another tenant's task", chromedp.Navigate(d.url+"/ui/#/task/"+theirs.TaskID), chromedp.WaitVisible(chromedp.CSS(`main .error`)))
		if msg := b.text(`main .error`); !strings.Contains(strings.ToLower(msg), "not found") && !strings.Contains(msg, "no task") {
			t.Fatalf("tenant b's task in tenant a's console: %q, want not found", msg)
		}

		// A page of another origin can't change anything with the cookie:
		// the cross-origin protection refuses it.
		req, _ := http.NewRequest("POST", d.url+"/retry-tasks/"+mine.TaskID+"/redrive", nil)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "http://evil.example")
		req.AddCookie(&http.Cookie{Name: "retryd_session", Value: tokenA})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a cross-origin POST with the session cookie answered %d, want 403", resp.StatusCode)
		}
		b.do("sign out", chromedp.Click(chromedp.CSS(`#logout`)), chromedp.WaitVisible(chromedp.CSS(`#login`)))
	})
}
