package demo

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/svcnet/svcnet/internal/lab"
)

// speakerEvents are the substrings of the log lines in which a node's
// speaker tells who it counts alive and what it announces: what decides
// which node answers ARP for a LoadBalancer IP.
var speakerEvents = []string{`"peer dead"`, `"peer alive"`, `"peer restarted"`, `"peer readiness changed"`,
	`"peers alive again`, `"stopped announcing"`, `"sent gratuitous announcement"`, `"peer not ready`}

// printSpeakerEvents prints, after a failed check of the LoadBalancer step,
// each node's speaker events logged since since (klog's timestamps), so that
// a change of the IP's owner during the step shows its cause.
func (d *demo) printSpeakerEvents(l *lab.Lab, since time.Time) {
	fmt.Fprintf(d.out, "    the speakers' events since %s (why the owner changed):\n", since.Format("15:04:05.000"))
	from := since.Format("0102 15:04:05.000000")
	for i := 1; i <= l.Info().Nodes; i++ {
		lines, err := eventsSince(l.ProxyLog(i), from)
		if err != nil {
			fmt.Fprintf(d.out, "      node%d: %v\n", i, err)
			continue
		}
		for _, line := range lines {
			fmt.Fprintf(d.out, "      node%d: %s\n", i, line)
		}
	}
}

// eventsSince returns the speaker event lines of the klog file path whose
// timestamp ("I1205 22:06:49.264183", without the year) is from or later.
func eventsSince(path, from string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 21 || line[1:21] < from {
			continue
		}
		for _, ev := range speakerEvents {
			if strings.Contains(line, ev) {
				out = append(out, line)
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}
