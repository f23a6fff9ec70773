package alloc

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/model"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// rng parses "a-b", "a/n" or "a" into a Range.
func rng(s string) Range {
	if first, last, ok := strings.Cut(s, "-"); ok {
		return Range{netip.MustParseAddr(first), netip.MustParseAddr(last)}
	}
	if strings.Contains(s, "/") {
		p := netip.MustParsePrefix(s)
		last := p.Addr()
		for i := 0; i < 1<<(p.Addr().BitLen()-p.Bits())-1; i++ {
			last = last.Next()
		}
		return Range{p.Addr(), last}
	}
	a := netip.MustParseAddr(s)
	return Range{a, a}
}

// l2 is an auto-assign l2 pool.
func l2(name string, ranges ...string) Pool {
	p := Pool{Name: name, AutoAssign: true, Mode: ModeL2}
	for _, r := range ranges {
		p.Ranges = append(p.Ranges, rng(r))
	}
	return p
}

func with(p Pool, f func(*Pool)) Pool { f(&p); return p }

// svc is a TCP/80 IPv4 Service default/name created n minutes after t0.
func svc(name string, n int) Service {
	ns, nm := "default", name
	if a, b, ok := strings.Cut(name, "/"); ok {
		ns, nm = a, b
	}
	return Service{
		Key:      model.ServiceKey{Namespace: ns, Name: nm},
		Created:  t0.Add(time.Duration(n) * time.Minute),
		Families: []ipfamily.Family{ipfamily.IPv4},
		Ports:    []Port{{model.ProtocolTCP, 80}},
	}
}

func sv(s Service, f func(*Service)) Service { f(&s); return s }

func ips(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func tcp(ports ...int32) []Port {
	var out []Port
	for _, p := range ports {
		out = append(out, Port{model.ProtocolTCP, p})
	}
	return out
}

func sel(s string) labels.Selector {
	out, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return out
}

// pend is an expected pending Service: its error wraps is and contains msg.
type pend struct {
	is  error
	msg string
}

// check compares res with the expected assignments ("pool ip,ip" or "pool node-ip")
// and pending errors, by Service key string.
func check(t *testing.T, res Result, assigned map[string]string, pending map[string]pend) {
	t.Helper()
	got := map[string]string{}
	for k, a := range res.Assigned {
		got[k.String()] = describe(a)
	}
	for k, e := range res.Pending {
		if _, dup := got[k.String()]; dup {
			t.Errorf("%s is both assigned and pending", k)
		}
		got[k.String()] = "pending: " + e.Error()
	}
	keys := map[string]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range assigned {
		keys[k] = true
	}
	for k := range pending {
		keys[k] = true
	}
	var sortedKeys []string
	for k := range keys {
		sortedKeys = append(sortedKeys, k)
	}
	sort.Strings(sortedKeys)
	for _, k := range sortedKeys {
		if want, ok := assigned[k]; ok {
			if got[k] != want {
				t.Errorf("%s: got %q, want %q", k, got[k], want)
			}
			continue
		}
		if want, ok := pending[k]; ok {
			err := res.Pending[model.ServiceKey{Namespace: strings.Split(k, "/")[0], Name: strings.Split(k, "/")[1]}]
			switch {
			case err == nil:
				t.Errorf("%s: got %q, want pending with %v", k, got[k], want.is)
			case !errors.Is(err, want.is):
				t.Errorf("%s: error %q does not wrap %v", k, err, want.is)
			case !strings.Contains(err.Error(), want.msg):
				t.Errorf("%s: error %q does not contain %q", k, err, want.msg)
			}
			continue
		}
		t.Errorf("%s: unexpected %q", k, got[k])
	}
}

func describe(a Assignment) string {
	if a.Mode == ModeNodeIP {
		return a.Pool + " node-ip"
	}
	s := make([]string, len(a.IPs))
	for i, ip := range a.IPs {
		s[i] = ip.String()
	}
	return fmt.Sprintf("%s %s", a.Pool, strings.Join(s, ","))
}
