package netns

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// PidsIn returns the processes whose network namespace is the one at path (a bind
// mount under RunDir, or any nsfs path): every thread of theirs is in it. Never
// the calling process, nor a visitor: a Go program's main thread may be one
// that ran Do and was retired inside some namespace (the runtime wedges the
// main thread rather than end it), which /proc/PID/ns/net then shows, though
// the process and its other threads live in their own; so a process is
// listed only when none of its threads is elsewhere (a test process that
// dialed into a lab must not be taken for one of the lab's). Processes that
// exit during the scan are skipped. It never enters the namespace.
func PidsIn(path string) ([]int, error) {
	var want unix.Stat_t
	if err := unix.Stat(path, &want); err != nil {
		return nil, fmt.Errorf("stat netns %s: %w", path, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("scan processes: %w", err)
	}
	var pids []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) != nil {
			continue
		}
		if st.Dev == want.Dev && st.Ino == want.Ino && threadsIn(e.Name(), want) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// threadsIn reports whether no thread of process pid is in a network
// namespace other than want (threads that exit meanwhile are not counted).
func threadsIn(pid string, want unix.Stat_t) bool {
	tasks, err := os.ReadDir(filepath.Join("/proc", pid, "task"))
	if err != nil {
		return true // the process is gone or hides its threads: its main thread decides
	}
	for _, t := range tasks {
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", pid, "task", t.Name(), "ns", "net"), &st) != nil {
			continue
		}
		if st.Dev != want.Dev || st.Ino != want.Ino {
			return false
		}
	}
	return true
}

// Names returns the names of the namespaces bind-mounted under RunDir.
func Names() ([]string, error) {
	entries, err := os.ReadDir(RunDir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", RunDir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}
