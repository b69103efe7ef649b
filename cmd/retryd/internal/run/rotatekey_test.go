package run_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retryd/internal/run"
	"github.com/retrykit/retry/service/api"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
	"github.com/retrykit/retry/service/store/redis"
	"github.com/retrykit/retry/service/store/redis/redistest"
	"github.com/retrykit/retry/service/store/sqlite"
)

// Bearer tokens of the two tenants the rotation tests seed through the
// API.
var rotateTokens = map[string]string{
	"tenant-a": "token-of-rotate-tenant-a-0123456789",
	"tenant-b": "token-of-rotate-tenant-b-0123456789",
}

// rotateStore is a store the rotation test runs on: its retryd flags, and
// how the test opens it to seed and check it.
type rotateStore struct {
	args []string
	open func(t *testing.T) store.Store
}

func sqliteRotateStore(t *testing.T) rotateStore {
	path := filepath.Join(t.TempDir(), "retryd.db")
	return rotateStore{args: []string{"--store", path}, open: func(t *testing.T) store.Store {
		// Not Exclusive: the test's store stands for no retryd.
		st, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatalf("sqlite.Open: %v", err)
		}
		return st
	}}
}

func postgresRotateStore(t *testing.T) rotateStore {
	schema := pgtest.Schema(t, "retryd_rotate_")
	return rotateStore{args: []string{"--store", pgtest.URL(), "--schema", schema}, open: func(t *testing.T) store.Store {
		st, err := postgres.Open(context.Background(), pgtest.URL(), postgres.WithSchema(schema))
		if err != nil {
			t.Fatalf("postgres.Open: %v", err)
		}
		return st
	}}
}

func redisRotateStore(t *testing.T) rotateStore {
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	return rotateStore{args: []string{"--store", url, "--prefix", prefix}, open: func(t *testing.T) store.Store {
		st, err := redis.Open(context.Background(), url, redis.WithPrefix(prefix), redis.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatalf("redis.Open: %v", err)
		}
		return st
	}}
}

