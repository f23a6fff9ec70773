package trace

import (
	"bytes"
	"strings"
	"testing"
)

// TestExpectedProbe: a real connection's outcome is compared with the
// verdict, except for a packet that leaves the cluster, whose fate out there
// the tracer does not model; the report says so.
func TestExpectedProbe(t *testing.T) {
	for _, tc := range []struct {
		v     Verdict
		proto string
		want  string
	}{
		{Verdict{Kind: Delivered, Reason: "to the pod's address"}, "tcp", "connected"},
		{Verdict{Kind: Delivered, Reason: "to the pod's address"}, "udp", "answered"},
		{Verdict{Kind: Rejected}, "tcp", "refused"},
		{Verdict{Kind: Dropped}, "tcp", "timed out"},
		{Verdict{Kind: Delivered, Reason: reasonLeft}, "tcp", ""},
	} {
		tr := &Trace{Verdict: tc.v}
		tr.Request.Packet.Proto = tc.proto
		if got := expectedProbe(tr); got != tc.want {
			t.Errorf("%s %s: expected probe %q, want %q", tc.v.Kind, tc.proto, got, tc.want)
		}
	}
	var b bytes.Buffer
	rep := &Report{Trace: &Trace{Verdict: Verdict{Kind: Delivered, Reason: reasonLeft}}, Probe: "timed out (dropped)"}
	if err := rep.Write(&b); err != nil {
		t.Fatal(err)
	}
	if w := "the probe's outcome is not compared: the packet leaves the cluster"; !strings.Contains(b.String(), w) {
		t.Errorf("report lacks %q:\n%s", w, b.String())
	}
}
