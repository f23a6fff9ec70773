package syncbench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
	proc "github.com/svcnet/svcnet/internal/process"
)

// Proc is one proxy process running in a network namespace. Its output goes to
// a log file, each line timestamped on arrival; "SyncProxyRules complete" lines
// are kept, with their arrival times, for the harness.
type Proc struct {
	Name    string
	LogPath string
	Started time.Time
	*proc.Process

	out *lineWriter
	// ns is where the process runs; profile is set when each Memory reading
	// also saves profiles (EnvProfile, and a command line with --profiling),
	// readings counts them.
	ns       *netns.NS
	profile  bool
	readings int
}

// Sync is a parsed sync line and when it was written.
type Sync struct {
	SyncLine
	At time.Time
}

// StartProc starts argv inside ns (`ip netns exec`, which execs argv in place,
// so the pid is the proxy's), through internal/process (own process group,
// killed with the benchmark).
func StartProc(ns *netns.NS, name, logPath string, argv ...string) (*Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	fmt.Fprintf(f, "=== %s\n", strings.Join(argv, " "))
	p := &Proc{Name: name, LogPath: logPath, ns: ns, profile: profileEnabled() && slices.Contains(argv, profilingFlag)}
	p.out = &lineWriter{f: f, changed: make(chan struct{})}
	cmd := ns.Command(argv...)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	p.Started = time.Now()
	pr, err := proc.Start(cmd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p.Process = pr
	go func() { <-pr.Done(); p.out.close() }()
	return p, nil
}

// WaitSync returns the first sync line at or after index from for which ok
// holds, with its index; it fails when ctx ends or the process exits first.
func (p *Proc) WaitSync(ctx context.Context, from int, ok func(Sync) bool) (Sync, int, error) {
	for {
		syncs, ch := p.out.snapshot()
		for i := from; i < len(syncs); i++ {
			if ok(syncs[i]) {
				return syncs[i], i, nil
			}
		}
		from = len(syncs)
		select {
		case <-ctx.Done():
			return Sync{}, 0, fmt.Errorf("%s: waiting for a sync: %w", p.Name, ctx.Err())
		case <-p.Done():
			if syncs, _ := p.out.snapshot(); len(syncs) > from {
				continue
			}
			_, err := p.Exited()
			return Sync{}, 0, fmt.Errorf("%s: %w before the awaited sync", p.Name, err)
		case <-ch:
		}
	}
}

// Syncs returns the sync lines seen so far.
func (p *Proc) Syncs() []Sync {
	s, _ := p.out.snapshot()
	return s
}

// Memory returns VmRSS and VmHWM of the process, in bytes. With profiles
// asked for (see EnvProfile) it then saves them; a failure to do so is noted
// in the log only.
func (p *Proc) Memory() (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, 0, fmt.Errorf("%s: memory: %w", p.Name, err)
	}
	rss, hwm = parseStatusKB(b, "VmRSS:"), parseStatusKB(b, "VmHWM:")
	if p.profile {
		p.readings++
		if err := saveProfiles(p.ns, p.Pid(), p.LogPath, p.readings, metricsAddr); err != nil {
			fmt.Fprintf(p.out.f, "=== bench: %v\n", err)
		}
	}
	return rss, hwm, nil
}

func parseStatusKB(status []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

// Stop sends SIGTERM to the process group, SIGKILL after 10s, and waits (at
// most 5s more) for the exit. It is idempotent.
func (p *Proc) Stop() error {
	if err := p.Process.Stop(10*time.Second, 5*time.Second); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	return nil
}

// Tail returns the last n lines of the log.
func (p *Proc) Tail(n int) string { return proc.LogTail(p.LogPath, n) }

// lineWriter splits the process output into lines, appends them to the log and
// keeps the sync lines. os/exec calls Write from one goroutine at a time (the
// same writer is both Stdout and Stderr); snapshot may be called concurrently.
type lineWriter struct {
	f       *os.File
	partial []byte

	mu      sync.Mutex
	syncs   []Sync
	changed chan struct{} // closed and replaced when a sync line arrives
}

func (w *lineWriter) Write(b []byte) (int, error) {
	at := time.Now()
	if _, err := w.f.Write(b); err != nil {
		return 0, err
	}
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		if s, ok := ParseSyncLine(line); ok {
			w.mu.Lock()
			w.syncs = append(w.syncs, Sync{SyncLine: s, At: at})
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
		}
	}
	if len(w.partial) > 1<<20 { // a runaway line: keep memory bounded
		w.partial = w.partial[:0]
	}
	return len(b), nil
}

func (w *lineWriter) snapshot() ([]Sync, chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Sync(nil), w.syncs...), w.changed
}

func (w *lineWriter) close() { w.f.Close() }
