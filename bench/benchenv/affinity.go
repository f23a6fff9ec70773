package benchenv

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// SetAffinity sets the CPU set of every thread of process pid
// (sched_setaffinity works per thread; threads created later inherit the set
// of the thread that creates them). It makes two passes over the process's
// tasks, so that a thread created during the first is not missed; a thread
// that exits meanwhile is no error.
func SetAffinity(pid int, set *unix.CPUSet) error {
	for range 2 {
		entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return err
		}
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
		}
	}
	return nil
}
