package dnsbench

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinProcess sets the CPU affinity of every thread of this process to cpu and
// returns a function restoring the previous affinity. Threads created later
// inherit it from the thread that creates them. It runs two passes over
// /proc/self/task so that a thread created during the first is not missed.
func pinProcess(cpu int) (restore func() error, err error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("pin to cpu %d: %w", cpu, err)
	}
	set.Set(cpu)
	if err := setAll(&set); err != nil {
		return nil, fmt.Errorf("pin to cpu %d: %w", cpu, err)
	}
	return func() error {
		if err := setAll(&old); err != nil {
			return fmt.Errorf("unpin: %w", err)
		}
		return nil
	}, nil
}

func setAll(set *unix.CPUSet) error {
	for range 2 {
		entries, err := os.ReadDir("/proc/self/task")
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
