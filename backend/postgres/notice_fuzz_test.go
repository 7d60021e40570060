package postgres

import (
	"strings"
	"testing"
)

// FuzzParseInsertNotice: a notification payload from any process parses or
// is refused without a panic; a parsed key always names the payload's first
// field as its queue.
func FuzzParseInsertNotice(f *testing.F) {
	for _, s := range []string{"default 0 1732400000000000", "default", "", "q 99999 1", "q -1 -9223372036854775808", "q 1 x", "  q   2   3  "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		queue, key, ok := parseInsertNotice(payload)
		fields := strings.Fields(payload)
		if ok {
			if len(fields) != 3 && len(fields) != 4 || queue != fields[0] {
				t.Fatalf("%q parsed to queue %q", payload, queue)
			}
			if key.priority < -32768 {
				t.Fatalf("%q: priority %d", payload, key.priority)
			}
		}
	})
}
