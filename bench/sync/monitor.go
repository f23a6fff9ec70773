package syncbench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// monitorRcvBuf is the receive buffer forced on the monitor socket, so a burst
// of notifications (a full sync writes one per element) is not dropped.
const monitorRcvBuf = 64 << 20

// TableMatch names a group of tables: one (Name), or every table whose name
// Prefix starts.
type TableMatch struct{ Name, Prefix string }

// Match reports whether table belongs to the group.
func (m TableMatch) Match(table string) bool {
	return table == m.Name || (m.Prefix != "" && strings.HasPrefix(table, m.Prefix))
}

func (m TableMatch) String() string {
	if m.Prefix == "" {
		return m.Name
	}
	return m.Name + "," + m.Prefix + "*"
}

// Frontends says where a proxy keeps its Service frontends (ClusterIP to
// Service) in nf_tables, in one of two layouts:
//   - nftables (svcnet, kube-proxy --proxy-mode nftables): elements of the
//     verdict map Set of the Tables, keyed by the ClusterIP first;
//   - iptables through iptables-nft (svcnet --data-plane iptables,
//     kube-proxy --proxy-mode iptables): rules of Chain of the Tables (table
//     "nat", chain KUBE-SERVICES) that match the ClusterIP as destination and
//     jump to the Service's chain (RuleEvent.Frontend).
//
// Exactly one of Set and Chain is set.
type Frontends struct {
	Tables TableMatch
	Set    string
	Chain  string
}

// IPTablesFrontends is kube-proxy's iptables layout under iptables-nft:
// the ClusterIP rules of chain KUBE-SERVICES in table nat.
var IPTablesFrontends = Frontends{Tables: TableMatch{Name: "nat"}, Chain: "KUBE-SERVICES"}

func (f Frontends) String() string {
	if f.Chain != "" {
		return "chain " + f.Chain + " of " + f.Tables.String()
	}
	return "map " + f.Set + " of " + f.Tables.String()
}

// elem reports the addresses a NEWSETELEM notification adds to the frontends.
func (f Frontends) elem(ev ElemEvent) []netip.Addr {
	if f.Set == "" || ev.Set != f.Set || !f.Tables.Match(ev.Table) {
		return nil
	}
	return ev.Addrs()
}

// rule reports the address a NEWRULE notification adds to the frontends.
func (f Frontends) rule(ev RuleEvent) []netip.Addr {
	if f.Chain == "" || ev.Chain != f.Chain || !f.Tables.Match(ev.Table) || !ev.Frontend() {
		return nil
	}
	return []netip.Addr{ev.Daddr}
}

// Monitor timestamps the arrival of Service frontends (map elements or rules,
// see Frontends), as reported by nftables' netlink notifications (group
// NFNLGRP_NFTABLES) in one network namespace. It remembers the first arrival
// of each frontend's address.
type Monitor struct {
	where Frontends
	f     *os.File
	done  chan struct{}

	mu       sync.Mutex
	seen     map[netip.Addr]time.Time
	changed  chan struct{} // closed and replaced on every new address
	overruns int           // ENOBUFS: notifications the kernel dropped
	err      error         // the read error that ended the monitor
}

// StartMonitor subscribes to nftables notifications in ns and records the
// frontends added to where (any family). The socket is made inside ns (through NS.Do)
// and read from an ordinary goroutine; it stops when ctx ends or Close is called.
func StartMonitor(ctx context.Context, ns *netns.NS, where Frontends) (*Monitor, error) {
	var fd int
	err := ns.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_NETFILTER)
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("netlink bind: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, unix.NFNLGRP_NFTABLES); err != nil {
			unix.Close(fd)
			return fmt.Errorf("join nftables group: %w", err)
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, monitorRcvBuf); err != nil {
			unix.Close(fd)
			return fmt.Errorf("receive buffer: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nftables monitor in %s: %w", ns.Path(), err)
	}
	m := &Monitor{
		where:   where,
		f:       os.NewFile(uintptr(fd), "nftables-monitor"),
		done:    make(chan struct{}),
		seen:    map[netip.Addr]time.Time{},
		changed: make(chan struct{}),
	}
	stop := context.AfterFunc(ctx, func() { m.f.Close() })
	go func() {
		defer stop()
		m.loop()
	}()
	return m, nil
}

func (m *Monitor) loop() {
	defer close(m.done)
	buf := make([]byte, 1<<20)
	for {
		n, err := m.f.Read(buf)
		at := time.Now()
		if errors.Is(err, unix.ENOBUFS) {
			m.mu.Lock()
			m.overruns++
			m.mu.Unlock()
			continue
		}
		if err != nil {
			m.mu.Lock()
			if !errors.Is(err, os.ErrClosed) {
				m.err = fmt.Errorf("nftables monitor read: %w", err)
			}
			m.mu.Unlock()
			return
		}
		onElem := func(ev ElemEvent) { m.record(at, m.where.elem(ev)) }
		onRule := func(ev RuleEvent) { m.record(at, m.where.rule(ev)) }
		if m.where.Set == "" {
			onElem = nil
		}
		if m.where.Chain == "" {
			onRule = nil
		}
		perr := parseDatagram(buf[:n], onElem, onRule)
		if perr != nil {
			m.mu.Lock()
			m.err = perr
			m.mu.Unlock()
		}
	}
}

func (m *Monitor) record(at time.Time, addrs []netip.Addr) {
	m.mu.Lock()
	defer m.mu.Unlock()
	added := false
	for _, a := range addrs {
		if _, ok := m.seen[a]; !ok {
			m.seen[a] = at
			added = true
		}
	}
	if added {
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// Wait returns the time the first frontend of addr arrived (at once if it
// already had), or an error when ctx ends first or the monitor stopped.
func (m *Monitor) Wait(ctx context.Context, addr netip.Addr) (time.Time, error) {
	for {
		m.mu.Lock()
		at, ok := m.seen[addr]
		ch, err := m.changed, m.err
		m.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return time.Time{}, fmt.Errorf("frontend %s in %s: %w (monitor: %w)", addr, m.where, ctx.Err(), err)
			}
			return time.Time{}, fmt.Errorf("frontend %s in %s: %w", addr, m.where, ctx.Err())
		case <-m.done:
			m.mu.Lock()
			_, ok := m.seen[addr]
			err := m.err
			m.mu.Unlock()
			if !ok {
				if err == nil {
					err = os.ErrClosed
				}
				return time.Time{}, fmt.Errorf("frontend %s in %s: monitor stopped: %w", addr, m.where, err)
			}
		case <-ch:
		}
	}
}

// Overruns returns how many times the kernel reported dropped notifications.
func (m *Monitor) Overruns() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.overruns
}

// Close stops the monitor and waits for its goroutine.
func (m *Monitor) Close() {
	m.f.Close()
	<-m.done
}
