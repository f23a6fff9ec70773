package kubecluster

import (
	"github.com/svcnet/svcnet/internal/atomicfile"

	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// pidsFile names, one line each, the running components of the cluster in a
// directory: "NAME PID STARTTIME", in start order (etcd first).
const pidsFile = "pids"

// pidEntry is one line of Dir/pids.
type pidEntry struct {
	name  string
	pid   int
	start uint64 // field 22 of /proc/PID/stat
}

func formatPids(es []pidEntry) []byte {
	var b bytes.Buffer
	for _, e := range es {
		fmt.Fprintf(&b, "%s %d %d\n", e.name, e.pid, e.start)
	}
	return b.Bytes()
}

func parsePids(b []byte) ([]pidEntry, error) {
	var es []pidEntry
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: %q: want NAME PID STARTTIME", i+1, line)
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("line %d: pid %q", i+1, f[1])
		}
		start, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: start time %q", i+1, f[2])
		}
		es = append(es, pidEntry{name: f[0], pid: pid, start: start})
	}
	return es, nil
}

// readPids reads dir/pids; a missing file is no entries.
func readPids(dir string) ([]pidEntry, error) {
	b, err := os.ReadFile(filepath.Join(dir, pidsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pids: %w", err)
	}
	es, err := parsePids(b)
	if err != nil {
		return nil, fmt.Errorf("pids %s: %w", filepath.Join(dir, pidsFile), err)
	}
	return es, nil
}

// writePids replaces dir/pids atomically (an empty list removes it).
func writePids(dir string, es []pidEntry) error {
	path := filepath.Join(dir, pidsFile)
	if len(es) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pids: %w", err)
		}
		return nil
	}
	return atomicfile.Write(path, formatPids(es), 0o644)
}

// procStart returns the start time (clock ticks after boot) of process pid, and
// false when there is no such process or it is a zombie (it has exited).
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	return parseStat(b)
}

// parseStat reads the state and starttime of a /proc/PID/stat line. The command
// name (field 2) may hold spaces and parentheses, so fields are counted after
// its last ')'.
func parseStat(b []byte) (uint64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64) // field 22
	if err != nil {
		return 0, false
	}
	return start, true
}

// running reports whether the process e names is alive and is the one recorded:
// same start time, and a command line naming a path under dir (every component's
// flags do).
func (e pidEntry) running(dir string) bool {
	st, ok := procStart(e.pid)
	if !ok || st != e.start {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", e.pid))
	return err == nil && bytes.Contains(cmdline, []byte(filepath.Clean(dir)+"/"))
}

// StopDir stops the components that dir/pids names and that are still running
// (matched by start time and a command line under dir): the controller manager
// first, etcd last, each with SIGTERM and then SIGKILL, bounded. It works without
// the process that started them (for `lab down` after a crash) and is idempotent:
// it removes dir/pids once nothing it names runs, and a missing file is no error.
func StopDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("stop %s: %w", dir, err)
	}
	es, err := readPids(abs)
	if err != nil {
		return fmt.Errorf("stop %s: %w", dir, err)
	}
	var errs []error
	for i := len(es) - 1; i >= 0; i-- {
		if p := adopt(es[i], abs); p != nil {
			if err := p.stop(stopGrace); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stop %s: %w", dir, errors.Join(errs...))
	}
	if err := writePids(abs, nil); err != nil {
		return fmt.Errorf("stop %s: %w", dir, err)
	}
	return nil
}

// runningEntries returns the entries of dir/pids whose processes still run.
func runningEntries(dir string) ([]pidEntry, error) {
	es, err := readPids(dir)
	if err != nil {
		return nil, err
	}
	var live []pidEntry
	for _, e := range es {
		if e.running(dir) {
			live = append(live, e)
		}
	}
	return live, nil
}
