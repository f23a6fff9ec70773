package dnsbench

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/bench/benchenv"
)

// pinProcess sets the CPU affinity of every thread of this process to cpu and
// returns a function restoring the previous affinity. Threads created later
// inherit it from the thread that creates them (benchenv.SetAffinity).
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

func setAll(set *unix.CPUSet) error { return benchenv.SetAffinity(os.Getpid(), set) }
