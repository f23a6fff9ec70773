package syncbench

import (
	"os"
	"path/filepath"
	"testing"
)

// Output split anywhere still yields whole sync lines, and the log keeps it all.
func TestLineWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := &lineWriter{f: f, changed: make(chan struct{})}
	out := `I0612 x] "Syncing nftables rules" fullSync=true
I0612 x] "SyncProxyRules complete" ipFamily="IPv4" elapsed="1.5s"
I0612 x] "SyncProxyRules complete" ipFamily="IPv6" elapsed="2ms"
`
	_, ch := w.snapshot()
	for _, chunk := range []string{out[:10], out[10:70], out[70:71], out[71:]} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	w.close()
	select {
	case <-ch:
	default:
		t.Errorf("no change signalled")
	}
	syncs, _ := w.snapshot()
	if len(syncs) != 2 || syncs[0].Family != "IPv4" || syncs[1].Family != "IPv6" || syncs[0].At.IsZero() {
		t.Fatalf("syncs = %+v", syncs)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != out {
		t.Errorf("log = %q, %v; want the output unchanged", b, err)
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tsvcnet\nVmHWM:\t  210000 kB\nVmRSS:\t  204800 kB\nThreads:\t9\n"
	if got := parseStatusKB([]byte(status), "VmRSS:"); got != 200<<20 {
		t.Errorf("VmRSS = %d, want %d", got, 200<<20)
	}
	if got := parseStatusKB([]byte(status), "VmSwap:"); got != 0 {
		t.Errorf("missing key = %d, want 0", got)
	}
	if parseStatusKB([]byte(status), "VmHWM:") != 210000<<10 {
		t.Errorf("VmHWM not parsed")
	}
}
