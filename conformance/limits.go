package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/spoolq/spool"
	"github.com/spoolq/spool/backend"
)

// The limits of docs/limits.md, restated here independently of the code
// that enforces them, as an oracle for tests of other ways in (the SQL
// enqueue functions).
var (
	limitQueue = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$`)
	limitTag   = regexp.MustCompile(`^[a-zA-Z0-9_.:-]{1,64}$`)
)

// WithinLimits returns an error naming the first limit of docs/limits.md a
// stored job breaks, or nil.
func WithinLimits(j *backend.JobRow) error {
	switch {
	case j.Kind == "" || len(j.Kind) > spool.MaxKindLength || !utf8.ValidString(j.Kind) ||
		strings.ContainsFunc(j.Kind, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("kind %q breaks the kind rule", j.Kind)
	case !limitQueue.MatchString(j.Queue):
		return fmt.Errorf("queue %q breaks the queue rule", j.Queue)
	case j.Priority < spool.MinPriority || j.Priority > spool.MaxPriority:
		return fmt.Errorf("priority %d is out of range", j.Priority)
	case j.MaxAttempts < 1 || j.MaxAttempts > spool.MaxMaxAttempts:
		return fmt.Errorf("max attempts %d is out of range", j.MaxAttempts)
	case j.RunAt.Before(spool.MinRunAt) || j.RunAt.After(spool.MaxRunAt):
		return fmt.Errorf("run time %s is out of range", j.RunAt)
	case len(j.Tags) > spool.MaxTags:
		return fmt.Errorf("%d tags", len(j.Tags))
	}
	for _, tag := range j.Tags {
		if !limitTag.MatchString(tag) {
			return fmt.Errorf("tag %q breaks the tag rule", tag)
		}
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, j.Args); err != nil {
		return fmt.Errorf("args are not JSON: %w", err)
	}
	if compact.Len() > spool.DefaultMaxArgsBytes {
		return fmt.Errorf("args are %d bytes as compact JSON", compact.Len())
	}
	if d := jsonDepth(j.Args); d > spool.MaxJSONDepth {
		return fmt.Errorf("args nest %d deep", d)
	}
	if v, err := decodeJSON(j.Args); err != nil || containsNUL(v) {
		return fmt.Errorf("args hold a NUL character (or do not decode: %v)", err)
	}
	if len(j.Metadata) > 0 {
		var m map[string]any
		if err := json.Unmarshal(j.Metadata, &m); err != nil {
			return fmt.Errorf("metadata is not a JSON object: %w", err)
		}
		if d := jsonDepth(j.Metadata); d > spool.MaxJSONDepth {
			return fmt.Errorf("metadata nests %d deep", d)
		}
	}
	return nil
}

// jsonDepth is the deepest nesting of arrays and objects in valid JSON.
func jsonDepth(raw []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// decodeJSON decodes raw keeping numbers as written (1e999 is valid JSON,
// though no float64 holds it).
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// containsNUL reports whether a decoded JSON value holds U+0000 anywhere.
func containsNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.ContainsRune(x, 0)
	case []any:
		for _, e := range x {
			if containsNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.ContainsRune(k, 0) || containsNUL(e) {
				return true
			}
		}
	}
	return false
}