// keyFile writes a new random key to a file of dir (mode 0600) and
// returns its path.
func keyFile(t *testing.T, dir, name string) string {
	t.Helper()
	k := make([]byte, secrets.KeySize)
	rand.Read(k)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadKeyring(t *testing.T, path string, old ...string) *secrets.Keyring {
	t.Helper()
	kr, err := secrets.LoadKeyFile(path, old...)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// seeded is what seed made: the secrets in the clear that the store must
// still give back, and how many tasks were sealed with each key.
type seeded struct {
	dests             map[[2]string]string // tenant, ID → auth token
	tasks             map[string]string    // task ID → Authorization
	oldTasks, curTask int
}

// apiCall sends a request to the API at srv for tenant and decodes its
// answer into out, failing t unless its status is want.
func apiCall(t *testing.T, srv *httptest.Server, tenant, method, path, body string, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+rotateTokens[tenant])
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// apiServer serves the real API over st with keys, for both tenants.
func apiServer(t *testing.T, st store.Store, keys *secrets.Keyring) *httptest.Server {
	t.Helper()
	var lines strings.Builder
	for tenant, token := range rotateTokens {
		fmt.Fprintf(&lines, "%s %s\n", token, tenant)
	}
	tokens, err := api.ParseTokens(strings.NewReader(lines.String()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{Store: st, Keys: keys, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// seed makes, through the API, destinations with secrets and tasks with a
// sealed Authorization header, sealed with old; then, as an instance
// restarted with the new key would, one more task sealed with cur.
func seed(t *testing.T, st store.Store, old, cur *secrets.Keyring) seeded {
	t.Helper()
	s := seeded{dests: map[[2]string]string{}, tasks: map[string]string{}}
	before := apiServer(t, st, old)
	for tenant := range rotateTokens {
		apiCall(t, before, tenant, "POST", "/retry-policies", `{"policyId":"p","maxAttempts":3}`, http.StatusCreated, nil)
		for i := range 2 {
			id, token := fmt.Sprintf("dest-%d", i), fmt.Sprintf("tok-%s-%d", tenant, i)
			body := fmt.Sprintf(`{"destinationId":%q,"url":"https://hooks.example.com/%d",
				"auth":{"type":"bearer","token":%q},"headers":{"X-Api-Key":"key-%s"},
				"signing":{"scheme":"standard-webhooks"}}`, id, i, token, token)
			apiCall(t, before, tenant, "POST", "/destinations", body, http.StatusCreated, nil)
			s.dests[[2]string{tenant, id}] = token
		}
		for i := range 3 {
			auth := fmt.Sprintf("Bearer task-%s-%d", tenant, i)
			body := fmt.Sprintf(`{"targetUrl":"http://127.0.0.1:9/t","policyId":"p","idempotencyKey":"k%d",
				"headers":{"Authorization":%q,"X-Trace":"plain"}}`, i, auth)
			var got struct{ TaskID string }
			apiCall(t, before, tenant, "POST", "/retry-tasks", body, http.StatusCreated, &got)
			s.tasks[got.TaskID] = auth
			s.oldTasks++
			if i == 2 { // a task that will not run again holds its secret too
				apiCall(t, before, tenant, "DELETE", "/retry-tasks/"+got.TaskID, "", http.StatusOK, nil)
			}
		}
	}
	after := apiServer(t, st, cur)
	var got struct{ TaskID string }
	apiCall(t, after, "tenant-a", "POST", "/retry-tasks", `{"targetUrl":"http://127.0.0.1:9/t","policyId":"p",
		"idempotencyKey":"new","headers":{"Cookie":"session=new"}}`, http.StatusCreated, &got)
	s.tasks[got.TaskID] = "session=new"
	s.curTask++
	return s
}

// checkOpens fails t unless every secret of st opens with only (a
// keyring of the new key alone) and is what seed put there.
func checkOpens(t *testing.T, st store.Store, only *secrets.Keyring, s seeded) {
	t.Helper()
	ctx := context.Background()
	ds := st.(store.Destinations)
	for key, token := range s.dests {
		sd, err := ds.DestinationGet(ctx, key[0], key[1])
		if err != nil {
			t.Fatal(err)
		}
		d, err := destination.Decode(sd.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Open(only, key[0]); err != nil {
			t.Errorf("destination %s/%s does not open with the new key alone: %v", key[0], key[1], err)
			continue
		}
		if d.Auth.Token.Plain() != token || d.Headers["X-Api-Key"].Plain() != "key-"+token ||
			!strings.HasPrefix(d.Signing.Secret.Plain(), "whsec_") {
			t.Errorf("destination %s/%s opens to token %q, header %q, signing %q", key[0], key[1],
				d.Auth.Token.Plain(), d.Headers["X-Api-Key"].Plain(), d.Signing.Secret.Plain())
		}
	}
	for id, want := range s.tasks {
		var tk *store.Task
		for tenant := range rotateTokens {
			if got, err := st.TaskGet(ctx, tenant, id); err == nil {
				tk = got
			}
		}
		if tk == nil {
			t.Fatalf("task %s is gone", id)
		}
		for name, v := range tk.Headers {
			if strings.HasPrefix(v, store.SealedPrefix) && !strings.HasPrefix(v, store.SealedPrefix+only.KeyID()+":") {
				t.Errorf("task %s header %s is sealed with another key than %s: %.20s…", id, name, only.KeyID(), v)
			}
		}
		h, err := destination.OpenHeaders(only, tk.Tenant, tk.ID, tk.Headers)
		if err != nil {
			t.Errorf("task %s does not open with the new key alone: %v", id, err)
			continue
		}
		if h["Authorization"] != want && h["Cookie"] != want {
			t.Errorf("task %s opens to %v, want a credential %q", id, h, want)
		}
	}
}

// resealedCounts reads rotate-key's report.
var resealedCounts = regexp.MustCompile(`resealed (\d+) of (\d+) destinations and (\d+) of (\d+) tasks with sealed headers under key ([0-9a-f]{8})`)

// checkReport fails t unless out reports want (resealed and seen
// destinations, resealed and seen tasks) and key.
func checkReport(t *testing.T, out string, key string, want [4]int) {
	t.Helper()
	m := resealedCounts.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("rotate-key said %q, want its counts", out)
	}
	var got [4]int
	for i := range got {
		got[i], _ = strconv.Atoi(m[i+1])
	}
	if got != want || m[5] != key {
		t.Errorf("rotate-key resealed %v under key %s, want %v under %s (%q)", got, m[5], want, key, out)
	}
}

// The rotation on each store: seeded through the API with the old key,
// and with the new one as a restarted instance would, every secret opens
// with the new key alone once rotate-key has run, and a second run
// reseals nothing.
func TestRotateKey(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		make func(t *testing.T) rotateStore
	}{
		{"sqlite", sqliteRotateStore},
		{"postgres", postgresRotateStore},
		{"redis", redisRotateStore},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rs := tt.make(t)
			dir := t.TempDir()
			oldKey, newKey := keyFile(t, dir, "old.key"), keyFile(t, dir, "new.key")
			cur := loadKeyring(t, newKey, oldKey)
			st := rs.open(t)
			s := seed(t, st, loadKeyring(t, oldKey), cur)
			st.Close()

			args := append([]string{"secrets", "rotate-key"}, rs.args...)
			args = append(args, "--secrets-key-file", newKey, "--secrets-old-key-files", oldKey)
			code, out, errOut := runMain(args...)
			if code != 0 {
				t.Fatalf("retryd secrets rotate-key = %d: %s%s", code, out, errOut)
			}
			only := loadKeyring(t, newKey)
			checkReport(t, out, only.KeyID(), [4]int{len(s.dests), len(s.dests), s.oldTasks, s.oldTasks + s.curTask})

			st = rs.open(t)
			checkOpens(t, st, only, s)
			st.Close()

			code, out, errOut = runMain(args...)
			if code != 0 {
				t.Fatalf("second retryd secrets rotate-key = %d: %s%s", code, out, errOut)
			}
			checkReport(t, out, only.KeyID(), [4]int{0, len(s.dests), 0, s.oldTasks + s.curTask})
		})
	}
}

// Without the old key, the old key's values do not open: rotate-key lists
// them, leaves them as they were and fails; given the old key, it
// reseals them.
func TestRotateKeyWithoutTheOldKey(t *testing.T) {
	t.Parallel()
	rs := sqliteRotateStore(t)
	dir := t.TempDir()
	oldKey, newKey := keyFile(t, dir, "old.key"), keyFile(t, dir, "new.key")
	st := rs.open(t)
	s := seed(t, st, loadKeyring(t, oldKey), loadKeyring(t, newKey, oldKey))
	st.Close()

	args := append(append([]string{"secrets", "rotate-key"}, rs.args...), "--secrets-key-file", newKey)
	code, out, errOut := runMain(args...)
	if code != 1 {
		t.Fatalf("rotate-key without the old key = %d, want 1: %s%s", code, out, errOut)
	}
	only := loadKeyring(t, newKey)
	checkReport(t, out, only.KeyID(), [4]int{0, len(s.dests), 0, s.oldTasks + s.curTask})
	for _, want := range []string{"tenant tenant-a: destination dest-0: reseal auth.token", "header Authorization", "not in the keyring",
		fmt.Sprintf("%d destinations and %d tasks were left as they were", len(s.dests), s.oldTasks)} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q, want it to say %q", errOut, want)
		}
	}
	for _, secret := range []string{"tok-tenant-a-0", "Bearer task-"} {
		if strings.Contains(out+errOut, secret) {
			t.Errorf("rotate-key showed a secret (%q): %s%s", secret, out, errOut)
		}
	}

	code, out, errOut = runMain(append(args, "--secrets-old-key-files", oldKey)...)
	if code != 0 {
		t.Fatalf("rotate-key with the old key = %d: %s%s", code, out, errOut)
	}
	checkReport(t, out, only.KeyID(), [4]int{len(s.dests), len(s.dests), s.oldTasks, s.oldTasks + s.curTask})
	st = rs.open(t)
	defer st.Close()
	checkOpens(t, st, only, s)
}

// A running retryd holds the embedded store: rotate-key says to stop it,
// and changes nothing.
func TestRotateKeySQLiteInUse(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "retryd.db")
	held, err := sqlite.Open(context.Background(), path, sqlite.Exclusive())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	key := keyFile(t, t.TempDir(), "new.key")
	code, out, errOut := runMain("secrets", "rotate-key", "--store", path, "--secrets-key-file", key)
	if code != 1 || !strings.Contains(errOut, "stop it, run rotate-key") {
		t.Errorf("rotate-key on a store in use = %d, want 1 and to say to stop retryd: %s%s", code, out, errOut)
	}
}

