package main

import (
	"sync"

	"github.com/svcnet/svcnet/internal/proxy"
)

// programmedSignal tells when the data plane first programmed the whole
// state: its channel is closed at the first full sync that succeeded.
type programmedSignal struct {
	once sync.Once
	done chan struct{}
}

func newProgrammedSignal() *programmedSignal {
	return &programmedSignal{done: make(chan struct{})}
}

// observe is the proxier's OnSync hook.
func (s *programmedSignal) observe(r proxy.SyncResult) {
	if r.Full && r.Err == nil {
		s.once.Do(func() { close(s.done) })
	}
}

// programmed is closed once the state was first programmed whole.
func (s *programmedSignal) programmed() <-chan struct{} { return s.done }
