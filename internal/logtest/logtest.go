// Package logtest collects what code under test logs or prints, for tests
// that assert it: log lines written through a logr.Logger (Sink), and the
// output of a child process or of a command run in a goroutine (Buffer).
package logtest

import (
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Sink keeps every line logged through its Logger. Safe for concurrent use.
type Sink struct {
	mu    sync.Mutex
	lines []string
}

// Logger returns a logger writing to s, keeping lines up to verbosity v.
func (s *Sink) Logger(v int) logr.Logger {
	return funcr.New(func(_, args string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lines = append(s.lines, args)
	}, funcr.Options{Verbosity: v})
}

// Count returns how many lines contain every one of substrs.
func (s *Sink) Count(substrs ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
next:
	for _, line := range s.lines {
		for _, sub := range substrs {
			if !strings.Contains(line, sub) {
				continue next
			}
		}
		n++
	}
	return n
}

// Lines returns a copy of the lines kept so far.
func (s *Sink) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}
