package api

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// quickObject is parseObject's fast path, for the bodies clients send: an
// object with no escape in any key, no repeated key and no lone surrogate.
// It answers what json.Unmarshal would into the map, or false for anything
// else, which parseObject then reads with encoding/json's tokenizer: to
// refuse it in the words of its rules, or to accept it (a key with an
// escape) as before. Checking strictness with json.Decoder.Token cost
// about 120 allocations for a small task; this walk costs none beyond the
// map.
func quickObject(data []byte) (map[string]json.RawMessage, bool) {
	if !utf8.Valid(data) || !json.Valid(data) || loneSurrogate(data) != "" {
		return nil, false
	}
	// The members' values outlive the request body only as copies with
	// encoding/json; so they do here, in one piece.
	w := objectWalk{data: bytes.Clone(data)}
	w.space()
	if w.i == len(w.data) || w.data[w.i] != '{' {
		return nil, false
	}
	m := make(map[string]json.RawMessage, 8)
	if !w.object(m) {
		return nil, false
	}
	return m, true
}

// objectWalk reads JSON text that json.Valid has accepted, so it checks
// only what validity leaves open: escaped and repeated keys.
type objectWalk struct {
	data []byte
	i    int
}

func (w *objectWalk) space() {
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// object reads the object at w.i, putting its members in into when not
// nil; false for a key with an escape or a key repeated.
func (w *objectWalk) object(into map[string]json.RawMessage) bool {
	var held [16][]byte
	keys := held[:0]
	w.i++ // '{'
	for {
		w.space()
		if w.data[w.i] == '}' {
			w.i++
			return true
		}
		if w.data[w.i] == ',' {
			w.i++
			w.space()
		}
		end := bytes.IndexByte(w.data[w.i+1:], '"') + w.i + 1
		key := w.data[w.i+1 : end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		for _, k := range keys {
			if bytes.Equal(k, key) {
				return false
			}
		}
		keys = append(keys, key)
		w.i = end + 1
		w.space()
		w.i++ // ':'
		w.space()
		at := w.i
		if !w.value() {
			return false
		}
		if into != nil {
			into[string(key)] = w.data[at:w.i:w.i]
		}
	}
}

// value skips the value at w.i.
func (w *objectWalk) value() bool {
	switch w.data[w.i] {
	case '{':
		return w.object(nil)
	case '[':
		w.i++
		for {
			w.space()
			switch w.data[w.i] {
			case ']':
				w.i++
				return true
			case ',':
				w.i++
				w.space()
			}
			if !w.value() {
				return false
			}
		}
	case '"':
		for w.i++; ; w.i++ {
			switch w.data[w.i] {
			case '\\':
				w.i++ // the escaped byte; \u's hex digits hold no quote
			case '"':
				w.i++
				return true
			}
		}
	}
	for w.i < len(w.data) { // a number, true, false or null
		switch w.data[w.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return true
		}
		w.i++
	}
	return true
}
