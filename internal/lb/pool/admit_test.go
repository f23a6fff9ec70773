package pool

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svcnet/svcnet/internal/lb/alloc"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cand is a candidate created n minutes after t0 with the given addresses
// (parsed as spec.addresses are).
func cand(t *testing.T, name string, n int, established bool, addrs ...string) Candidate {
	t.Helper()
	p := alloc.Pool{Name: name, AutoAssign: true, Mode: alloc.ModeL2}
	if len(addrs) == 0 {
		p.Mode = alloc.ModeNodeIP
	}
	for _, a := range addrs {
		rg, err := ParseRange(a)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		p.Ranges = append(p.Ranges, rg)
	}
	return Candidate{Pool: p, Established: established, Created: t0.Add(time.Duration(n) * time.Minute)}
}

func res(what, s string) alloc.Reserved {
	if strings.Contains(s, "/") {
		return alloc.Reserved{Range: alloc.PrefixRange(netip.MustParsePrefix(s)), What: what + " " + s}
	}
	a := netip.MustParseAddr(s)
	return alloc.Reserved{Range: alloc.Range{First: a, Last: a}, What: what + " " + s}
}

// The cluster's own addresses in the lab's IP plan.
var labReserved = []alloc.Reserved{
	res("Node node1's InternalIP", "172.26.236.177"),
	res("Node node3's InternalIP", "172.26.236.179"),
	res("Node node3's ExternalIP", "203.0.113.3"),
	res("Node node3's podCIDR", "192.168.3.0/24"),
	res("Node node3's podCIDR", "fd00:192:168:3::/64"),
	res("the service CIDR", "10.96.0.0/12"),
	res("the service CIDR", "fd00:96::/108"),
}

// summary describes an Admission: "name" (or "name excluding R,R") per
// admitted pool, "name refused: message" per refused pool, and "name
// conflict: message" per conflict.
func summary(t *testing.T, a Admission) []string {
	t.Helper()
	var out []string
	for _, p := range a.Pools {
		s := p.Name
		for i, ex := range p.Excluded {
			sep := ","
			if i == 0 {
				sep = " excluding "
			}
			s += sep + ex.Range.String()
		}
		out = append(out, s)
	}
	for _, err := range a.Refused {
		var pe *Error
		if !errors.As(err, &pe) || errors.Is(err, ErrInvalid) || !(errors.Is(err, ErrOverlap) || errors.Is(err, ErrReserved)) {
			t.Errorf("refusal %v: not an *Error wrapping ErrOverlap or ErrReserved", err)
			continue
		}
		if errors.Is(err, ErrOverlap) != (pe.Other != "") || errors.Is(err, ErrReserved) != pe.Reserved {
			t.Errorf("refusal %v: sentinels disagree with Other %q, Reserved %v", err, pe.Other, pe.Reserved)
		}
		out = append(out, pe.Pool+" refused: "+err.Error())
	}
	for _, err := range a.Conflicts {
		var pe *Error
		if !errors.As(err, &pe) || !errors.Is(err, ErrReserved) || errors.Is(err, ErrOverlap) {
			t.Errorf("conflict %v: not an *Error wrapping ErrReserved only", err)
			continue
		}
		out = append(out, pe.Pool+" conflict: "+err.Error())
	}
	return out
}

