// Package console is retryd's web console: the pages at /ui, embedded in
// the binary, and the session they sign in with. The pages are static
// files that read and change everything through retryd's own HTTP API,
// so the console can do nothing the API would not let the same tenant do.
//
// Security, because everything a page shows (URLs, headers, bodies,
// errors, policy IDs) comes from callers and targets: the scripts build
// the page with DOM text nodes only (no HTML is ever parsed from data), and
// every answer carries a Content-Security-Policy that runs only the
// console's own script files, so even a slip in them could not run a
// script that came with data. With authentication on, a bearer token is
// exchanged at POST /ui/session for a cookie that is HttpOnly (no script
// can read it), SameSite=Strict, and Secure when the request came over TLS;
// requests that change state are guarded against other origins by the
// server's cross-origin protection (see Protect).
package console

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"

	"github.com/retrykit/retry/service/api"
)

//go:embed static
var static embed.FS

// csp lets a page load its script, style and data only from retryd itself,
// and never be framed (clickjacking a Redrive button).
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// maxLoginBytes bounds the body of POST /ui/session: a token, in JSON.
const maxLoginBytes = 4 << 10

// Handler returns the console's handler for the paths under /ui/. tokens is
// the API's (nil when authentication is off).
func Handler(tokens *api.Tokens) http.Handler {
	files, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	mux := http.NewServeMux()
	assets := http.StripPrefix("/ui/", http.FileServerFS(files))
	mux.Handle("GET /ui/", assets)
	mux.HandleFunc("GET /ui/session", func(w http.ResponseWriter, r *http.Request) { session(w, r, tokens) })
	mux.HandleFunc("POST /ui/session", func(w http.ResponseWriter, r *http.Request) { login(w, r, tokens) })
	mux.HandleFunc("DELETE /ui/session", logout)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
}

// Protect wraps the handler of the whole server (API and console) in
// net/http's cross-origin protection: a request that changes state (any
// method but GET, HEAD and OPTIONS) from a browser page of another origin
// is refused, whatever cookie it carries. SameSite=Strict alone would not
// do, as another port of the same host is the same site. Clients that are
// not browsers (curl, retryctl, the Go client) send no Sec-Fetch-Site or
// Origin header and pass.
func Protect(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, api.CodeForbidden, "cross-origin request refused")
	}))
	return cop.Handler(h)
}

type sessionJSON struct {
	Tenant string `json:"tenant"`
	Auth   bool   `json:"auth"` // whether retryd asks for a token
}

// session says whom the browser's cookie signs in as, or 401 when a token
// is needed and the cookie has none that is known.
func session(w http.ResponseWriter, r *http.Request, tokens *api.Tokens) {
	if tokens == nil {
		writeJSON(w, http.StatusOK, sessionJSON{Tenant: api.DefaultTenant})
		return
	}
	c, err := r.Cookie(api.SessionCookie)
	if err == nil {
		if tenant, ok := tokens.Tenant(c.Value); ok {
			writeJSON(w, http.StatusOK, sessionJSON{Tenant: tenant, Auth: true})
			return
		}
	}
	writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "sign in with a token")
}

// login checks a token and, when it is known, keeps it in the session
// cookie, where the API's authentication finds it.
func login(w http.ResponseWriter, r *http.Request, tokens *api.Tokens) {
	if tokens == nil {
		writeJSON(w, http.StatusOK, sessionJSON{Tenant: api.DefaultTenant})
		return
	}
	var in struct {
		Token string `json:"token"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxLoginBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeInvalidRequest, `want {"token": "…"}`)
		return
	}
	token := strings.TrimSpace(in.Token)
	tenant, ok := tokens.Tenant(token)
	if !ok {
		writeError(w, http.StatusUnauthorized, api.CodeUnauthorized, "unknown token")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: api.SessionCookie, Value: token, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	writeJSON(w, http.StatusOK, sessionJSON{Tenant: tenant, Auth: true})
}

func logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: api.SessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in the API's error shape, so the pages read one.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	api.WriteError(w, &api.APIError{Status: status, Code: code, Message: msg})
}
