package testdb

import (
	"bytes"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy between a client and the test database that a test
// can cut, to simulate a network partition or a database that went away.
type Proxy struct {
	ln     net.Listener
	target string

	mu   sync.Mutex
	cut  bool
	drop bool // DropReplies: the server's next bytes end the connection
	// dropAfter (DropReplyTo): the reply to the first request holding it
	// is dropped, and that request's connection ended.
	dropAfter []byte
	conns     map[net.Conn]struct{}
}

// NewProxy starts a proxy to the PostgreSQL test server, closed when the
// test ends. URL returns a database URL that goes through it.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	u, err := url.Parse(PostgresURL())
	if err != nil {
		t.Fatal(err)
	}
	return NewProxyTo(t, u.Host)
}

// NewProxyTo starts a proxy to target (host:port), closed when the test
// ends. Addr is where clients connect.
func NewProxyTo(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.Cut()
	})
	return p
}

// Addr is the proxy's listening address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// DropReplies makes the proxy swallow the next bytes the server sends on
// any connection and close that connection instead, until Restore: a
// statement sent now reaches the server and runs, but its reply is lost, as
// when a network or a server's host fails between a commit and its reply.
func (p *Proxy) DropReplies() {
	p.mu.Lock()
	p.drop = true
	p.mu.Unlock()
}

// DropReplyTo arms a one-shot fault: the first request from a client that
// holds pattern (a statement's text, say COMMIT) is passed to the server,
// which runs it, and the server's next bytes on that connection are
// swallowed and the connection closed: the reply to that very statement
// is lost, as when a network fails between a commit and its reply.
// Requests sent before the armed one, on any connection, are answered.
func (p *Proxy) DropReplyTo(pattern string) {
	p.mu.Lock()
	p.dropAfter = []byte(pattern)
	p.mu.Unlock()
}

// takeDropAfter reports whether request matches the armed DropReplyTo
// pattern, disarming it if so.
func (p *Proxy) takeDropAfter(request []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.dropAfter) == 0 || !bytes.Contains(request, p.dropAfter) {
		return false
	}
	p.dropAfter = nil
	return true
}

// URL is the test database URL through the proxy.
func (p *Proxy) URL() string {
	u, _ := url.Parse(PostgresURL())
	u.Host = p.ln.Addr().String()
	return u.String()
}

// Cut closes every proxied connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
}

// Restore lets connections and replies through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut, p.drop, p.dropAfter = false, false, nil
	p.mu.Unlock()
}

func (p *Proxy) dropping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drop
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = client.Close()
		return
	}
	p.mu.Unlock()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.cut { // cut while dialling
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	// dropNext is set once a request matched DropReplyTo's pattern, before
	// the request goes on to the server, so its reply cannot slip through.
	var dropNext atomic.Bool
	requests := func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := client.Read(buf)
			if n > 0 {
				if p.takeDropAfter(buf[:n]) {
					dropNext.Store(true)
				}
				if _, werr := server.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = server.Close()
		_ = client.Close()
		done <- struct{}{}
	}
	replies := func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 && (p.dropping() || dropNext.Load()) {
				break
			}
			if n > 0 {
				if _, werr := client.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = client.Close()
		_ = server.Close()
		done <- struct{}{}
	}
	go requests()
	go replies()
	<-done
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}
