package ui

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzLocalPath: a path localPath accepts stays on this site however a
// browser reads it (a backslash as a slash, tabs and newlines dropped),
// starts with a single slash, and is accepted again as it is.
func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"/", "/jobs?x=1", "//evil.example/x", `/\evil.example/x`, "/%5Cevil", "/%2e%2e//evil", "/jobs/../jobs/", "/\t/evil", "/a/./b/", "/é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, ok := localPath(in)
		if !ok {
			return
		}
		if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\t\r\n") {
			t.Fatalf("localPath(%q) = %q", in, p)
		}
		browser := strings.NewReplacer("\\", "/", "\t", "", "\n", "", "\r", "").Replace(p)
		u, err := url.Parse("http://dashboard.test" + browser)
		if err != nil || u.Host != "dashboard.test" || strings.HasPrefix(u.Path, "//") {
			t.Fatalf("localPath(%q) = %q, which a browser reads as %v (%v)", in, p, u, err)
		}
		if again, ok := localPath(p); !ok || again != p {
			t.Fatalf("localPath(%q) = %q, then %q %v", in, p, again, ok)
		}
	})
}
