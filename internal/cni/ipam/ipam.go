package ipam

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
)

// Allocate gives owner one address in each subnet, in the order of subnets.
// It is idempotent: an address the owner already holds in a subnet is
// returned again, not a second one. It is all or nothing: when a subnet has no
// free address (an error wrapping ErrExhausted) the addresses reserved by this
// call are released again.
func Allocate(x *Session, owner Owner, subnets []netip.Prefix) ([]netip.Addr, error) {
	all, err := x.List()
	if err != nil {
		return nil, err
	}
	used := make(map[netip.Addr]bool, len(all))
	for _, a := range all {
		used[a.Addr] = true
	}
	var out, fresh []netip.Addr
	undo := func() {
		for _, a := range fresh {
			_ = x.Release(a)
		}
	}
	for _, subnet := range subnets {
		if a, ok := held(all, owner, subnet); ok {
			out = append(out, a)
			continue
		}
		a, err := Next(subnet, x.LastReserved(subnet), used)
		if err != nil {
			undo()
			return nil, err
		}
		if err := x.Reserve(Allocation{Addr: a, Owner: owner}); err != nil {
			undo()
			return nil, err
		}
		fresh = append(fresh, a)
		used[a] = true
		if err := x.SetLastReserved(subnet, a); err != nil {
			undo()
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// held returns the address owner holds in subnet, if any.
func held(all []Allocation, owner Owner, subnet netip.Prefix) (netip.Addr, bool) {
	for _, a := range all {
		if a.Owner == owner && subnet.Contains(a.Addr) {
			return a.Addr, true
		}
	}
	return netip.Addr{}, false
}

// Owned returns the addresses owner holds, sorted.
func Owned(x *Session, owner Owner) ([]netip.Addr, error) {
	all, err := x.List()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range all {
		if a.Owner == owner {
			out = append(out, a.Addr)
		}
	}
	return out, nil
}

// Release frees every address owner holds and returns them. Releasing an
// owner that holds nothing succeeds.
func Release(x *Session, owner Owner) ([]netip.Addr, error) {
	return releaseIf(x, func(o Owner) bool { return o == owner })
}

// GC frees every address whose owner valid rejects and returns what it freed.
// It carries on past a failed release and reports all failures.
func GC(x *Session, valid func(Owner) bool) ([]Allocation, error) {
	all, err := x.List()
	if err != nil {
		return nil, err
	}
	var freed []Allocation
	var errs []error
	for _, a := range all {
		if valid(a.Owner) {
			continue
		}
		if err := x.Release(a.Addr); err != nil {
			errs = append(errs, err)
			continue
		}
		freed = append(freed, a)
	}
	return freed, errors.Join(errs...)
}

func releaseIf(x *Session, match func(Owner) bool) ([]netip.Addr, error) {
	all, err := x.List()
	if err != nil {
		return nil, err
	}
	var freed []netip.Addr
	var errs []error
	for _, a := range all {
		if !match(a.Owner) {
			continue
		}
		if err := x.Release(a.Addr); err != nil {
			errs = append(errs, err)
			continue
		}
		freed = append(freed, a.Addr)
	}
	return freed, errors.Join(errs...)
}

// Available checks that every subnet has at least one free address; the error
// wraps ErrExhausted and names the first full subnet.
func Available(x *Session, subnets []netip.Prefix) error {
	all, err := x.List()
	if err != nil {
		return err
	}
	for _, subnet := range subnets {
		n := 0
		for _, a := range all {
			if Usable(subnet, a.Addr) {
				n++
			}
		}
		if Size(subnet).Cmp(big.NewInt(int64(n))) <= 0 {
			return fmt.Errorf("subnet %s: %w (%d addresses, all allocated)", subnet.Masked(), ErrExhausted, n)
		}
	}
	return nil
}
