package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// checkContentType refuses a Content-Type, when one is sent, that is not
// application/json.
func checkContentType(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "", "want Content-Type application/json, got %q", ct)
		}
	}
	return nil
}

// readBody reads a request body of at most limit bytes into memory (a
// policy, a batch; a single task is streamed by decodeTask).
func (s *server) readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if err := checkContentType(r); err != nil {
		return nil, err
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, tooLarge(limit)
		}
		return nil, invalid("", "reading the request body: %v", err)
	}
	return data, nil
}

// parseObject parses data as exactly one JSON object and returns its
// members. Beyond what encoding/json checks, it refuses invalid UTF-8 and
// \u escapes of lone UTF-16 surrogates (which encoding/json would silently
// replace by U+FFFD), a repeated key in any object (which it would silently
// resolve to the last) and anything after the object. Every request body
// comes through here: a task, each task of a batch (whose envelope takes
// only the member "tasks"), a policy.
func parseObject(data []byte) (map[string]json.RawMessage, error) {
	if m, ok := quickObject(data); ok {
		return m, nil
	}
	return strictObject(data)
}

// strictObject is parseObject for any input: it names what is wrong.
func strictObject(data []byte) (map[string]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, invalid("", "request body is not valid UTF-8")
	}
	if err := checkStrict(data); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, invalid("", "malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return m, nil
}

// checkStrict walks data's tokens: one object, no repeated keys, no lone
// surrogate escape in a string, nothing after.
func checkStrict(data []byte) error {
	type frame struct {
		keys    map[string]bool // nil for an array
		wantKey bool
		key     string // the member being read, in an object
		outer   string // the member holding this object or array ("" for the body)
	}
	// field names the member a problem is in: the one being read, or, in
	// an array or a key, the one holding it.
	field := func(f *frame, inKey bool) string {
		if f.keys == nil || inKey {
			return f.outer
		}
		return f.key
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	started := false
	for {
		at := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF && started && len(stack) == 0 {
			return nil
		}
		if err != nil {
			return syntaxError(err)
		}
		switch {
		case !started:
			if tok != json.Delim('{') {
				return invalid("", "request body must be a JSON object")
			}
			started = true
			stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true})
			continue
		case len(stack) == 0:
			return invalid("", "unexpected data after the JSON object")
		}
		top := stack[len(stack)-1]
		if _, ok := tok.(string); ok {
			// The token as written, with what came before it since the
			// last one (no backslash outside a string in valid JSON).
			if esc := loneSurrogate(data[at:dec.InputOffset()]); esc != "" {
				return invalid(field(top, top.wantKey), "%s is an escape of a lone UTF-16 surrogate, which is no character: "+
					"send the character itself (UTF-8) or its surrogate pair", esc)
			}
		}
		if top.wantKey {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
			} else {
				key := tok.(string) // the decoder allows only a string here
				if top.keys[key] {
					return invalid(key, "field %q appears more than once", key)
				}
				top.keys[key], top.wantKey, top.key = true, false, key
				continue
			}
		} else {
			switch tok {
			case json.Delim('{'):
				stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true, outer: field(top, false)})
				continue
			case json.Delim('['):
				stack = append(stack, &frame{outer: field(top, false)})
				continue
			case json.Delim(']'):
				stack = stack[:len(stack)-1]
			}
		}
		// A value just ended: the object holding it wants its next key.
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantKey = true
		}
	}
}

