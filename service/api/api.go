// Package api is retryd's HTTP API: retry policies, retry tasks, their
// attempt logs and the dead-letter list, as DESIGN.md and openapi.yaml (in
// this folder) describe them. New returns an http.Handler over a
// store.Store; the daemon mounts it beside /metrics, /healthz and /readyz.
//
// Every handler returns an error and one type, *APIError, is rendered as
// {"error": {"code", "message", "field"}} with its status. Request bodies are
// strict: one JSON object, no unknown or repeated fields, no trailing data,
// at most Config.MaxBodyBytes (Config.MaxBatchBodyBytes for POST
// /retry-tasks/batch). Times are epoch milliseconds.
//
// A task that names no policy follows the policy "default": the tenant's
// own if it registered one, else the built-in (store.BuiltinPolicy: from
// 1 s doubling to 5 min, full jitter, 10 attempts within 24 h), which
// GET /retry-policies lists with "builtin": true. For an operator, tasks
// are listed by target host, idempotency key and cause (causeOf: why a
// dead letter failed, "HTTP 503", "timeout", …), GET /dead-letters/causes
// counts the dead letters by cause, POST /retry-tasks/redrive and
// /retry-tasks/cancel change the tasks a filter matches, a bounded number
// a call, and POST /retry-policies/preview samples the decision engine to
// show the delays a policy makes.
//
// With Config.Blobs, a task's body over Config.BlobThreshold is kept in the
// blob store, the task holding its reference (bodyRef) and size: POST
// /retry-tasks streams it there as it reads the request (taskstream.go), up
// to Config.MaxLargeBodyBytes, and a batch puts its tasks' large bodies
// there too. A task may also name a body its caller uploaded (bodyRef
// s3://bucket/key) within its tenant's allow-list (ParseTokens). What net/http answers
// before any handler of the API runs (a redirect of a path its ServeMux
// would clean, a 431 for headers over the server's limit) is made JSON by
// CanonicalPaths and Listener, for a server that mounts the handler.
package api

import (
	"cmp"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/retrykit/retry/service/blob"
	"github.com/retrykit/retry/service/destination"
	"github.com/retrykit/retry/service/destination/secrets"
	"github.com/retrykit/retry/service/store"
)

// DefaultMaxBodyBytes is the request body limit when Config.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 1 << 20

// DefaultBlobThreshold is Config.BlobThreshold when 0: an inline body over
// 64 KiB goes to the blob store.
const DefaultBlobThreshold = 64 << 10

// DefaultMaxLargeBodyBytes is Config.MaxLargeBodyBytes when 0: with a blob
// store, POST /retry-tasks takes up to 64 MiB.
const DefaultMaxLargeBodyBytes = 64 << 20

// DefaultMaxBatchBodyBytes is the body limit of POST /retry-tasks/batch when
// Config.MaxBatchBodyBytes is 0: 16 MiB, room for MaxBatchTasks tasks of
// some 16 KiB each. Each task in a batch is still held to MaxBodyBytes, so a
// batch is no way around the single create's limit.
const DefaultMaxBatchBodyBytes = 16 << 20

// MaxBatchTasks is the most tasks one POST /retry-tasks/batch may carry.
const MaxBatchTasks = 1000

// DefaultTenant owns everything when authentication is off (Config.Tokens nil).
const DefaultTenant = "default"

// Waker is told when a task becomes due at a new time: after it is created
// and after a redrive, once the store has it. The scheduler's Wake has this
// signature. Wake must not block for long; it is called on the request path.
type Waker interface {
	Wake(d store.Due)
}

