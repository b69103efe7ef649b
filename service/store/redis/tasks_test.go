package redis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/redis"
)

// A create cut short after reserving its idempotency key and ID (a crash
// between TaskCreate's two steps) leaves no task; repeating the request
// makes it, with the reserved ID, and a conflicting request still
// conflicts.
func TestCreateCutShort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := sharedURL(t)
	s := closeAtEnd(t, open(t, url, newPrefix(t, url)))
	in := &store.Task{ID: store.NewID(), Tenant: "acme", IdempotencyKey: "k1", RequestHash: "h1", PolicyID: "p",
		TargetURL: "http://127.0.0.1:9/", Method: "POST", CreatedAt: t0, NextAttemptAt: t0}
	if err := redis.CreateCutShort(ctx, s, in); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TaskGet(ctx, "acme", in.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TaskGet of the unfinished task = %v, want ErrNotFound", err)
	}
	if items, _, err := s.TaskList(ctx, store.TaskFilter{Tenant: "acme"}, store.Page{}); err != nil || len(items) != 0 {
		t.Errorf("TaskList = %d tasks, %v; want none", len(items), err)
	}
	other := *in
	other.ID, other.RequestHash = "", "h2"
	if _, _, err := s.TaskCreate(ctx, &other); !errors.Is(err, store.ErrConflict) {
		t.Errorf("TaskCreate(other request, same key) = %v, want ErrConflict", err)
	}

	repeat := *in
	repeat.ID = "" // the client never learnt the ID
	got, created, err := s.TaskCreate(ctx, &repeat)
	if err != nil || !created || got.ID != in.ID {
		t.Fatalf("repeated TaskCreate = %v created %v, %v; want task %s created", got, created, err, in.ID)
	}
	if _, err := s.TaskGet(ctx, "acme", in.ID); err != nil {
		t.Errorf("TaskGet after the repeat = %v", err)
	}
	if _, created, err := s.TaskCreate(ctx, &repeat); err != nil || created {
		t.Errorf("third TaskCreate = created %v, %v; want the task, not created", created, err)
	}
}

// The attempt log keeps the latest attempts, and its pages count from the
// task's first attempt.
func TestAttemptLogCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := sharedURL(t)
	s := closeAtEnd(t, open(t, url, newPrefix(t, url), redis.WithAttemptLogCap(3)))
	tk := createIn(t, s, "acme", "p", 1, 0)[0]
	at := t0
	for range 5 {
		finishAs(t, s, claimOne(t, s, tk.ID, at), store.Pending, at.Add(time.Second))
		at = at.Add(time.Second)
	}
	var pages [][]int
	token := ""
	for {
		items, next, err := s.AttemptList(ctx, "acme", tk.ID, store.Page{Token: token, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		var page []int
		for _, a := range items {
			page = append(page, a.AttemptNumber)
		}
		pages = append(pages, page)
		if next == "" {
			break
		}
		token = next
	}
	if got, want := fmt.Sprint(pages), "[[3 4] [5]]"; got != want {
		t.Errorf("pages = %s, want %s", got, want)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     string
		wantErr error // nil: any error
	}{
		{name: "not a URL", url: "redis://a b:c", wantErr: store.ErrInvalid},
		{name: "unknown scheme", url: "mysql://127.0.0.1/", wantErr: store.ErrInvalid},
		{name: "unknown option", url: "redis://127.0.0.1:6379/0?flavour=mint", wantErr: store.ErrInvalid},
		{name: "nobody listening", url: fmt.Sprintf("redis://127.0.0.1:%d/0", freePort(t))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := redis.Open(ctx, tt.url, redis.WithLogger(quiet))
			if err == nil {
				s.Close()
				t.Fatalf("Open(%s) = nil error", tt.url)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Open(%s) = %v, want %v", tt.url, err, tt.wantErr)
			}
		})
	}
}
