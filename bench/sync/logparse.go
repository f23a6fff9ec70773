package syncbench

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// syncMarker is the message both proxies log at v=2 after each sync.
const syncMarker = `"SyncProxyRules complete"`

// SyncLine is what one "SyncProxyRules complete" log line says.
type SyncLine struct {
	Elapsed time.Duration
	// Full is "true" or "false" when the line says (svcnet), "" when it does not
	// (kube-proxy: its first sync of a family is always full).
	Full string
	// Family is kube-proxy's ipFamily ("IPv4", "IPv6"); "" for svcnet, which
	// syncs both families in one pass.
	Family string
	// Services is svcnet's services= count, -1 when absent.
	Services int
}

var (
	reElapsed  = regexp.MustCompile(`\belapsed="?([0-9.]+(?:ns|us|µs|ms|s|m|h)(?:[0-9.]+(?:ns|us|µs|ms|s))*)"?`)
	reFull     = regexp.MustCompile(`\bfull=(true|false)\b`)
	reFamily   = regexp.MustCompile(`\bipFamily="?(IPv4|IPv6)"?`)
	reServices = regexp.MustCompile(`\bservices=([0-9]+)\b`)
)

// ParseSyncLine parses a klog text line; ok is false when it is not a
// "SyncProxyRules complete" line with a readable elapsed=.
func ParseSyncLine(line string) (SyncLine, bool) {
	if !strings.Contains(line, syncMarker) {
		return SyncLine{}, false
	}
	m := reElapsed.FindStringSubmatch(line)
	if m == nil {
		return SyncLine{}, false
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		return SyncLine{}, false
	}
	s := SyncLine{Elapsed: d, Services: -1}
	if m := reFull.FindStringSubmatch(line); m != nil {
		s.Full = m[1]
	}
	if m := reFamily.FindStringSubmatch(line); m != nil {
		s.Family = m[1]
	}
	if m := reServices.FindStringSubmatch(line); m != nil {
		s.Services, _ = strconv.Atoi(m[1])
	}
	return s, true
}

// IsIPv4 reports whether s is about IPv4 rules (kube-proxy's
// IPv4 proxier, or svcnet's sync of every family).
func (s SyncLine) IsIPv4() bool { return s.Family == "" || s.Family == "IPv4" }

// IsFirstFullIPv4 reports whether s can be a proxy's first full sync of its
// IPv4 rules: not marked partial, and of IPv4 or of every family.
func (s SyncLine) IsFirstFullIPv4() bool {
	return s.Full != "false" && s.IsIPv4()
}
