package pool

import (
	"errors"
	"strings"
)

// Sentinels wrapped by *Error (errors.Is).
var (
	// ErrInvalid: the pool fails validation and cannot be used.
	ErrInvalid = errors.New("invalid IPAddressPool")
	// ErrOverlap: the pool shares addresses with another pool.
	ErrOverlap = errors.New("IPAddressPools overlap")
)

// Error is what is wrong with one IPAddressPool, as
// `IPAddressPool lab: spec.addresses[1]: "172.26.236.199-172.26.236.180": first address after last`.
// It wraps ErrOverlap when Other is set, else ErrInvalid.
type Error struct {
	// Pool is the name of the pool the error is about.
	Pool string
	// Other is, for an overlap, the pool whose addresses it shares; else "".
	Other string
	// Problems are "field: reason" texts, in field order.
	Problems []string
}

func (e *Error) Error() string {
	return "IPAddressPool " + e.Pool + ": " + strings.Join(e.Problems, "; ")
}

// Unwrap returns ErrOverlap or ErrInvalid.
func (e *Error) Unwrap() error {
	if e.Other != "" {
		return ErrOverlap
	}
	return ErrInvalid
}
