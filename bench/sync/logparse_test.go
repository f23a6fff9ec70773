package syncbench

import (
	"testing"
	"time"
)

func TestParseSyncLine(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		ok         bool
		want       SyncLine
		first      bool
	}{
		{
			name:  "kube-proxy IPv4",
			line:  `I0612 10:00:00.123456   12345 proxier.go:1088] "SyncProxyRules complete" ipFamily="IPv4" elapsed="11.234567s"`,
			ok:    true,
			want:  SyncLine{Elapsed: 11234567 * time.Microsecond, Family: "IPv4", Services: -1},
			first: true,
		},
		{
			name: "kube-proxy IPv6",
			line: `I0612 10:00:00.123456   12345 proxier.go:1088] "SyncProxyRules complete" ipFamily="IPv6" elapsed="1.5ms"`,
			ok:   true,
			want: SyncLine{Elapsed: 1500 * time.Microsecond, Family: "IPv6", Services: -1},
		},
		{
			name:  "svcnet full",
			line:  `I0612 10:00:00.1 1 proxier.go:378] "SyncProxyRules complete" logger="proxy" elapsed="812.5ms" full=true ops=70123 services=10001 skipped=0 drift=false`,
			ok:    true,
			want:  SyncLine{Elapsed: 812500 * time.Microsecond, Full: "true", Services: 10001},
			first: true,
		},
		{
			name: "svcnet partial, microseconds",
			line: `I0612 10:00:00.1 1 proxier.go:378] "SyncProxyRules complete" logger="proxy" elapsed="950µs" full=false ops=7 services=10002`,
			ok:   true,
			want: SyncLine{Elapsed: 950 * time.Microsecond, Full: "false", Services: 10002},
		},
		{
			name: "compound duration",
			line: `I0612 x] "SyncProxyRules complete" ipFamily="IPv4" elapsed="1m2.5s"`,
			ok:   true, first: true,
			want: SyncLine{Elapsed: 62500 * time.Millisecond, Family: "IPv4", Services: -1},
		},
		{name: "other message", line: `I0612 x] "Syncing nftables rules" fullSync=true elapsed="1s"`},
		{name: "no elapsed", line: `I0612 x] "SyncProxyRules complete" ipFamily="IPv4"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseSyncLine(tc.line)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.IsIPv4() != (tc.want.Family != "IPv6") {
				t.Errorf("IsIPv4 = %v for family %q", got.IsIPv4(), tc.want.Family)
			}
			if got.IsFirstFullIPv4() != tc.first {
				t.Errorf("IsFirstFullIPv4 = %v, want %v", got.IsFirstFullIPv4(), tc.first)
			}
		})
	}
}
