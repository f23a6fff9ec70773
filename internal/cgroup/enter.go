package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Enter moves the calling process, every thread of it, into the cgroup
// directory dir (one svcnet made, under the cgroup2 root), and returns the
// function that moves it back to the cgroup it was in. Sockets the process
// creates in between belong to dir (a socket keeps the cgroup of its
// creator): a benchmark's load generator becomes one of a lab node's
// processes for a while. Moving back writes the process's own pid to its
// former cgroup's cgroup.procs: the one write outside svcnet's directories,
// undoing the move.
func Enter(dir string) (back func() error, err error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	p, err := v2Path(string(b))
	if err != nil {
		return nil, err
	}
	was := filepath.Join(root, p)
	if err := writePid(dir); err != nil {
		return nil, err
	}
	return func() error { return writePid(was) }, nil
}

// v2Path returns the cgroup v2 path in the contents of /proc/PID/cgroup
// (the "0::/path" line).
func v2Path(s string) (string, error) {
	for _, line := range strings.Split(s, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			if err := CheckPath(p); err != nil {
				return "", err
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("cgroup: the process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)")
}

func writePid(dir string) error {
	f := filepath.Join(dir, "cgroup.procs")
	if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("cgroup: move to %s: %w", dir, err)
	}
	return nil
}
