package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/blob/disk"
)

// largeText is n bytes of text with characters JSON escapes ("\n", '"',
// '\\') and some that are not ASCII, as a real payload has.
func largeText(n int) string {
	line := `{"id":12345,"name":"Zoë \"quoted\" \\ path","tags":["a","b"],"note":"naïve café 😀"}` + "\n"
	s := strings.Repeat(line, n/len(line)+1)
	return s[:n-len("end")] + "end"
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// blobBytes reads the blob ref from e's blob store.
func (e *env) blobBytes(t *testing.T, ref string) []byte {
	t.Helper()
	r, size, err := e.blobs.Open(context.Background(), ref)
	if err != nil {
		t.Fatalf("blobs.Open(%s): %v", ref, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil || int64(len(b)) != size {
		t.Fatalf("reading blob %s: %d bytes of %d, %v", ref, len(b), size, err)
	}
	return b
}

// countBlobs counts the blobs of e's blob store.
func (e *env) countBlobs(t *testing.T) int {
	t.Helper()
	n := 0
	if err := e.blobs.List(context.Background(), func(blob.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// A 20 MB body given inline goes to the blob store: the task's row keeps
// its reference and size only, GET shows them and not the body, and the
// same request again is a repeat of the task, not a second one.
func TestLargeInlineBodyGoesToTheBlobStore(t *testing.T) {
	t.Parallel()
	e := setup(t, options{blobs: true})
	e.putPolicy(t, `{"policyId":"p"}`)
	body := largeText(20_000_000)
	req := `{"targetUrl":"http://example.com/in","policyId":"p","idempotencyKey":"big-1","headers":{"Content-Type":"application/x-ndjson"},"body":` + jsonString(body) + `}`

	created := e.do(t, "POST", "/retry-tasks", req).wantStatus(t, http.StatusCreated)
	id, _ := created["taskId"].(string)
	ref, _ := created["bodyRef"].(string)
	if !strings.HasPrefix(ref, disk.RefPrefix) || created["bodySize"] != float64(len(body)) || created["body"] != nil || created["bodyBase64"] != nil {
		t.Fatalf("answer: bodyRef %v, bodySize %v, body present %t; want a blob: reference, %d, no body",
			created["bodyRef"], created["bodySize"], created["body"] != nil, len(body))
	}
	row, err := e.store.TaskGet(context.Background(), api.DefaultTenant, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(row.Body) != 0 || row.BodyRef != ref || row.BodySize != int64(len(body)) {
		t.Fatalf("the row holds %d body bytes, BodyRef %q, BodySize %d; want none, %q, %d", len(row.Body), row.BodyRef, row.BodySize, ref, len(body))
	}
	if got := e.blobBytes(t, ref); !bytes.Equal(got, []byte(body)) {
		t.Fatalf("the blob holds %d bytes that are not the request's body (%d)", len(got), len(body))
	}
	if sum := sha256.Sum256([]byte(body)); !strings.HasSuffix(ref, fmt.Sprintf("%x", sum)) {
		t.Fatalf("bodyRef %s is not named after the body's SHA-256", ref)
	}

	got := e.do(t, "GET", "/retry-tasks/"+id, "").wantStatus(t, http.StatusOK)
	if got["bodyRef"] != ref || got["bodySize"] != float64(len(body)) || got["body"] != nil {
		t.Fatalf("GET: bodyRef %v, bodySize %v, body present %t", got["bodyRef"], got["bodySize"], got["body"] != nil)
	}
	list := e.do(t, "GET", "/retry-tasks", "").wantStatus(t, http.StatusOK)
	if item := list["items"].([]any)[0].(map[string]any); item["bodyRef"] != ref || item["body"] != nil {
		t.Fatalf("list item: %v", item)
	}

	again := e.do(t, "POST", "/retry-tasks", req).wantStatus(t, http.StatusOK)
	if again["taskId"] != id || again["bodyRef"] != ref {
		t.Fatalf("repeat: taskId %v bodyRef %v, want %s %s", again["taskId"], again["bodyRef"], id, ref)
	}
	other := strings.Replace(req, "naïve", "naive", 1)
	e.do(t, "POST", "/retry-tasks", other).wantError(t, http.StatusConflict, "conflict", "idempotencyKey")
	if n := e.countBlobs(t); n != 2 {
		t.Errorf("%d blobs, want 2: the task's, and the conflicting request's (an orphan for the sweep)", n)
	}
}

// The same request is the same task whether its body was kept in the row
// or moved to the blob store: two handlers over one store, one keeping
// bodies inline (a high threshold), the other moving them, see each
// other's tasks as repeats, for a body hashed whole (up to 1 MiB) and for
// one hashed as its SHA-256; and a different body is a conflict on both.
func TestRequestHashIgnoresWhereTheBodyIs(t *testing.T) {
	t.Parallel()
	e := setup(t, options{blobs: true, threshold: 1 << 10})
	e.putPolicy(t, `{"policyId":"p"}`)
	inline, err := api.New(api.Config{Store: e.store, Blobs: e.blobs, MaxBodyBytes: 4 << 20, BlobThreshold: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	inlineSrv := httptest.NewServer(inline)
	t.Cleanup(inlineSrv.Close)
	post := func(url, body string) (int, map[string]any) {
		resp, err := http.Post(url+"/retry-tasks", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m
	}
	for _, size := range []int{200 << 10, 2 << 20} {
		for i, order := range [][2]string{{inlineSrv.URL, e.srv.URL}, {e.srv.URL, inlineSrv.URL}} {
			body := largeText(size)
			key := fmt.Sprintf("k-%d-%d", size, i)
			b64 := `{"targetUrl":"http://h/","policyId":"p","idempotencyKey":"` + key + `","bodyBase64":"` + base64.StdEncoding.EncodeToString([]byte(body)) + `"}`
			text := `{"targetUrl":"http://h/","policyId":"p","idempotencyKey":"` + key + `","body":` + jsonString(body) + `}`
			status, first := post(order[0], b64)
			if status != http.StatusCreated {
				t.Fatalf("%d bytes: first create = %d %v", size, status, first)
			}
			// The same bytes, as text this time, through the other handler.
			status, second := post(order[1], text)
			if status != http.StatusOK || second["taskId"] != first["taskId"] {
				t.Fatalf("%d bytes, %s then %s: repeat = %d %v, want 200 with task %v", size, order[0], order[1], status, second["taskId"], first["taskId"])
			}
			status, _ = post(order[1], strings.Replace(text, "Zoë", "Zoe", 1))
			if status != http.StatusConflict {
				t.Fatalf("%d bytes: another body under the key = %d, want 409", size, status)
			}
		}
	}
}

// genReader yields n bytes of text, hashing them as it goes.
type genReader struct {
	n, read int64
	h       interface{ Write([]byte) (int, error) }
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.read == g.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.n-g.read)]
	for i := range p {
		p[i] = 'a' + byte((g.read+int64(i))%26)
	}
	g.read += int64(len(p))
	g.h.Write(p)
	return len(p), nil
}

// The single create streams a large body to the blob store instead of
// holding it: a 64 MiB body costs the whole process (client, server, blob
// store) a few MiB of allocations. Reading the request whole (io.ReadAll,
// json.Unmarshal) would cost more than the body itself.
func TestLargeBodyIsStreamed(t *testing.T) {
	e := setup(t, options{blobs: true})
	e.putPolicy(t, `{"policyId":"p"}`)
	const size = 64<<20 - 4096
	prefix := `{"targetUrl":"http://example.com/","policyId":"p","body":"`
	suffix := `"}`
	h := sha256.New()
	gen := &genReader{n: size, h: h}
	send := func() map[string]any {
		req, err := http.NewRequest("POST", e.srv.URL+"/retry-tasks", io.MultiReader(strings.NewReader(prefix), gen, strings.NewReader(suffix)))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(len(prefix) + size + len(suffix))
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		return m
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := send()
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d MiB body: %.1f MiB allocated", size>>20, float64(allocated)/(1<<20))
	if gen.read != size {
		t.Fatalf("the request's body was read to %d bytes of %d", gen.read, size)
	}
	if limit := uint64(16 << 20); allocated > limit {
		t.Fatalf("creating a task with a %d MiB body allocated %d MiB, over %d MiB: is the body held in memory?", size>>20, allocated>>20, limit>>20)
	}
	ref, _ := m["bodyRef"].(string)
	if want := fmt.Sprintf("%s%x", disk.RefPrefix, h.Sum(nil)); ref != want || m["bodySize"] != float64(size) {
		t.Fatalf("bodyRef %q bodySize %v, want %q %d", ref, m["bodySize"], want, size)
	}
}

// Past Config.MaxLargeBodyBytes a create is a 413, as it is past
// MaxBodyBytes without a blob store; and what is not the body is still held
// to MaxBodyBytes. Neither leaves a blob behind.
func TestLargeBodyLimits(t *testing.T) {
	t.Parallel()
	e := setup(t, options{blobs: true, maxBody: 4096, threshold: 1024, maxLarge: 64 << 10})
	e.putPolicy(t, `{"policyId":"p"}`)
	over := `{"targetUrl":"http://h/","policyId":"p","body":"` + strings.Repeat("x", 65<<10) + `"}`
	e.do(t, "POST", "/retry-tasks", over).wantError(t, http.StatusRequestEntityTooLarge, "body_too_large", "")
	// Without a Content-Length: refused while it is read.
	req, _ := http.NewRequest("POST", e.srv.URL+"/retry-tasks", io.MultiReader(strings.NewReader(over)))
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.ContentLength != 0 || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked: Content-Length %d, status %d, want a 413", req.ContentLength, resp.StatusCode)
	}
	rest := `{"targetUrl":"http://h/","policyId":"p","body":"x","headers":{"X-A":"` + strings.Repeat("a", 5000) + `"}}`
	e.do(t, "POST", "/retry-tasks", rest).wantError(t, http.StatusRequestEntityTooLarge, "body_too_large", "")
	// Refused after the body went by: an unknown field, after it.
	late := `{"targetUrl":"http://h/","policyId":"p","body":"` + strings.Repeat("y", 32<<10) + `","retries":3}`
	e.do(t, "POST", "/retry-tasks", late).wantError(t, http.StatusBadRequest, "invalid_request", "retries")
	// And an unknown policy, checked once the body is read.
	e.do(t, "POST", "/retry-tasks", `{"targetUrl":"http://h/","policyId":"nope","body":"`+strings.Repeat("z", 32<<10)+`"}`).
		wantError(t, http.StatusBadRequest, "unknown_policy", "policyId")
	if n := e.countBlobs(t); n != 0 {
		t.Fatalf("refused requests left %d blobs", n)
	}
	// A body just over the threshold goes to the store, one at it does not.
	at := e.createTask(t, `{"targetUrl":"http://h/","policyId":"p","body":"`+strings.Repeat("a", 1024)+`"}`)
	past := e.createTask(t, `{"targetUrl":"http://h/","policyId":"p","body":"`+strings.Repeat("a", 1025)+`"}`)
	if at["bodyRef"] != nil || at["body"] == nil || past["bodyRef"] == nil || past["body"] != nil {
		t.Fatalf("at the threshold: bodyRef %v; past it: bodyRef %v", at["bodyRef"], past["bodyRef"])
	}
}

// The tasks of a batch whose bodies are over the threshold keep them in
// the blob store too, and a repeat of the batch repeats them.
func TestBatchMovesLargeBodies(t *testing.T) {
	t.Parallel()
	e := setup(t, options{blobs: true})
	e.putPolicy(t, `{"policyId":"p"}`)
	big := largeText(100 << 10)
	batch := `{"tasks":[` +
		`{"targetUrl":"http://h/1","policyId":"p","idempotencyKey":"b1","body":` + jsonString(big) + `},` +
		`{"targetUrl":"http://h/2","policyId":"p","idempotencyKey":"b2","body":"small"},` +
		`{"targetUrl":"http://h/3","policyId":"p","idempotencyKey":"b3","bodyBase64":"` + base64.StdEncoding.EncodeToString([]byte(big)) + `"}]}`
	for _, want := range []float64{201, 200} {
		got := e.do(t, "POST", "/retry-tasks/batch", batch).wantStatus(t, http.StatusOK)
		items := got["items"].([]any)
		var refs []string
		for i, it := range items {
			it := it.(map[string]any)
			task := it["task"].(map[string]any)
			if it["status"] != want {
				t.Fatalf("item %d: status %v, want %v", i, it["status"], want)
			}
			ref, _ := task["bodyRef"].(string)
			if (i != 1) != (ref != "") || (ref != "") == (task["body"] != nil || task["bodyBase64"] != nil) {
				t.Fatalf("item %d: bodyRef %q, body %v", i, ref, task["body"] != nil)
			}
			refs = append(refs, ref)
		}
		if refs[0] != refs[2] {
			t.Errorf("the same bytes, as body and bodyBase64, are two blobs: %s, %s", refs[0], refs[2])
		}
		if !bytes.Equal(e.blobBytes(t, refs[0]), []byte(big)) {
			t.Errorf("the blob is not the body")
		}
	}
}

// A bodyRef is accepted only within the tenant's allow-list from the tokens
// file, never of retryd's own form, and never with an inline body.
func TestBodyRefAllowList(t *testing.T) {
	t.Parallel()
	e := setup(t, options{tokens: true, blobs: true, refsA: "s3://payloads/tenant-a/ s3://shared-bucket/"})
	e.putPolicy(t, `{"policyId":"p"}`)
	e.doWith(t, "POST", "/retry-policies", `{"policyId":"p"}`, map[string]string{"Authorization": "Bearer " + tokenB}).wantStatus(t, http.StatusCreated)
	task := func(ref string) string {
		return `{"targetUrl":"http://h/","policyId":"p","idempotencyKey":"ref-1","bodyRef":` + jsonString(ref) + `}`
	}

	created := e.do(t, "POST", "/retry-tasks", task("s3://payloads/tenant-a/2025/order-1.json")).wantStatus(t, http.StatusCreated)
	if created["bodyRef"] != "s3://payloads/tenant-a/2025/order-1.json" || created["bodySize"] != nil || created["body"] != nil {
		t.Fatalf("created: bodyRef %v bodySize %v body %v", created["bodyRef"], created["bodySize"], created["body"])
	}
	got := e.do(t, "GET", "/retry-tasks/"+created["taskId"].(string), "").wantStatus(t, http.StatusOK)
	if got["bodyRef"] != created["bodyRef"] {
		t.Fatalf("GET bodyRef = %v", got["bodyRef"])
	}
	again := e.do(t, "POST", "/retry-tasks", task("s3://payloads/tenant-a/2025/order-1.json")).wantStatus(t, http.StatusOK)
	if again["taskId"] != created["taskId"] {
		t.Fatalf("repeat made task %v, want %v", again["taskId"], created["taskId"])
	}
	e.do(t, "POST", "/retry-tasks", task("s3://payloads/tenant-a/2025/order-2.json")).wantError(t, http.StatusConflict, "conflict", "idempotencyKey")
	e.do(t, "POST", "/retry-tasks", strings.Replace(task("s3://shared-bucket/x"), "ref-1", "ref-2", 1)).wantStatus(t, http.StatusCreated)

	for _, ref := range []string{
		"s3://payloads/tenant-b/x.json",                       // another tenant's prefix
		"s3://payloads/tenant-ab/x.json",                      // a prefix that merely begins like it
		"s3://payloads/tenant-a/../tenant-b/x",                // out of it by ..
		"s3://payloads/tenant-a//x",                           // an empty segment
		"s3://payloads/tenant-a/",                             // no key
		"blob:sha256:" + strings.Repeat("0", 64),              // retryd's own
		"https://payloads.s3.amazonaws.com/x",                 // not s3://
		"s3://payloads/tenant-a/x\u0000y",                     // a control character
		"s3://payloads/tenant-a/" + strings.Repeat("k", 1020), // a key over 1024 bytes
	} {
		ans := e.do(t, "POST", "/retry-tasks", strings.Replace(task(ref), "ref-1", "other", 1))
		ans.wantError(t, http.StatusBadRequest, "invalid_request", "bodyRef")
	}
	// tenant-b may name nothing, not even tenant-a's places.
	e.doWith(t, "POST", "/retry-tasks", task("s3://payloads/tenant-a/x"), map[string]string{"Authorization": "Bearer " + tokenB}).
		wantError(t, http.StatusBadRequest, "invalid_request", "bodyRef")
	// A body inline and by reference at once names the fields.
	for _, both := range []string{
		`{"targetUrl":"http://h/","policyId":"p","body":"x","bodyRef":"s3://payloads/tenant-a/x"}`,
		`{"targetUrl":"http://h/","policyId":"p","bodyRef":"s3://payloads/tenant-a/x","bodyBase64":"eA=="}`,
		`{"targetUrl":"http://h/","policyId":"p","bodyRef":"s3://payloads/tenant-a/x","body":"` + strings.Repeat("x", 100<<10) + `"}`,
	} {
		msg := e.do(t, "POST", "/retry-tasks", both).wantError(t, http.StatusBadRequest, "invalid_request", "bodyRef")["message"].(string)
		if !strings.Contains(msg, "body") || !strings.Contains(msg, "bodyRef") {
			t.Errorf("message %q does not name the fields", msg)
		}
	}
	if n := e.countBlobs(t); n != 0 {
		t.Errorf("refused requests left %d blobs", n)
	}
}

// Without authentication, Config.AllowBodyRefs is the default tenant's
// allow-list; none by default.
func TestBodyRefAuthOff(t *testing.T) {
	t.Parallel()
	task := `{"targetUrl":"http://h/","policyId":"p","bodyRef":"s3://payloads/in/x.bin"}`
	none := setup(t, options{blobs: true})
	none.putPolicy(t, `{"policyId":"p"}`)
	none.do(t, "POST", "/retry-tasks", task).wantError(t, http.StatusBadRequest, "invalid_request", "bodyRef")

	allowed := setup(t, options{blobs: true, allowRefs: []string{"s3://payloads/in/"}})
	allowed.putPolicy(t, `{"policyId":"p"}`)
	allowed.createTask(t, task)

	noBlobs := setup(t, options{})
	noBlobs.putPolicy(t, `{"policyId":"p"}`)
	noBlobs.do(t, "POST", "/retry-tasks", task).wantError(t, http.StatusBadRequest, "invalid_request", "bodyRef")
}

func TestTokensFileBodyRefs(t *testing.T) {
	t.Parallel()
	tok, err := api.ParseTokens(strings.NewReader(tokenA + " acme s3://a-bucket/acme/\n" + tokenB + " acme s3://b-bucket/ s3://a-bucket/acme/\n" +
		"token-of-another-tenant-0123 globex\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.BodyRefPrefixes("acme"); strings.Join(got, " ") != "s3://a-bucket/acme/ s3://b-bucket/" {
		t.Errorf("acme's prefixes = %q", got)
	}
	if got := tok.BodyRefPrefixes("globex"); len(got) != 0 || !tok.HasBodyRefs() {
		t.Errorf("globex's prefixes = %q, HasBodyRefs %t", got, tok.HasBodyRefs())
	}
	for _, bad := range []string{"s3://a-bucket/acme", "s3://a-bucket", "http://a-bucket/", "s3://ab/", "s3://a-bucket/x//", "s3://a-bucket/../", "acme2"} {
		if _, err := api.ParseTokens(strings.NewReader(tokenA + " acme " + bad + "\n")); err == nil {
			t.Errorf("a tokens line with prefix %q was accepted", bad)
		}
	}
	plain, err := api.ParseTokens(strings.NewReader(tokenA + " acme\n"))
	if err != nil || plain.HasBodyRefs() {
		t.Errorf("a file without prefixes: %v, HasBodyRefs %t", err, plain.HasBodyRefs())
	}
	// The API refuses allow-lists it could not honour.
	st := setup(t, options{}).store
	if _, err := api.New(api.Config{Store: st, Tokens: tok}); err == nil {
		t.Error("New took bodyRef allow-lists without a blob store")
	}
	if _, err := api.New(api.Config{Store: st, Blobs: &disk.Store{}, Tokens: tok, AllowBodyRefs: []string{"s3://x-bucket/"}}); err == nil {
		t.Error("New took AllowBodyRefs with Tokens")
	}
	if _, err := api.New(api.Config{Store: st, Blobs: &disk.Store{}, AllowBodyRefs: []string{"s3://x-bucket/no-slash"}}); err == nil {
		t.Error("New took a prefix without its final slash")
	}
	if _, err := api.New(api.Config{Store: st, Blobs: &disk.Store{}, BlobThreshold: 2 << 20}); err == nil {
		t.Error("New took a threshold over MaxBodyBytes")
	}
}