// On the embedded store the key file defaults to the one retryd made
// beside it, which rotate-key never makes.
func TestRotateKeySQLiteDefaultKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "retryd.db")
	code, out, errOut := runMain("secrets", "rotate-key", "--store", path)
	if code != 2 || !strings.Contains(errOut, path+".key") {
		t.Fatalf("rotate-key without a key file = %d, want 2 naming %s.key: %s%s", code, path, out, errOut)
	}
	if _, err := os.Stat(path + ".key"); err == nil {
		t.Errorf("rotate-key made a key file")
	}
	keyFile(t, dir, "retryd.db.key")
	code, out, errOut = runMain("secrets", "rotate-key", "--store", "sqlite://"+path)
	if code != 0 || !strings.Contains(out, "resealed 0 of 0 destinations and 0 of 0 tasks") {
		t.Errorf("rotate-key of an empty store with its default key = %d: %s%s", code, out, errOut)
	}
}

func TestRotateKeyUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"secrets"}, 2, "name a command"},
		{[]string{"secrets", "rotate"}, 2, `unknown command "rotate"`},
		{[]string{"secrets", "rotate-key", "-h"}, 0, "openssl rand -base64 32"},
		{[]string{"secrets", "rotate-key", "--store", "postgres://u:hunter2@db/x"}, 2, "--secrets-key-file is required"},
		{[]string{"secrets", "rotate-key", "--store", "redis://h:1/0", "--schema", "s"}, 2, "--schema: not used by a redis store"},
	} {
		code, out, errOut := runMain(tt.args...)
		if code != tt.code || !strings.Contains(out+errOut, tt.want) {
			t.Errorf("retryd %q = %d, want %d saying %q: %s%s", tt.args, code, tt.code, tt.want, out, errOut)
		}
		if strings.Contains(out+errOut, "hunter2") {
			t.Errorf("retryd %q shows the password", tt.args)
		}
	}
	if got := run.Command([]string{"secrets", "rotate-key"}); got != "secrets" {
		t.Errorf("Command(secrets rotate-key) = %q", got)
	}
}

// The store finds sealed values by the prefix of package secrets' tokens.
func TestSealedPrefix(t *testing.T) {
	t.Parallel()
	kr := loadKeyring(t, keyFile(t, t.TempDir(), "k"))
	if tok := kr.Seal([]byte("x"), nil); !strings.HasPrefix(tok, store.SealedPrefix) || !secrets.IsSealed(tok) {
		t.Errorf("a token %q does not begin with store.SealedPrefix %q", tok, store.SealedPrefix)
	}
}
