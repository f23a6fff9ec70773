package demo

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestEventsSince: only speaker events at or after the given klog time are
// kept, in order.
func TestEventsSince(t *testing.T) {
	log := `I1205 22:06:49.264887    5158 members.go:414] "peer alive" logger="proxy.speaker.members" node="node1"
I1205 22:06:50.451430    5158 l2.go:249] "sent gratuitous announcement" logger="proxy.speaker.l2" ip="172.26.236.180" attempt=1 of=3
I1205 22:06:50.460000    5158 proxier.go:461] "SyncProxyRules complete" elapsed="3ms"
W1205 22:06:51.000001    5158 members.go:464] "peer dead" logger="proxy.speaker.members" node="node3" reason="timeout"
short
`
	path := filepath.Join(t.TempDir(), "node2.proxy.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := eventsSince(path, "1205 22:06:50.000000")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`I1205 22:06:50.451430    5158 l2.go:249] "sent gratuitous announcement" logger="proxy.speaker.l2" ip="172.26.236.180" attempt=1 of=3`,
		`W1205 22:06:51.000001    5158 members.go:464] "peer dead" logger="proxy.speaker.members" node="node3" reason="timeout"`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("eventsSince = %q, want %q", got, want)
	}
	if _, err := eventsSince(filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Error("a missing log is no error")
	}
}