func TestAdmit(t *testing.T) {
	cases := []struct {
		name     string
		cands    func(t *testing.T) []Candidate
		reserved []alloc.Reserved
		want     []string
	}{{
		name: "the newer of two overlapping pools is refused, naming both and the overlap",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{cand(t, "a", 1, false, "172.26.236.180-172.26.236.199"), cand(t, "b", 2, false, "172.26.236.190-172.26.236.195")}
		},
		want: []string{"a", "b refused: IPAddressPool b: spec.addresses[0]: 172.26.236.190-172.26.236.195 overlaps IPAddressPool a (172.26.236.180-172.26.236.199)"},
	}, {
		name: "the other direction: the older pool wins whatever the names",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{cand(t, "a", 2, false, "172.26.236.180-172.26.236.199"), cand(t, "b", 1, false, "172.26.236.190-172.26.236.195")}
		},
		want: []string{"b", "a refused: IPAddressPool a: spec.addresses[0]: 172.26.236.190-172.26.236.195 overlaps IPAddressPool b (172.26.236.190-172.26.236.195)"},
	}, {
		name: "the same creation time: the name decides",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{cand(t, "b", 1, false, "10.0.0.0/30"), cand(t, "a", 1, false, "10.0.0.3-10.0.0.9")}
		},
		want: []string{"a", "b refused: IPAddressPool b: spec.addresses[0]: 10.0.0.3 overlaps IPAddressPool a (10.0.0.3-10.0.0.9)"},
	}, {
		name: "equal ranges",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{cand(t, "one", 1, false, "10.0.0.0-10.0.0.9"), cand(t, "two", 2, false, "10.0.0.0-10.0.0.9")}
		},
		want: []string{"one", "two refused: IPAddressPool two: spec.addresses[0]: 10.0.0.0-10.0.0.9 overlaps IPAddressPool one (10.0.0.0-10.0.0.9)"},
	}, {
		name: "a CIDR against a range, at the second entry",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{cand(t, "r", 1, false, "10.0.0.250-10.0.1.5"), cand(t, "c", 2, false, "10.9.0.0/16", "10.0.1.0/24")}
		},
		want: []string{"r", "c refused: IPAddressPool c: spec.addresses[1]: 10.0.1.0-10.0.1.5 overlaps IPAddressPool r (10.0.0.250-10.0.1.5)"},
	}, {
		name: "IPv6, and families never overlap each other",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{
				cand(t, "v6", 1, false, "fd00::/120"),
				cand(t, "v4", 2, false, "0.0.0.0/8"),
				cand(t, "v6b", 3, false, "fd00::80-fd00::1ff"),
			}
		},
		want: []string{"v4", "v6", "v6b refused: IPAddressPool v6b: spec.addresses[0]: fd00::80-fd00::ff overlaps IPAddressPool v6 (fd00::-fd00::ff)"},
	}, {
		name: "a refused pool blocks no later pool; a pool overlapping two names each",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{
				cand(t, "a", 1, false, "10.0.0.10-10.0.0.20"),
				cand(t, "b", 2, false, "10.0.0.15-10.0.0.25"),
				cand(t, "c", 3, false, "10.0.0.21-10.0.0.30"),
				cand(t, "d", 4, false, "10.0.0.0-10.0.0.40"),
			}
		},
		want: []string{"a", "c",
			"b refused: IPAddressPool b: spec.addresses[0]: 10.0.0.15-10.0.0.20 overlaps IPAddressPool a (10.0.0.10-10.0.0.20)",
			"d refused: IPAddressPool d: spec.addresses[0]: 10.0.0.10-10.0.0.20 overlaps IPAddressPool a (10.0.0.10-10.0.0.20); " +
				"spec.addresses[0]: 10.0.0.21-10.0.0.30 overlaps IPAddressPool c (10.0.0.21-10.0.0.30)"},
	}, {
		name: "an established pool goes first, however new: the edited or new one is refused",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{cand(t, "edited", 1, false, "10.0.0.0/24"), cand(t, "kept", 5, true, "10.0.0.128/25")}
		},
		want: []string{"kept", "edited refused: IPAddressPool edited: spec.addresses[0]: 10.0.0.128-10.0.0.255 overlaps IPAddressPool kept (10.0.0.128-10.0.0.255)"},
	}, {
		name: "node-ip pools have no addresses and conflict with nothing",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{cand(t, "nodes", 1, false), cand(t, "lab", 2, false, "172.26.236.180-172.26.236.199")}
		},
		reserved: labReserved,
		want:     []string{"lab", "nodes"},
	}, {
		name: "a new pool holding a node's InternalIP is refused",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{cand(t, "lab", 1, true, "172.26.236.180-172.26.236.199"), cand(t, "wide", 2, false, "172.26.236.170-172.26.236.179")}
		},
		reserved: labReserved,
		want: []string{"lab", "wide refused: IPAddressPool wide: spec.addresses[0]: holds Node node1's InternalIP 172.26.236.177; " +
			"spec.addresses[0]: holds Node node3's InternalIP 172.26.236.179"},
	}, {
		name: "an ExternalIP, a pod CIDR and the service CIDRs, both families",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{
				cand(t, "ext", 1, false, "203.0.113.0/24"),
				cand(t, "pods", 2, false, "192.168.3.128-192.168.4.10"),
				cand(t, "svc", 3, false, "10.100.0.0/16", "fd00:96::ff00/120"),
				cand(t, "pods6", 4, false, "fd00:192:168::/48"),
			}
		},
		reserved: labReserved,
		want: []string{
			"ext refused: IPAddressPool ext: spec.addresses[0]: holds Node node3's ExternalIP 203.0.113.3",
			"pods refused: IPAddressPool pods: spec.addresses[0]: 192.168.3.128-192.168.3.255 overlaps Node node3's podCIDR 192.168.3.0/24",
			"pods6 refused: IPAddressPool pods6: spec.addresses[0]: fd00:192:168:3::-fd00:192:168:3:ffff:ffff:ffff:ffff overlaps Node node3's podCIDR fd00:192:168:3::/64",
			"svc refused: IPAddressPool svc: spec.addresses[0]: 10.100.0.0-10.100.255.255 overlaps the service CIDR 10.96.0.0/12; " +
				"spec.addresses[1]: fd00:96::ff00-fd00:96::ffff overlaps the service CIDR fd00:96::/108",
		},
	}, {
		name: "overlap and reserved addresses together: both reported",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{cand(t, "lab", 1, false, "172.26.236.180-172.26.236.199"), cand(t, "b", 2, false, "172.26.236.179-172.26.236.180")}
		},
		reserved: labReserved,
		want: []string{"lab", "b refused: IPAddressPool b: spec.addresses[0]: 172.26.236.180 overlaps IPAddressPool lab (172.26.236.180-172.26.236.199); " +
			"spec.addresses[0]: holds Node node3's InternalIP 172.26.236.179"},
	}, {
		name: "an established pool that came to hold reserved addresses is kept, excluding them",
		cands: func(t *testing.T) []Candidate {
			return []Candidate{cand(t, "old", 1, true, "172.26.236.176-172.26.236.185", "192.168.3.250-192.168.4.0")}
		},
		reserved: labReserved,
		want: []string{
			"old excluding 172.26.236.177,172.26.236.179,192.168.3.250-192.168.3.255",
			"old conflict: IPAddressPool old: spec.addresses[0]: holds Node node1's InternalIP 172.26.236.177; " +
				"spec.addresses[0]: holds Node node3's InternalIP 172.26.236.179; " +
				"spec.addresses[1]: 192.168.3.250-192.168.3.255 overlaps Node node3's podCIDR 192.168.3.0/24; " +
				"these addresses are not handed out; a Service that holds one keeps it",
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cands := tc.cands(t)
			want := slices.Clone(tc.want)
			if d := cmp.Diff(want, summary(t, Admit(cands, tc.reserved))); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			// The input order does not matter.
			slices.Reverse(cands)
			rev := slices.Clone(tc.reserved)
			slices.Reverse(rev)
			if d := cmp.Diff(want, summary(t, Admit(cands, rev))); d != "" {
				t.Errorf("reversed input (-want +got):\n%s", d)
			}
		})
	}
}

// A pool holding many reserved addresses lists the first few and counts the rest.
func TestAdmitCapsProblems(t *testing.T) {
	var reserved []alloc.Reserved
	for i := 1; i <= 20; i++ {
		reserved = append(reserved, res(fmt.Sprintf("Node n%02d's InternalIP", i), fmt.Sprintf("10.0.0.%d", i)))
	}
	a := Admit([]Candidate{cand(t, "wide", 1, false, "10.0.0.0/24")}, reserved)
	if len(a.Refused) != 1 {
		t.Fatalf("refused %v, want wide", a.Refused)
	}
	msg := a.Refused[0].Error()
	if !strings.Contains(msg, "Node n08's InternalIP 10.0.0.8; and 12 more") || strings.Contains(msg, "n09") {
		t.Errorf("message %q: want 8 problems and 'and 12 more'", msg)
	}
}
