package spool

import (
	"bytes"
	"errors"
	"reflect"
	"strconv"
	"time"
	"unicode/utf8"
)

// Limits every backend holds identically (docs/limits.md).
const (
	// MaxJSONDepth is the deepest nesting of arrays and objects accepted in
	// args and metadata: MariaDB refuses JSON nested 32 levels deep, so every
	// backend accepts 31 at most.
	MaxJSONDepth = 31
)

var (
	// MinRunAt and MaxRunAt bound a job's run time: SQLite stores
	// microseconds since 1970 and MariaDB's DATETIME ends with year 9999.
	MinRunAt = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxRunAt = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)

	// ErrArgsUnstorable: the args hold text no backend can keep exactly:
	// invalid UTF-8, a NUL character (PostgreSQL's jsonb cannot hold one),
	// or nesting deeper than MaxJSONDepth.
	ErrArgsUnstorable = errors.New("args cannot be stored exactly")
)

// replacementEscape is U+FFFD as encoding/json writes it in place of
// invalid UTF-8 in Go strings; replacementChar is a U+FFFD a string held.
var (
	replacementEscape = []byte(`\ufffd`)
	replacementChar   = []byte("\uFFFD")
	nulEscape         = []byte(`\u0000`)
)

// checkStorableJSON reports why encoded JSON cannot be stored exactly on
// every backend, or "" when it can: one pass over the bytes that counts
// nesting outside strings and looks for an escaped NUL inside them, jumping
// from one structural byte to the next, so it costs about what encoding
// the payload does (BenchmarkArgsChecks; BENCHMARKS.md, "Decision: one
// pass checks that args can be stored").
func checkStorableJSON(encoded []byte) string {
	if !utf8.Valid(encoded) {
		return "hold invalid UTF-8"
	}
	depth, maxDepth := 0, 0
	for i := 0; i < len(encoded); {
		k := bytes.IndexAny(encoded[i:], `"[]{}`)
		if k < 0 {
			break
		}
		i += k
		switch encoded[i] {
		case '"':
			// Skip the string, stopping at escapes.
			i++
			for {
				k := bytes.IndexAny(encoded[i:], `"\`)
				if k < 0 {
					i = len(encoded)
					break
				}
				i += k
				if encoded[i] == '"' {
					i++
					break
				}
				if bytes.HasPrefix(encoded[i:], nulEscape) {
					return `hold a NUL character (\u0000), which PostgreSQL's jsonb cannot store`
				}
				i += 2 // the backslash and the byte it escapes
			}
			continue
		case '[', '{':
			depth++
			maxDepth = max(maxDepth, depth)
		default:
			depth--
		}
		i++
	}
	if maxDepth > MaxJSONDepth {
		return "nest arrays and objects " + strconv.Itoa(maxDepth) + " levels deep, over the limit of " + strconv.Itoa(MaxJSONDepth)
	}
	return ""
}

// hasInvalidString reports whether v holds a string (or map key) that is not
// valid UTF-8. encoding/json replaces such bytes with U+FFFD without a word;
// this walk runs only when the encoded args contain U+FFFD.
func hasInvalidString(v reflect.Value, seen int) bool {
	if seen > 10000 || !v.IsValid() {
		return false
	}
	switch v.Kind() {
	case reflect.String:
		return !utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && hasInvalidString(v.Elem(), seen+1)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() && hasInvalidString(v.Field(i), seen+1) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return false // []byte encodes as base64
		}
		for i := 0; i < v.Len(); i++ {
			if hasInvalidString(v.Index(i), seen+1) {
				return true
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			if hasInvalidString(it.Key(), seen+1) || hasInvalidString(it.Value(), seen+1) {
				return true
			}
		}
	}
	return false
}

// checkArgsStorable returns why args encoded as encoded cannot be stored
// exactly, or "".
func checkArgsStorable(args JobArgs, encoded []byte) string {
	if why := checkStorableJSON(encoded); why != "" {
		return why
	}
	if (bytes.Contains(encoded, replacementEscape) || bytes.Contains(encoded, replacementChar)) && hasInvalidString(reflect.ValueOf(args), 0) {
		return "hold a string that is not valid UTF-8 (JSON would replace its bytes with U+FFFD)"
	}
	return ""
}

// checkRunAt refuses run times outside MinRunAt..MaxRunAt.
func checkRunAt(at time.Time) *InvalidJobError {
	if at.Before(MinRunAt) || at.After(MaxRunAt) {
		return invalid("run_at", nil, "run time %s is out of range %s..%s", at.UTC().Format(time.RFC3339Nano), MinRunAt.Format(time.RFC3339), MaxRunAt.Format(time.RFC3339Nano))
	}
	return nil
}
