package iptables

import (
	"testing"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// TestCanonical: rules written in kube-proxy's order come out as
// iptables-save prints them (the kernel tier checks every rendered rule
// against a real iptables-save in internal/dataplane/iptables).
func TestCanonical(t *testing.T) {
	for _, c := range []struct {
		f        ipfamily.Family
		in, want string
	}{
		{ipfamily.IPv4, `-m comment --comment "a/b:http cluster IP" -m tcp -p tcp -d 10.96.0.1 --dport 80 ! -s 192.168.0.0/16 -j KUBE-MARK-MASQ`,
			`! -s 192.168.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment "a/b:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`},
		{ipfamily.IPv4, `-m comment --comment "a pod's way" -s 192.168.0.0/16 -j MASQUERADE --random-fully`,
			`-s 192.168.0.0/16 -m comment --comment "a pod\'s way" -j MASQUERADE --random-fully`},
		{ipfamily.IPv4, `-m comment --comment "a pod\'s way" -j RETURN`, `-m comment --comment "a pod\'s way" -j RETURN`},
		{ipfamily.IPv4, `-m comment --comment a/b:http -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-X`,
			`-m comment --comment "a/b:http" -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-X`},
		{ipfamily.IPv6, `-m recent --name X --rcheck --seconds 10800 --reap -j KUBE-SEP-X`,
			`-m recent --rcheck --seconds 10800 --reap --name X --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource -j KUBE-SEP-X`},
		{ipfamily.IPv4, `-j MARK --or-mark 0x4000`, `-j MARK --set-xmark 0x4000/0x4000`},
		{ipfamily.IPv4, `-j MARK --xor-mark 0x4000`, `-j MARK --set-xmark 0x4000/0x0`},
		{ipfamily.IPv4, `! -i cbr0 -m mark ! --mark 0x4000/0x4000 -j RETURN`, `! -i cbr0 -m mark ! --mark 0x4000/0x4000 -j RETURN`},
		{ipfamily.IPv6, `-p udp -d fd00:96::a -j DNAT --to-destination [fd00::1]:53`, `-d fd00:96::a/128 -p udp -j DNAT --to-destination [fd00::1]:53`},
	} {
		got, err := Canonical(c.f, c.in)
		if err != nil || got != c.want {
			t.Errorf("Canonical(%s)\n got %s (%v)\nwant %s", c.in, got, err, c.want)
		}
		if again, _ := Canonical(c.f, got); again != got {
			t.Errorf("Canonical is not idempotent on %s: %s", got, again)
		}
	}
	for _, bad := range []string{`-m comment --comment "open`, `-d`, `stray -j ACCEPT`} {
		if _, err := Canonical(ipfamily.IPv4, bad); err == nil {
			t.Errorf("Canonical(%q) = nil error", bad)
		}
	}
}
