package ipam

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
)

// ErrExhausted is returned (wrapped) when a subnet has no free address.
var ErrExhausted = errors.New("no free address")

// Gateway returns the gateway address of subnet: the first address after the
// network address (192.168.1.1 in 192.168.1.0/24).
func Gateway(subnet netip.Prefix) netip.Addr {
	return subnet.Masked().Addr().Next()
}

// firstUsable returns the first address that may be handed out: the one after
// the gateway.
func firstUsable(subnet netip.Prefix) netip.Addr {
	return Gateway(subnet).Next()
}

// lastUsable returns the last address that may be handed out: the last of the
// subnet, except for IPv4, whose last address is the broadcast address.
func lastUsable(subnet netip.Prefix) netip.Addr {
	a := lastAddr(subnet)
	if a.Is4() {
		a = a.Prev()
	}
	return a
}

// lastAddr returns the highest address of subnet.
func lastAddr(subnet netip.Prefix) netip.Addr {
	b := subnet.Masked().Addr().AsSlice()
	host := len(b)*8 - subnet.Bits()
	for i := len(b) - 1; i >= 0 && host > 0; i-- {
		n := min(host, 8)
		b[i] |= byte(1<<n - 1)
		host -= n
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Usable reports whether a may be handed out in subnet.
func Usable(subnet netip.Prefix, a netip.Addr) bool {
	if !subnet.Contains(a) {
		return false
	}
	return a.Compare(firstUsable(subnet)) >= 0 && a.Compare(lastUsable(subnet)) <= 0
}

// Size returns the number of usable addresses of subnet (0 when the subnet is
// too small to hold any).
func Size(subnet netip.Prefix) *big.Int {
	host := subnet.Addr().BitLen() - subnet.Bits()
	n := new(big.Int).Lsh(big.NewInt(1), uint(host))
	reserved := int64(2) // network, gateway
	if subnet.Addr().Is4() {
		reserved = 3 // and broadcast
	}
	n.Sub(n, big.NewInt(reserved))
	if n.Sign() < 0 {
		n.SetInt64(0)
	}
	return n
}

// Next returns the address to hand out in subnet: the first usable address
// after last that used does not contain, wrapping around from the last usable
// address to the first. When last is not a usable address of subnet (none
// reserved yet, or the subnet changed), the search starts at the first usable
// address. It returns an error wrapping ErrExhausted when every usable address
// is used.
//
// The search visits at most len(used)+1 addresses: a run of used addresses is
// never longer than used, so it is bounded even in a /64.
func Next(subnet netip.Prefix, last netip.Addr, used map[netip.Addr]bool) (netip.Addr, error) {
	subnet = subnet.Masked()
	inUse := 0
	for a := range used {
		if Usable(subnet, a) {
			inUse++
		}
	}
	if Size(subnet).Cmp(big.NewInt(int64(inUse))) <= 0 {
		return netip.Addr{}, fmt.Errorf("subnet %s: %w (%d addresses, all allocated)", subnet, ErrExhausted, inUse)
	}
	first, end := firstUsable(subnet), lastUsable(subnet)
	a := first
	if Usable(subnet, last) && last != end {
		a = last.Next()
	}
	for range inUse + 1 {
		if !used[a] {
			return a, nil
		}
		if a == end {
			a = first
		} else {
			a = a.Next()
		}
	}
	// Unreachable: fewer used addresses than usable ones means a free one
	// within inUse+1 steps.
	return netip.Addr{}, fmt.Errorf("subnet %s: %w", subnet, ErrExhausted)
}
