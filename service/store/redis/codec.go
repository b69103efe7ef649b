package redis

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrykit/retry/service/store"
	"github.com/retrykit/retry/service/store/internal/epochms"
)

// Times are stored as epoch milliseconds (package epochms).

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// pack joins fields as "len:field…", so that any bytes survive; the Lua
// scripts write attempt entries the same way.
func pack(fields ...string) string {
	var b strings.Builder
	for _, f := range fields {
		b.WriteString(strconv.Itoa(len(f)))
		b.WriteByte(':')
		b.WriteString(f)
	}
	return b.String()
}

var errCorrupt = errors.New("corrupt record")

// unpack splits what pack joined.
func unpack(s string) ([]string, error) {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, ':')
		if i <= 0 {
			return nil, errCorrupt
		}
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 || n > len(s)-i-1 {
			return nil, errCorrupt
		}
		out = append(out, s[i+1:i+1+n])
		s = s[i+1+n:]
	}
	return out, nil
}

// loc is where a task lives: its partition, and the tenant and policy its
// list index keys name. It never changes once the task's ID is reserved.
type loc struct {
	part   int
	tenant string
	policy string
}

func (l loc) encode() string { return pack(strconv.Itoa(l.part), l.tenant, l.policy) }

func decodeLoc(s string) (loc, error) {
	f, err := unpack(s)
	if err != nil || len(f) != 3 {
		return loc{}, errCorrupt
	}
	p, err := strconv.Atoi(f[0])
	if err != nil || p < 0 {
		return loc{}, errCorrupt
	}
	return loc{part: p, tenant: f[1], policy: f[2]}, nil
}

// taskFieldCount is how many fields taskFields appends.
const taskFieldCount = 28

// taskFields appends the hash fields and values of new task t to args,
// id, tn, ik, next, seq and br first: the create script finds them there.
// A task to be created claimed (store.Task.ClaimAtCreate) has the fields
// claim.lua would have given it at its creation, held by holder.
func taskFields(args []any, t *store.Task, seq int64, holder string) []any {
	bin := "0"
	if t.BodyBinary {
		bin = "1"
	}
	body := t.Body
	if body == nil {
		body = []byte{}
	}
	created := itoa(epochms.Of(t.CreatedAt))
	status, attempt, version, lease, claimed := string(store.Pending), "0", "1", "0", "0"
	if t.ClaimAtCreate() {
		status, attempt, version, lease, claimed = string(store.InFlight), "1", "2", itoa(epochms.Of(t.LeaseUntil)), created
	} else {
		holder = ""
	}
	return append(args, "id", t.ID, "tn", t.Tenant, "ik", t.IdempotencyKey, "next", itoa(epochms.Of(t.NextAttemptAt)),
		"seq", itoa(seq), "br", t.BodyRef, "rh", t.RequestHash, "url", t.TargetURL, "m", t.Method, "h", encodeHeaders(t.Headers),
		"b", body, "bb", bin, "pol", t.PolicyID, "st", status, "an", attempt, "prev", "0",
		"bs", itoa(epochms.Of(t.BudgetStart)), "le", "", "ls", "0", "lu", lease, "v", version, "c", created, "u", created,
		"f", "0", "ca", claimed, "ln", "0", "bz", itoa(t.BodySize), "ho", holder)
}

func encodeHeaders(h map[string]string) string {
	fields := make([]string, 0, 2*len(h))
	for _, k := range slices.Sorted(maps.Keys(h)) {
		fields = append(fields, k, h[k])
	}
	return pack(fields...)
}

// decodeTask reads a task hash, as HGETALL returns it: field, value, ….
func decodeTask(pairs []any) (*store.Task, error) {
	if len(pairs) == 0 || len(pairs)%2 != 0 {
		return nil, errCorrupt
	}
	t := &store.Task{}
	var err error
	num := func(s string) int64 {
		v, e := strconv.ParseInt(s, 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("%w: number %q", errCorrupt, s)
		}
		return v
	}
	for i := 0; i < len(pairs); i += 2 {
		k, _ := pairs[i].(string)
		v, _ := pairs[i+1].(string)
		switch k {
		case "id":
			t.ID = v
		case "tn":
			t.Tenant = v
		case "ik":
			t.IdempotencyKey = v
		case "rh":
			t.RequestHash = v
		case "url":
			t.TargetURL = v
		case "m":
			t.Method = v
		case "h":
			t.Headers, err = decodeHeaders(v)
		case "b":
			t.Body = []byte(v)
		case "bb":
			t.BodyBinary = v == "1"
		case "br":
			t.BodyRef = v
		case "bz":
			t.BodySize = num(v)
		case "pol":
			t.PolicyID = v
		case "st":
			t.Status = store.Status(v)
		case "an":
			t.AttemptNumber = int(num(v))
		case "next":
			t.NextAttemptAt = epochms.Time(num(v))
		case "prev":
			t.PrevDelay = time.Duration(num(v))
		case "bs":
			t.BudgetStart = epochms.Time(num(v))
		case "le":
			t.LastError = v
		case "ls":
			t.LastStatus = int(num(v))
		case "lu":
			t.LeaseUntil = epochms.Time(num(v))
		case "v":
			t.Version = num(v)
		case "c":
			t.CreatedAt = epochms.Time(num(v))
		case "u":
			t.UpdatedAt = epochms.Time(num(v))
		case "f":
			t.FinishedAt = epochms.Time(num(v))
		}
		if err != nil {
			return nil, err
		}
	}
	if t.ID == "" {
		return nil, errCorrupt
	}
	if t.BodyRef == "" {
		t.BodySize = int64(len(t.Body)) // tasks older than bz have none
	}
	return t, nil
}

func decodeHeaders(s string) (map[string]string, error) {
	f, err := unpack(s)
	if err != nil || len(f)%2 != 0 {
		return nil, errCorrupt
	}
	if len(f) == 0 {
		return nil, nil
	}
	h := make(map[string]string, len(f)/2)
	for i := 0; i < len(f); i += 2 {
		h[f[i]] = f[i+1]
	}
	return h, nil
}

// encodeAttempt is an attempt log entry: number, start (ms), duration (ns),
// response status, error message and response body. The claim script
// writes the entries of lost attempts in the same form.
func encodeAttempt(a *store.Attempt) string {
	return pack(strconv.Itoa(a.AttemptNumber), itoa(epochms.Of(a.StartedAt)), itoa(int64(a.Duration)),
		strconv.Itoa(a.ResponseStatus), a.ErrorMessage, a.ResponseBody)
}

func decodeAttempt(taskID, s string) (*store.Attempt, error) {
	f, err := unpack(s)
	if err != nil || len(f) != 6 {
		return nil, errCorrupt
	}
	var n [4]int64
	for i := range n {
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return nil, errCorrupt
		}
	}
	return &store.Attempt{TaskID: taskID, AttemptNumber: int(n[0]), StartedAt: epochms.Time(n[1]),
		Duration: time.Duration(n[2]), ResponseStatus: int(n[3]), ErrorMessage: f[4], ResponseBody: f[5]}, nil
}

// flatten turns HGETALL's map (as a RESP3 client gets it) into the
// field, value list scripts return.
func flatten(m map[string]string) []any {
	out := make([]any, 0, 2*len(m))
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}
