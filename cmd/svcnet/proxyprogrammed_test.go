package main

import (
	"errors"
	"testing"
)

// TestProgrammedSignal: the channel closes at the first full sync that
// succeeded, not at a partial or failed one, and later syncs are fine.
func TestProgrammedSignal(t *testing.T) {
	s := newProgrammedSignal()
	closed := func() bool {
		select {
		case <-s.programmed():
			return true
		default:
			return false
		}
	}
	s.observe(syncResult(false, nil))
	s.observe(syncResult(true, errors.New("netlink: busy")))
	if closed() {
		t.Fatal("closed before a full sync succeeded")
	}
	s.observe(syncResult(true, nil))
	if !closed() {
		t.Fatal("not closed after a full sync succeeded")
	}
	s.observe(syncResult(true, nil))
	s.observe(syncResult(false, errors.New("again")))
	if !closed() {
		t.Fatal("not closed after later syncs")
	}
}
