package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/sys/unix"
)

// Store is the allocation store in one directory (see the package doc for
// its layout). It holds no state: every access goes through a Session.
type Store struct{ dir string }

// NewStore returns the store in dir (created on first Lock).
func NewStore(dir string) *Store { return &Store{dir: dir} }

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// ErrTaken is returned (wrapped) by Reserve when the address already has an owner.
var ErrTaken = errors.New("address already allocated")

// ErrBadOwner is returned (wrapped) by Reserve for an owner that its address
// file could not name unambiguously (see Owner).
var ErrBadOwner = errors.New("owner cannot be recorded")

// ErrForeignStore is returned (wrapped) by Claim when the store belongs to
// another network.
var ErrForeignStore = errors.New("store belongs to another network")

// Owner is the attachment an address belongs to. Its address file holds
// "<ContainerID>\r\n<IfName>"; Reserve accepts only owners that this text
// gives back exactly (both fields non-empty, without whitespace or NUL), so
// two owners never share a record and a record never names another owner.
// The plugin validates both fields by the CNI rules before it gets here.
type Owner struct {
	ContainerID string
	IfName      string
}

// Allocation is one allocated address and its owner.
type Allocation struct {
	Addr netip.Addr
	Owner
}

const (
	lockFile    = "lock"
	networkFile = "network"
	lastPrefix  = "last_reserved_ip."
	tmpPrefix   = ".tmp-"
	lineBreak   = "\r\n"
)

// Session is the store held under its lock. It is not safe for concurrent use;
// Close releases the lock.
type Session struct {
	dir string
	f   *os.File
}

// Lock creates the store's directory and lock file if needed and takes the
// exclusive lock, waiting until ctx ends. The lock is flock(2) on a file
// description of its own, so it excludes other processes and other Sessions
// of this one alike, and the kernel drops it if the process dies.
func (s *Store) Lock(ctx context.Context) (*Session, error) {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("ipam store %s: %w", s.dir, err)
	}
	f, err := os.OpenFile(filepath.Join(s.dir, lockFile), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ipam store %s: %w", s.dir, err)
	}
	// flock(2) cannot be interrupted, so it waits in a goroutine of its own:
	// the kernel hands the lock to a waiter as soon as it is released, where
	// polling with LOCK_NB woke up to its poll interval late (40 concurrent
	// Sessions took 2 s polling every 5 to 50 ms, 0.2 s so).
	got := make(chan error, 1)
	go func() {
		for {
			err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
			if !errors.Is(err, unix.EINTR) {
				got <- err
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("ipam store %s: lock: %w", s.dir, err)
		}
		return &Session{dir: s.dir, f: f}, nil
	case <-ctx.Done():
		// The file is closed, dropping the lock if it was taken, once the
		// waiting flock has returned, never under it.
		go func() {
			<-got
			f.Close()
		}()
		return nil, fmt.Errorf("ipam store %s: waiting for the lock: %w", s.dir, ctx.Err())
	}
}

// Close releases the lock.
func (x *Session) Close() error {
	if x.f == nil {
		return nil
	}
	err := x.f.Close() // closing the last descriptor releases the flock
	x.f = nil
	return err
}

// List returns every allocation, sorted by address. It removes the leftovers
// of interrupted writes, which no live writer can own while the lock is held.
func (x *Session) List() ([]Allocation, error) {
	ents, err := os.ReadDir(x.dir)
	if err != nil {
		return nil, fmt.Errorf("ipam store %s: %w", x.dir, err)
	}
	var out []Allocation
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			_ = os.Remove(filepath.Join(x.dir, name))
			continue
		}
		a, err := netip.ParseAddr(name)
		if err != nil || !e.Type().IsRegular() {
			continue // lock, last_reserved_ip.*, anything else
		}
		o, err := x.owner(name)
		if err != nil {
			return nil, err
		}
		out = append(out, Allocation{Addr: a, Owner: o})
	}
	slices.SortFunc(out, func(a, b Allocation) int { return a.Addr.Compare(b.Addr) })
	return out, nil
}

func (x *Session) owner(name string) (Owner, error) {
	b, err := os.ReadFile(filepath.Join(x.dir, name))
	if err != nil {
		return Owner{}, fmt.Errorf("ipam store %s: %w", x.dir, err)
	}
	return decodeOwner(string(b)), nil
}

// encodeOwner is the content of an address file: host-local's format.
func encodeOwner(o Owner) string { return o.ContainerID + lineBreak + o.IfName }

