package alloc

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors: every error in Result.Pending wraps at least one (errors.Is).
var (
	// ErrPoolExhausted: the pool has no free address of a family the Service needs.
	ErrPoolExhausted = errors.New("pool exhausted")
	// ErrIPInUse: the requested IP is held by a Service that does not share it.
	ErrIPInUse = errors.New("IP in use")
	// ErrNoPool: no pool allows the Service, or the requested pool does not exist,
	// does not allow it, or has no range of a family it needs.
	ErrNoPool = errors.New("no pool")
	// ErrNotInPool: a requested IP is in no pool the Service may use.
	ErrNotInPool = errors.New("IP not in a usable pool")
	// ErrPortClash: the Service would share an IP (or, in node-ip mode, the nodes'
	// addresses) with a Service that uses one of its ports.
	ErrPortClash = errors.New("port clash")
	// ErrInvalidRequest: the request contradicts itself (two requested IPs of one
	// family, or of a family the Service does not have).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrReservedIP: a requested IP is one of the cluster's own addresses (a
	// node's, or in a pod or service CIDR), excluded from its pool.
	ErrReservedIP = errors.New("IP reserved")
)

// joinedError lists the reasons several pools refused a Service, in pool order,
// separated by "; " (errors.Join's newlines read badly in an Event).
type joinedError struct {
	prefix string
	errs   []error
}

func (e *joinedError) Error() string {
	msgs := make([]string, len(e.errs))
	for i, err := range e.errs {
		msgs[i] = err.Error()
	}
	return e.prefix + strings.Join(msgs, "; ")
}

func (e *joinedError) Unwrap() []error { return e.errs }

// reasonError is a reason worded for a user (an Event, a log) that wraps a sentinel
// without repeating it in the message.
type reasonError struct {
	msg  string
	kind error
}

func (e *reasonError) Error() string { return e.msg }
func (e *reasonError) Unwrap() error { return e.kind }

// Reasonf returns an error worded for a user (an Event, a log) whose class is
// kind (errors.Is(err, kind)) without kind's text repeated in the message.
func Reasonf(kind error, format string, args ...any) error {
	return &reasonError{msg: fmt.Sprintf(format, args...), kind: kind}
}