// Config configures New. Store is required; the zero value of every other
// field is a working default.
type Config struct {
	Store store.Store
	// Waker, when set, hears of every task that becomes due at a new time.
	Waker Waker
	// Handoff, when set and Store is a store.CreateClaimer, takes the
	// tasks created due at once straight to its workers, created claimed;
	// the others go to Waker.
	Handoff Handoff
	// Tokens maps bearer tokens to tenants; nil turns authentication off and
	// every request acts for DefaultTenant.
	Tokens *Tokens
	// Logger logs server-side failures (5xx) at Error and every request at
	// Debug; nil discards.
	Logger *slog.Logger
	// MaxBodyBytes caps request bodies (413 past it), and each task of a
	// batch (a 400 for that item); 0 means DefaultMaxBodyBytes. With Blobs,
	// POST /retry-tasks is held to MaxLargeBodyBytes instead, and to this
	// for everything in it but its body.
	MaxBodyBytes int64
	// Blobs, when set, keeps the bodies too large for a task's row. A body
	// given inline (body or bodyBase64) of over BlobThreshold bytes is put
	// there, streamed as the request is read, and the task keeps only its
	// reference (bodyRef) and size (bodySize); and a task may name a body
	// its caller uploaded (bodyRef: s3://bucket/key, within the tenant's
	// allow-list), which the dispatcher reads from Blobs at each attempt.
	// nil keeps every body in its task's row and refuses bodyRef.
	Blobs blob.Store
	// BlobThreshold is the largest body kept in a task's row when Blobs is
	// set; 0 means DefaultBlobThreshold. At most MaxBodyBytes.
	BlobThreshold int64
	// MaxLargeBodyBytes caps the body of POST /retry-tasks when Blobs is
	// set (413 past it); 0 means DefaultMaxLargeBodyBytes. The task's body
	// goes to Blobs as it is read, so this is no measure of memory.
	MaxLargeBodyBytes int64
	// AllowBodyRefs lists, when authentication is off (Tokens nil), the
	// prefixes s3://bucket/[prefix/] under which DefaultTenant's bodyRefs
	// may lie; none by default. With Tokens each tenant's list is in the
	// tokens file (see ParseTokens), and AllowBodyRefs must be empty.
	AllowBodyRefs []string
	// MaxBatchBodyBytes caps the body of POST /retry-tasks/batch (413 past
	// it); 0 means DefaultMaxBatchBodyBytes. The whole body is held in
	// memory while it is checked, so it bounds what one request costs.
	MaxBatchBodyBytes int64
	// PolicyCacheSize bounds how many (tenant, policyId) pairs are
	// remembered as registered, so that creating a task does not read its
	// policy from the store each time; 0 means DefaultPolicyCacheSize, and a
	// negative value turns the cache off.
	PolicyCacheSize int
	// History, when set, gives GET /overview the last hour's attempts and
	// dispatch lag; nil leaves its series empty.
	History History
	// Now reads the clock; nil means time.Now.
	Now func() time.Time

	// Keys seals secrets at rest: destinations' credentials and signing
	// secrets, and the task headers that carry credentials (Authorization,
	// Proxy-Authorization, Cookie and SecretHeaders), whose values answers
	// then show as secrets.Mask. nil keeps task headers as given and
	// answers 503 to the destination routes.
	Keys *secrets.Keyring
	// SecretHeaders names more task headers to seal, beside
	// Authorization, Proxy-Authorization and Cookie.
	SecretHeaders []string
	// DestinationBounds are the operator's limits on destinations.
	DestinationBounds destination.Bounds
	// DestinationChanged, when set, is told of each destination the API
	// changed, so that this process's scheduler reads it again at once.
	DestinationChanged func(tenant, id string)
}

// Route is one method and path pattern the handler serves, as written in
// net/http.ServeMux patterns and in openapi.yaml ({name} for a path value).
type Route struct {
	Method string
	Path   string
}

// handlerFunc handles one request for one authenticated tenant. It writes
// the response on success and returns an error (an *APIError, or anything,
// which becomes a 500) otherwise, leaving the response unwritten.
type handlerFunc func(w http.ResponseWriter, r *http.Request, tenant string) error

type route struct {
	Route
	handle handlerFunc
}

// routeTable is the one list of routes: New serves it and Routes reports it.
// s may be nil when only the Route halves are wanted.
func (s *server) routeTable() []route {
	return []route{
		{Route{http.MethodPost, "/retry-policies"}, s.policyPut},
		{Route{http.MethodGet, "/retry-policies"}, s.policyList},
		{Route{http.MethodGet, "/retry-policies/{policyId}"}, s.policyGet},
		{Route{http.MethodPost, "/retry-policies/preview"}, s.policyPreview},
		{Route{http.MethodPost, "/retry-tasks"}, s.taskCreate},
		{Route{http.MethodPost, "/retry-tasks/batch"}, s.taskCreateBatch},
		{Route{http.MethodPost, "/retry-tasks/redrive"}, s.taskRedriveBulk},
		{Route{http.MethodPost, "/retry-tasks/cancel"}, s.taskCancelBulk},
		{Route{http.MethodGet, "/retry-tasks"}, s.taskList},
		{Route{http.MethodGet, "/retry-tasks/{taskId}"}, s.taskGet},
		{Route{http.MethodDelete, "/retry-tasks/{taskId}"}, s.taskCancel},
		{Route{http.MethodGet, "/retry-tasks/{taskId}/attempts"}, s.attemptList},
		{Route{http.MethodPost, "/retry-tasks/{taskId}/redrive"}, s.taskRedrive},
		{Route{http.MethodGet, "/dead-letters"}, s.deadLetterList},
		{Route{http.MethodGet, "/dead-letters/causes"}, s.deadLetterCauses},
		{Route{http.MethodGet, "/overview"}, s.overview},
		{Route{http.MethodPost, "/destinations"}, s.destinationCreate},
		{Route{http.MethodGet, "/destinations"}, s.destinationList},
		{Route{http.MethodGet, "/destinations/{destinationId}"}, s.destinationGet},
		{Route{http.MethodPatch, "/destinations/{destinationId}"}, s.destinationPatch},
		{Route{http.MethodDelete, "/destinations/{destinationId}"}, s.destinationDelete},
		{Route{http.MethodPost, "/destinations/{destinationId}/pause"}, s.destinationStatus(destination.Paused)},
		{Route{http.MethodPost, "/destinations/{destinationId}/resume"}, s.destinationStatus(destination.Active)},
		{Route{http.MethodPost, "/destinations/{destinationId}/signing-secret/rotate"}, s.destinationRotate},
	}
}