// decodeOwner reads an address file's content (host-local's, which may end
// in a line break).
func decodeOwner(s string) Owner {
	id, ifname, _ := strings.Cut(s, lineBreak)
	return Owner{ContainerID: strings.TrimSpace(id), IfName: strings.TrimSpace(ifname)}
}

// checkOwner refuses an owner that its record would not give back exactly.
func checkOwner(o Owner) error {
	if o.ContainerID == "" || o.IfName == "" || strings.ContainsRune(o.ContainerID+o.IfName, 0) ||
		strings.ContainsFunc(o.ContainerID+o.IfName, unicode.IsSpace) || decodeOwner(encodeOwner(o)) != o {
		return fmt.Errorf("%w: container ID %q, interface %q: want both non-empty, without whitespace or NUL", ErrBadOwner, o.ContainerID, o.IfName)
	}
	return nil
}

// Reserve records a as allocated to its owner. It fails with ErrTaken when the
// address already has a file, whoever owns it.
func (x *Session) Reserve(a Allocation) error {
	name := a.Addr.String()
	if err := checkOwner(a.Owner); err != nil {
		return fmt.Errorf("ipam store %s: reserve %s: %w", x.dir, name, err)
	}
	tmp := filepath.Join(x.dir, tmpPrefix+name)
	_ = os.Remove(tmp)
	content := encodeOwner(a.Owner)
	if err := writeSync(tmp, content); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("ipam store %s: reserve %s: %w", x.dir, name, err)
	}
	err := os.Link(tmp, filepath.Join(x.dir, name))
	_ = os.Remove(tmp)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("ipam store %s: %s: %w", x.dir, name, ErrTaken)
	}
	if err != nil {
		return fmt.Errorf("ipam store %s: reserve %s: %w", x.dir, name, err)
	}
	return nil
}

// Release removes the allocation of address a; a missing one is not an error.
func (x *Session) Release(a netip.Addr) error {
	err := os.Remove(filepath.Join(x.dir, a.String()))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ipam store %s: release %s: %w", x.dir, a, err)
	}
	return nil
}

// Network returns the network the store belongs to, "" when none has
// claimed it (a store made before networks claimed theirs).
func (x *Session) Network() (string, error) {
	b, err := os.ReadFile(filepath.Join(x.dir, networkFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("ipam store %s: %w", x.dir, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Claim makes the store network's: it records the name when the store has
// none, and fails with ErrForeignStore when it belongs to another network,
// whose owners (container ID and interface) it could not tell from
// network's. Allocations never carry the network: the store does.
func (x *Session) Claim(network string) error {
	have, err := x.Network()
	if err != nil {
		return err
	}
	if have == network {
		return nil
	}
	if have != "" {
		return fmt.Errorf("ipam store %s: %w %q, not %q", x.dir, ErrForeignStore, have, network)
	}
	return x.writeFile(networkFile, network)
}

// LastReserved returns the address last handed out in subnet (invalid if none
// is recorded or the record is unreadable: the search then starts afresh).
func (x *Session) LastReserved(subnet netip.Prefix) netip.Addr {
	b, err := os.ReadFile(filepath.Join(x.dir, lastName(subnet)))
	if err != nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(b)))
	if err != nil {
		return netip.Addr{}
	}
	return a
}

// SetLastReserved records a as the address last handed out in subnet.
func (x *Session) SetLastReserved(subnet netip.Prefix, a netip.Addr) error {
	return x.writeFile(lastName(subnet), a.String())
}

// writeFile replaces the store's file name with content, atomically.
func (x *Session) writeFile(name, content string) error {
	tmp := filepath.Join(x.dir, tmpPrefix+name)
	_ = os.Remove(tmp) // under the lock, only a crashed write's leftover
	if err := writeSync(tmp, content); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("ipam store %s: %w", x.dir, err)
	}
	if err := os.Rename(tmp, filepath.Join(x.dir, name)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("ipam store %s: %w", x.dir, err)
	}
	return nil
}

// lastName is the file recording the last reserved address of subnet.
func lastName(subnet netip.Prefix) string {
	return lastPrefix + strings.ReplaceAll(subnet.Masked().String(), "/", "_")
}

// writeSync writes content to a new file and flushes it to disk, so that a
// name linked to it afterwards never points to a partial file.
func writeSync(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// String renders an owner as "containerID/ifname".
func (o Owner) String() string { return o.ContainerID + "/" + o.IfName }

// String renders an allocation as "address owner".
func (a Allocation) String() string { return a.Addr.String() + " " + a.Owner.String() }