// loneSurrogate returns the first \u escape in raw, JSON text that holds
// strings, of a UTF-16 surrogate not in a high-low pair ("\ud800"), or "".
// raw is valid JSON, so a backslash always starts an escape and \u has four
// hex digits after it.
func loneSurrogate(raw []byte) string {
	hex4 := func(b []byte) rune {
		var r rune
		for _, c := range b[:4] {
			switch {
			case c >= '0' && c <= '9':
				c -= '0'
			case c >= 'a' && c <= 'f':
				c -= 'a' - 10
			default:
				c -= 'A' - 10
			}
			r = r<<4 | rune(c)
		}
		return r
	}
	for i := bytes.IndexByte(raw, '\\'); i >= 0 && i+1 < len(raw); {
		n := 2 // an escape's length: \n, \", …
		if raw[i+1] == 'u' {
			n = 6
			switch r := hex4(raw[i+2:]); {
			case utf16.IsSurrogate(r) && r < 0xdc00 && len(raw) >= i+12 && raw[i+6] == '\\' && raw[i+7] == 'u' &&
				utf16.DecodeRune(r, hex4(raw[i+8:])) != unicode.ReplacementChar:
				n = 12 // a pair
			case utf16.IsSurrogate(r):
				return string(raw[i : i+6])
			}
		}
		j := bytes.IndexByte(raw[i+n:], '\\')
		if j < 0 {
			break
		}
		i += n + j
	}
	return ""
}

// syntaxError is the 400 of a body encoding/json could not read.
func syntaxError(err error) *APIError {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("", "request body is empty or cut short: want one JSON object")
	}
	return invalid("", "malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// fields reads the members of a request object, collecting a problem per
// bad field instead of stopping at the first.
type fields struct {
	m        map[string]json.RawMessage
	streamed map[string]*bodyValue // members decodeTask read itself (not in m)
	problems []FieldProblem
}

func (f *fields) bad(field, msg string) { f.problems = append(f.problems, FieldProblem{field, msg}) }

// raw returns a member, treating null as absent.
func (f *fields) raw(name string) (json.RawMessage, bool) {
	r, ok := f.m[name]
	if !ok || string(r) == "null" {
		return nil, false
	}
	return r, true
}

// str decodes a string member; present reports whether it was there.
func (f *fields) str(name string) (v string, present bool) {
	r, ok := f.raw(name)
	if !ok {
		return "", false
	}
	if len(r) >= 2 && r[0] == '"' && bytes.IndexByte(r, '\\') < 0 {
		// parseObject checked the JSON and its UTF-8: with no escape, the
		// string is what is written between its quotes.
		return string(r[1 : len(r)-1]), true
	}
	if err := json.Unmarshal(r, &v); err != nil {
		f.bad(name, "must be a string")
	}
	return v, true
}

// body reads a body or bodyBase64 member: as decodeTask streamed it, or
// from the object, decoding bodyBase64 (badBase64 when it is not base64).
func (f *fields) body(name string) (*bodyValue, bool) {
	if v, ok := f.streamed[name]; ok {
		return v, true
	}
	s, ok := f.str(name)
	if !ok {
		return nil, false
	}
	if name != "bodyBase64" {
		return &bodyValue{data: []byte(s)}, true
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	return &bodyValue{data: b, badBase64: err != nil}, true
}

// check decodes a string member and records why(value) as its problem when
// not "". ok is false when the member is absent, not a string or rejected.
func (f *fields) check(name string, required bool, why func(string) string) (v string, ok bool) {
	n := len(f.problems)
	v, present := f.str(name)
	switch {
	case !present:
		if required {
			f.bad(name, "is required")
		}
		return "", false
	case len(f.problems) > n:
		return "", false
	}
	if w := why(v); w != "" {
		f.bad(name, w)
		return "", false
	}
	return v, true
}

// unknown reports every member not in known.
func (f *fields) unknown(known ...string) {
	all := true
	for name := range f.m {
		all = all && slices.Contains(known, name)
	}
	if all { // the common case, without sorting
		return
	}
	for _, name := range slices.Sorted(maps.Keys(f.m)) {
		if !slices.Contains(known, name) {
			f.bad(name, "unknown field")
		}
	}
}

// err returns the problems as one 400, or nil.
func (f *fields) err() error {
	if len(f.problems) == 0 {
		return nil
	}
	return fieldsError(f.problems)
}
