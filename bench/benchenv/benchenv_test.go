package benchenv

import (
	"slices"
	"testing"
	"time"
)

func TestIntAndDuration(t *testing.T) {
	const key = "SVCNET_BENCHENV_TEST"
	t.Setenv(key, "")
	if got := Int(t, key, 7, 1); got != 7 {
		t.Errorf("unset: Int = %d, want the default 7", got)
	}
	if got := Duration(t, key, 3*time.Second); got != 3*time.Second {
		t.Errorf("unset: Duration = %v, want the default 3s", got)
	}
	t.Setenv(key, "0")
	if got := Int(t, key, 7, 0); got != 0 {
		t.Errorf("0 with min 0: Int = %d", got)
	}
	t.Setenv(key, "1500ms")
	if got := Duration(t, key, time.Second); got != 1500*time.Millisecond {
		t.Errorf("1500ms: Duration = %v", got)
	}
}

func TestSvcnetBinaryFromEnv(t *testing.T) {
	t.Setenv(Svcnet, "/bin/true")
	if got := SvcnetBinary(t); got != "/bin/true" {
		t.Errorf("SvcnetBinary = %q, want the file %s names", got, Svcnet)
	}
}

func TestSizes(t *testing.T) {
	const key = "SVCNET_BENCHENV_TEST"
	t.Setenv(key, "")
	if got := Sizes(t, key, "1000,10"); !slices.Equal(got, []int{10, 1000}) {
		t.Errorf("unset: Sizes = %v, want the default sorted, [10 1000]", got)
	}
	t.Setenv(key, " 30000, 1000,,1000 ")
	if got := Sizes(t, key, "5"); !slices.Equal(got, []int{1000, 30000}) {
		t.Errorf("Sizes = %v, want [1000 30000]", got)
	}
}
