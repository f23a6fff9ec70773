package printers

import (
	"io"
	"strconv"
	"strings"

	"github.com/svcnet/svcnet/internal/lb/pool"
)

// Pools prints `kubectl get ipaddresspools` as the CRD's printer columns do:
// NAME MODE ADDRESSES AUTO-ASSIGN AGE (mode and auto-assign with their defaults
// when unset).
func Pools(w io.Writer, pools []*pool.IPAddressPool, opts Options) error {
	t := newTable(opts, false, "NAME", "MODE", "ADDRESSES", "AUTO-ASSIGN", "AGE")
	for _, p := range pools {
		mode := p.Spec.Mode
		if mode == "" {
			mode = "l2"
		}
		auto := p.Spec.AutoAssign == nil || *p.Spec.AutoAssign
		t.add(p, false, p.Name, mode, orNone(strings.Join(p.Spec.Addresses, ",")), strconv.FormatBool(auto), age(p, opts.Now))
	}
	return t.write(w, "ipaddresspools")
}
