package postgres_test

import (
	"context"
	"maps"
	"testing"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/postgres/pgtest"
)

// The stored format does not change under the store: headers are a JSON
// object ("{}" for none) and the state column is LIVE or the terminal
// status, as an earlier retryd wrote them.
func TestStoredFormat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	s := open(t, schema)
	tk := mustCreate(t, s, &store.Task{Tenant: "acme", IdempotencyKey: "k", TargetURL: "http://127.0.0.1:9/",
		Method: "POST", Headers: map[string]string{"X-B": "c", "Content-Type": "application/json"}})
	conn := pgtest.Admin(t)
	defer conn.Close(ctx)
	var headers, state string
	if err := conn.QueryRow(ctx, `SELECT headers::text, state FROM `+schema+`.retry_tasks WHERE id = $1`,
		tk.ID).Scan(&headers, &state); err != nil {
		t.Fatal(err)
	}
	if want := `{"Content-Type":"application/json","X-B":"c"}`; headers != want || state != "LIVE" {
		t.Errorf("stored headers %s, state %s; want %s, LIVE", headers, state, want)
	}
	// As an earlier retryd wrote a task without headers.
	if _, err := conn.Exec(ctx, `UPDATE `+schema+`.retry_tasks SET headers = '{}' WHERE id = $1`, tk.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TaskGet(ctx, "acme", tk.ID); err != nil || got.Headers != nil {
		t.Errorf("TaskGet of headers {} = %v, %v; want none", got.Headers, err)
	}
	if _, err := conn.Exec(ctx, `UPDATE `+schema+`.retry_tasks SET headers = '{"A": "b"}' WHERE id = $1`, tk.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TaskGet(ctx, "acme", tk.ID); err != nil || !maps.Equal(got.Headers, map[string]string{"A": "b"}) {
		t.Errorf("TaskGet of headers {\"A\": \"b\"} = %v, %v", got.Headers, err)
	}
}
