package cgroup

import (
	"testing"
)

func TestChild(t *testing.T) {
	for _, ok := range []string{"svcnet-lab-a", "node1", "x"} {
		got, err := Child("/r", ok)
		if err != nil || got != "/r/"+ok {
			t.Errorf("Child(/r, %q) = %q, %v", ok, got, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "/a", "cgroup.procs", "a.b", "../x", "a\x00b"} {
		if got, err := Child("/r", bad); err == nil {
			t.Errorf("Child(/r, %q) = %q, want an error", bad, got)
		}
	}
}

func TestParsePids(t *testing.T) {
	got, err := parsePids("12\n345\n")
	if err != nil || len(got) != 2 || got[0] != 12 || got[1] != 345 {
		t.Errorf("parsePids = %v, %v", got, err)
	}
	if got, err := parsePids(""); err != nil || len(got) != 0 {
		t.Errorf("parsePids(empty) = %v, %v", got, err)
	}
	if _, err := parsePids("12\nx\n"); err == nil {
		t.Error("parsePids accepted x")
	}
}
