package main

import "testing"

func TestPersonalityOf(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		cmd  string
		want personality
	}{
		{[]string{"/opt/cni/bin/svcnet"}, "ADD", svcnetPlugin},
		{[]string{"/opt/cni/bin/svcnet"}, "", cli},
		{[]string{"svcnet", "cni", "install"}, "ADD", cli},
		{[]string{"svcnet", "proxy"}, "", cli},
		{[]string{"/opt/cni/bin/loopback"}, "ADD", loopbackPlugin},
		{[]string{"/opt/cni/bin/loopback"}, "VERSION", loopbackPlugin},
		// Under that name it is only ever the loopback plugin (which prints
		// what it is without CNI_COMMAND), as the reference binary.
		{[]string{"loopback"}, "", loopbackPlugin},
		{[]string{"loopback", "--help"}, "", loopbackPlugin},
		{[]string{"/usr/lib/loopback/svcnet"}, "DEL", svcnetPlugin},
		{nil, "", cli},
	} {
		if got := personalityOf(tc.argv, tc.cmd); got != tc.want {
			t.Errorf("personalityOf(%q, CNI_COMMAND=%q) = %v, want %v", tc.argv, tc.cmd, got, tc.want)
		}
	}
}
