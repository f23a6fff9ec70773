package topology

import (
	"strings"
	"testing"
)

func TestNameKeyPlain(t *testing.T) {
	cases := []struct {
		parts []string
		want  string
	}{
		{[]string{"default", "web-0"}, "default.web-0"},
		{[]string{"default", "web-0.nginx"}, "default.web-0.nginx"},
		{[]string{"Service", "default", "web"}, "Service.default.web"},
		{[]string{"IPAddressPool", "lab"}, "IPAddressPool.lab"},
	}
	for _, tc := range cases {
		if got := NameKey(MaxObjectKey, tc.parts...); got != tc.want {
			t.Errorf("NameKey(%q) = %q, want %q", tc.parts, got, tc.want)
		}
	}
}

// TestNameKeyInjective: identities that a plain join would map to one name
// get different keys, and no key can leave its directory.
func TestNameKeyInjective(t *testing.T) {
	long := strings.Repeat("a", 250)
	ids := [][]string{
		{"c", "a.b"}, {"c.a", "b"}, // the same "c.a.b" joined
		{"default", long + "x"}, {"default", long + "y"}, // the same after cutting
		{"default", "web"}, {"default", "web~" + strings.Repeat("0", 32)},
		{"default", ".."}, {"default", "."}, {"..", ".."}, {".x"}, {"default", ".x"}, {"default", "../../../../tmp/ESCAPED"},
		{"default", "a/b"}, {"default", "a_b"}, {"default", "a\x00b"}, {"default", "под"}, {"default", "pod"},
		{"", "x"}, {"x", ""}, {"default", "x y"},
	}
	for _, max := range []int{maxPodKey, MaxObjectKey} {
		seen := map[string][]string{}
		for _, id := range ids {
			k := NameKey(max, id...)
			if len(k) > max || len("."+k+".yaml.1234567890.tmp") > 255 {
				t.Errorf("NameKey(%d, %q) = %d bytes, over the limit", max, id, len(k))
			}
			if k == "" || strings.HasPrefix(k, ".") || strings.ContainsAny(k, "/\x00") {
				t.Errorf("NameKey(%d, %q) = %q: not a safe file name", max, id, k)
			}
			if prev, dup := seen[k]; dup {
				t.Errorf("NameKey(%d): %q and %q both map to %q", max, prev, id, k)
			}
			seen[k] = id
		}
	}
}

func TestNamesPodFitsNAME_MAX(t *testing.T) {
	n := Names{Lab: strings.Repeat("l", 32)}
	ns, name := strings.Repeat("n", 63), strings.Repeat("p.", 126)+"p"
	if got := n.Pod(ns, name); len(got) > 255 || !n.Owns(got) || !strings.HasPrefix(got, n.prefix()+"pod.") {
		t.Errorf("Names.Pod of the longest names = %q (%d bytes): want at most 255 bytes, owned by the lab", got, len(got))
	}
	if a, b := n.Pod(ns, name), n.Pod(ns, name[:len(name)-1]+"q"); a == b {
		t.Errorf("two long pod names share the namespace %q", a)
	}
}
