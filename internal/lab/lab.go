package lab

import (
	"context"
	"errors"
	"time"

	"github.com/svcnet/svcnet/internal/lab/cluster"
	"github.com/svcnet/svcnet/internal/lab/topology"
)

// Lab is one lab that is up, opened by a lab command. Methods that change it run
// under the lab's lock, taken by Open and Up and released by Close.
type Lab struct {
	c      *cluster.Cluster
	unlock func()
}

// Open opens a lab that is up, taking its lock until Close.
func Open(ctx context.Context, name string) (*Lab, error) {
	return open(ctx, name, cluster.Lock)
}

// OpenWait is Open, waiting at most wait for the lock (cluster.ErrBusy
// then): for readers that must answer at once, shell completion.
func OpenWait(ctx context.Context, name string, wait time.Duration) (*Lab, error) {
	return open(ctx, name, func(n topology.Names) (func(), error) { return cluster.TryLock(n, wait) })
}

func open(ctx context.Context, name string, lock func(topology.Names) (func(), error)) (*Lab, error) {
	if err := topology.ValidateName(name); err != nil {
		return nil, err
	}
	n := topology.Names{Lab: name}
	unlock, err := lock(n)
	if err != nil {
		return nil, err
	}
	info, err := cluster.ReadInfo(n)
	if errors.Is(err, cluster.ErrNoLab) {
		// No lab of that name: its lock file is this command's alone
		// (lab up holds the lock until the lab is written), and a
		// command on a lab that is not up leaves nothing behind.
		err = errors.Join(err, cluster.RemoveLock(n))
	}
	if err != nil {
		unlock()
		return nil, err
	}
	c, err := cluster.Open(ctx, n, info)
	if err != nil {
		unlock()
		return nil, err
	}
	return &Lab{c: c, unlock: unlock}, nil
}

// Close releases the lab's lock. The lab stays up.
func (l *Lab) Close() {
	if l.unlock != nil {
		l.unlock()
		l.unlock = nil
	}
}

// Info returns what the lab remembers about itself.
func (l *Lab) Info() cluster.Info { return *l.c.Info }

// Names returns the lab's names.
func (l *Lab) Names() topology.Names { return l.c.Names }

// Down removes the lab named name: every process in its namespaces, the
// namespaces, its /etc/netns files, its state and, last, its lock file. It
// is idempotent and needs nothing but the names, so it works after a crash.
func Down(name string) error {
	if err := topology.ValidateName(name); err != nil {
		return err
	}
	n := topology.Names{Lab: name}
	unlock, err := cluster.Lock(n)
	if err != nil {
		return err
	}
	defer unlock()
	if err := topology.Remove(n); err != nil {
		return err
	}
	return cluster.RemoveLock(n)
}
