package pool

import (
	"errors"
	"strings"
)

// Sentinels wrapped by *Error (errors.Is).
var (
	// ErrInvalid: the pool fails validation and cannot be used.
	ErrInvalid = errors.New("invalid IPAddressPool")
	// ErrOverlap: the pool shares addresses with a pool admitted before it.
	ErrOverlap = errors.New("IPAddressPools overlap")
	// ErrReserved: the pool holds some of the cluster's own addresses (a node's
	// address, a pod CIDR, a service CIDR).
	ErrReserved = errors.New("IPAddressPool holds reserved addresses")
)

// Error is what is wrong with one IPAddressPool, as
// `IPAddressPool lab: spec.addresses[1]: "172.26.236.199-172.26.236.180": first address after last`.
// It wraps ErrOverlap when Other is set and ErrReserved when Reserved is, else
// ErrInvalid.
type Error struct {
	// Pool is the name of the pool the error is about.
	Pool string
	// Other is, for an overlap, the first admitted pool whose addresses it
	// shares; else "".
	Other string
	// Reserved: the pool holds reserved addresses.
	Reserved bool
	// Problems are "field: reason" texts, in field order.
	Problems []string
}

func (e *Error) Error() string {
	return "IPAddressPool " + e.Pool + ": " + e.Reason()
}

// Reason is the message without the pool's name: the problems, "; "-separated.
func (e *Error) Reason() string { return strings.Join(e.Problems, "; ") }

// Unwrap returns ErrOverlap and ErrReserved as they apply, else ErrInvalid.
func (e *Error) Unwrap() []error {
	var out []error
	if e.Other != "" {
		out = append(out, ErrOverlap)
	}
	if e.Reserved {
		out = append(out, ErrReserved)
	}
	if len(out) == 0 {
		out = append(out, ErrInvalid)
	}
	return out
}
