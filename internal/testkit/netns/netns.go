// Package netns simulates several hosts on this machine: each host is a
// network namespace joined by a veth pair to one bridge, whose address on
// this side is where a server of the caller's own listens. A process run
// in a host reaches only the bridge's subnet, so its connections cross a
// network device and each host's connections carry their own source
// address. It needs root and iproute2's ip.
package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Hosts is a set of simulated hosts on one bridge.
type Hosts struct {
	ip     string // path of the ip binary
	bridge string
	subnet string // "10.213.X", the first three octets
	names  []string
}

// MaxHosts is the most hosts Create makes: addresses .11 to .(10+MaxHosts).
const MaxHosts = 200

// Create makes n hosts. Names carry this process's PID so that concurrent
// runs do not collide; the subnet is the first 10.213.X.0/24 (X from 1 to
// 254) that no interface of this machine uses. Close removes all of it.
func Create(ctx context.Context, n int) (*Hosts, error) {
	if n < 1 || n > MaxHosts {
		return nil, fmt.Errorf("create hosts: %d hosts asked, between 1 and %d allowed", n, MaxHosts)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("create hosts: network namespaces need root")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		return nil, fmt.Errorf("create hosts: ip not found (install iproute2): %w", err)
	}
	subnet, err := freeSubnet()
	if err != nil {
		return nil, fmt.Errorf("create hosts: %w", err)
	}
	pid := strconv.Itoa(os.Getpid())
	h := &Hosts{ip: ip, bridge: "spbr" + pid, subnet: subnet}
	steps := [][]string{
		{"link", "add", h.bridge, "type", "bridge"},
		{"addr", "add", h.ServerAddr() + "/24", "dev", h.bridge},
		{"link", "set", h.bridge, "up"},
	}
	if err := h.run(ctx, steps...); err != nil {
		_ = h.Close()
		return nil, fmt.Errorf("create hosts: bridge: %w", err)
	}
	for i := range n {
		name := "spool-" + pid + "-" + strconv.Itoa(i)
		outer, inner := "sp"+pid+"h"+strconv.Itoa(i), "sp"+pid+"n"+strconv.Itoa(i)
		if err := h.run(ctx, []string{"netns", "add", name}); err != nil {
			_ = h.Close()
			return nil, fmt.Errorf("create hosts: host %d: %w", i, err)
		}
		h.names = append(h.names, name)
		in := func(args ...string) []string { return append([]string{"-n", name}, args...) }
		err := h.run(ctx,
			[]string{"link", "add", outer, "type", "veth", "peer", "name", inner},
			[]string{"link", "set", outer, "master", h.bridge},
			[]string{"link", "set", outer, "up"},
			[]string{"link", "set", inner, "netns", name},
			in("addr", "add", h.Addr(i)+"/24", "dev", inner),
			in("link", "set", inner, "up"),
			in("link", "set", "lo", "up"),
		)
		if err != nil {
			_ = h.Close()
			return nil, fmt.Errorf("create hosts: host %d: %w", i, err)
		}
	}
	return h, nil
}

// freeSubnet returns the first 10.213.X that no interface's address is in.
func freeSubnet() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("list addresses: %w", err)
	}
	used := map[string]bool{}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			ip := n.IP.To4()
			used[fmt.Sprintf("%d.%d.%d", ip[0], ip[1], ip[2])] = true
		}
	}
	for x := 1; x < 255; x++ {
		if s := "10.213." + strconv.Itoa(x); !used[s] {
			return s, nil
		}
	}
	return "", errors.New("no free subnet in 10.213.0.0/16")
}

// run runs ip with each argument list in turn, stopping at the first
// failure.
func (h *Hosts) run(ctx context.Context, steps ...[]string) error {
	for _, args := range steps {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := exec.CommandContext(cctx, h.ip, args...).CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// Len is the number of hosts.
func (h *Hosts) Len() int { return len(h.names) }

// ServerAddr is this machine's address on the bridge, where a server must
// listen for the hosts to reach it.
func (h *Hosts) ServerAddr() string { return h.subnet + ".1" }

// Network is the hosts' network in CIDR notation (for a server's access
// rules).
func (h *Hosts) Network() string { return h.subnet + ".0/24" }

// Addr is host i's address.
func (h *Hosts) Addr(i int) string { return h.subnet + "." + strconv.Itoa(11+i) }

// Command returns a command that runs name with args in host i (ip netns
// exec replaces itself with the program, so the command's process is the
// program's).
func (h *Hosts) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command(h.ip, append([]string{"netns", "exec", h.names[i], name}, args...)...)
}

// Close deletes the hosts (their veth pairs go with them) and the bridge,
// reporting every step that failed.
func (h *Hosts) Close() error {
	var errs []error
	for _, name := range h.names {
		if err := h.run(context.Background(), []string{"netns", "del", name}); err != nil {
			errs = append(errs, err)
		}
	}
	h.names = nil
	if err := h.run(context.Background(), []string{"link", "del", h.bridge}); err != nil &&
		!strings.Contains(err.Error(), "Cannot find device") {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