// Routes returns the routes New's handler serves, in a new slice. (GET
// routes also answer HEAD, as net/http.ServeMux does.)
func Routes() []Route {
	var s *server
	table := s.routeTable()
	out := make([]Route, len(table))
	for i, r := range table {
		out[i] = r.Route
	}
	return out
}

type server struct {
	store        store.Store
	waker        Waker
	handoff      Handoff
	tokens       *Tokens
	log          *slog.Logger
	maxBody      int64
	maxBatchBody int64
	blobs        blob.Store   // nil: bodies stay in rows, no bodyRef
	threshold    int64        // bodies over it go to blobs
	maxLarge     int64        // the limit of POST /retry-tasks with blobs
	defaultRefs  []string     // AllowBodyRefs, checked
	ownRefs      string       // the prefix of blobs' own s3:// references, "" when unknown
	policies     *policyCache // nil when off
	history      History      // nil: GET /overview has no series
	now          func() time.Time
	mux          *http.ServeMux
	keys         *secrets.Keyring   // nil: no sealing, no destinations
	sealed       map[string]bool    // canonical names of the task headers sealed
	dests        store.Destinations // nil: the store keeps none
	destBounds   destination.Bounds
	destChanged  func(tenant, id string)
}

// New returns the API's handler. It is safe for concurrent use. Its only
// state beyond cfg is a cache of which policies exist, which stays true
// whoever else writes to the Store (policies are immutable), so several
// handlers, in one process or several, may share one Store.
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("api: Config.Store is required")
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxBatchBodyBytes < 0 || cfg.BlobThreshold < 0 || cfg.MaxLargeBodyBytes < 0 {
		return nil, errors.New("api: Config.MaxBodyBytes, MaxBatchBodyBytes, BlobThreshold and MaxLargeBodyBytes must not be negative")
	}
	s := &server{
		store: cfg.Store, waker: cfg.Waker, handoff: cfg.Handoff, tokens: cfg.Tokens, log: cfg.Logger,
		maxBody: cfg.MaxBodyBytes, maxBatchBody: cfg.MaxBatchBodyBytes,
		blobs: cfg.Blobs, threshold: cmp.Or(cfg.BlobThreshold, DefaultBlobThreshold),
		maxLarge: cmp.Or(cfg.MaxLargeBodyBytes, DefaultMaxLargeBodyBytes),
		policies: newPolicyCache(cfg.PolicyCacheSize), history: cfg.History, now: cfg.Now, mux: http.NewServeMux(),
	}
	s.keys, s.destBounds, s.destChanged = cfg.Keys, cfg.DestinationBounds, cfg.DestinationChanged
	s.dests, _ = cfg.Store.(store.Destinations)
	s.sealed = destination.SecretHeaderNames(cfg.SecretHeaders)
	if _, ok := cfg.Store.(store.CreateClaimer); !ok {
		s.handoff = nil
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody == 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.maxBatchBody == 0 {
		s.maxBatchBody = DefaultMaxBatchBodyBytes
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.blobConfig(cfg); err != nil {
		return nil, err
	}
	for _, rt := range s.routeTable() {
		s.mux.Handle(rt.Method+" "+rt.Path, s.endpoint(rt.handle))
	}
	return s, nil
}

func (s *server) wake(t *store.Task) {
	if s.waker != nil {
		s.waker.Wake(t.Due())
	}
}
