package trace

import (
	"bytes"
	"errors"
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

// settleStep is one attempt's outcome for TestUntilSettled.
type settleStep struct {
	rep   *Report
	moved bool
}

// TestUntilSettled: Verify starts again while the rules moved under a
// disagreeing attempt, at most verifyAttempts times; a disagreement with
// rules that did not move, an agreement or an error ends it at once.
func TestUntilSettled(t *testing.T) {
	differ := &Report{Differences: []string{"KUBE-SERVICES #14 vs #15"}}
	agree := &Report{}
	for _, tc := range []struct {
		name      string
		steps     []settleStep
		wantCalls int
		wantOK    bool
	}{
		{"agrees at once", []settleStep{{agree, false}}, 1, true},
		{"moved twice, then agrees", []settleStep{{differ, true}, {differ, true}, {agree, false}}, 3, true},
		{"differs with rules in place", []settleStep{{differ, false}, {agree, false}}, 1, false},
		{"keeps moving: bounded", []settleStep{{differ, true}, {differ, true}, {differ, true}, {agree, false}}, verifyAttempts, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			rep, err := untilSettled(verifyAttempts, func() (*Report, bool, error) {
				s := tc.steps[calls]
				calls++
				return s.rep, s.moved, nil
			})
			if err != nil || calls != tc.wantCalls || rep.OK() != tc.wantOK {
				t.Errorf("calls %d, OK %v, err %v; want %d calls, OK %v", calls, rep.OK(), err, tc.wantCalls, tc.wantOK)
			}
		})
	}
	calls := 0
	if _, err := untilSettled(verifyAttempts, func() (*Report, bool, error) {
		calls++
		return nil, true, errors.New("probe failed")
	}); err == nil || calls != 1 {
		t.Errorf("an error: %d calls, err %v; want 1 and the error", calls, err)
	}
}
