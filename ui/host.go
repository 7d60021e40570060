package ui

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
)

// hostRules are the host names a dashboard answers to (Options.AllowedHosts).
type hostRules struct {
	any     bool            // "*": every host
	exact   map[string]bool // names and IP addresses
	domains []string        // ".example.com": the domain and its subdomains
	// open: no rule was given and Authorize is set, so every host is
	// admitted (see Options.AllowedHosts).
	open bool
}

// newHostRules checks and normalizes Options.AllowedHosts.
func newHostRules(allowed []string, authorized bool) (hostRules, error) {
	r := hostRules{exact: map[string]bool{}, open: len(allowed) == 0 && authorized}
	for _, a := range allowed {
		name := normalHost(strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"))
		switch {
		case name == "*":
			r.any = true
		case name == "" || name == ".":
			return r, fmt.Errorf("spool ui: allowed host %q is empty", a)
		case net.ParseIP(name) != nil:
			r.exact[net.ParseIP(name).String()] = true
		case strings.ContainsAny(name, ":/@ \t*[]"):
			return r, fmt.Errorf("spool ui: allowed host %q is not a host name (give the name alone: no scheme, port or path)", a)
		case strings.HasPrefix(name, "."):
			r.domains = append(r.domains, name)
		default:
			r.exact[name] = true
		}
	}
	return r, nil
}

// normalHost lowercases a host name and drops a final dot ("LocalHost." is
// localhost).
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// hostAllowed reports whether the request's Host names this dashboard.
// Loopback names and IP addresses cannot be an attacker's (rebinding needs a
// domain name the attacker controls), nor can the address the request
// arrived at.
func (h *Handler) hostAllowed(r *http.Request) bool {
	if h.hosts.open || h.hosts.any {
		return true
	}
	name := requestHost(r.Host)
	if name == "" {
		return false
	}
	if name == "localhost" || h.hosts.exact[name] {
		return true
	}
	if ip := net.ParseIP(name); ip != nil {
		if ip.IsLoopback() || h.hosts.exact[ip.String()] {
			return true
		}
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if la, ok := local.(*net.TCPAddr); ok && la.IP.Equal(ip) {
				return true
			}
		}
		return false
	}
	for _, d := range h.hosts.domains {
		if name == d[1:] || strings.HasSuffix(name, d) {
			return true
		}
	}
	return false
}

// requestHost is a Host header's name without its port, brackets or zone,
// normalized; "" when there is none.
func requestHost(host string) string {
	name := host
	if n, _, err := net.SplitHostPort(host); err == nil {
		name = n
	} else {
		name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	}
	if i := strings.IndexByte(name, '%'); i >= 0 && strings.Contains(name, ":") {
		name = name[:i] // an IPv6 zone
	}
	name = normalHost(name)
	if ip := net.ParseIP(name); ip != nil {
		return ip.String()
	}
	return name
}

// hostRefusal says why a request's host is refused and how to admit it.
func (h *Handler) hostRefusal(r *http.Request) string {
	names := []string{"localhost", "127.0.0.1", "::1"}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if la, ok := local.(*net.TCPAddr); ok && !la.IP.IsLoopback() {
			names = append(names, la.IP.String())
		}
	}
	names = append(names, slices.Sorted(maps.Keys(h.hosts.exact))...)
	names = append(names, h.hosts.domains...)
	return fmt.Sprintf("spool ui: this dashboard does not answer to host %q (a page of another site pointed at this machine is refused: DNS rebinding). "+
		"It answers to %s. Allow another host name with spool ui --allowed-host NAME, or Options.AllowedHosts where the dashboard is mounted.",
		r.Host, strings.Join(names, ", "))
}
