package conntrack

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// SysctlConfig is kube-proxy's conntrack configuration
// (KubeProxyConntrackConfiguration, flags --conntrack-*). A zero field leaves
// its sysctl as the kernel has it.
type SysctlConfig struct {
	// MaxPerCore and Min size the table: nf_conntrack_max =
	// max(MaxPerCore × CPUs, Min), at most MaxConntrackMax. MaxPerCore 0
	// leaves nf_conntrack_max (and Min is then unused).
	MaxPerCore, Min int
	// TCPEstablishedTimeout and TCPCloseWaitTimeout are
	// nf_conntrack_tcp_timeout_established and _close_wait.
	TCPEstablishedTimeout, TCPCloseWaitTimeout time.Duration
	// TCPBeLiberal sets nf_conntrack_tcp_be_liberal to 1 (false leaves it).
	TCPBeLiberal bool
	// UDPTimeout and UDPStreamTimeout are nf_conntrack_udp_timeout (flows
	// without a reply) and nf_conntrack_udp_timeout_stream (assured flows).
	UDPTimeout, UDPStreamTimeout time.Duration
}

// DefaultSysctlConfig returns kube-proxy's defaults: 32768 entries per CPU,
// at least 131072; established TCP flows idle for a day, CLOSE_WAIT for an
// hour (kubernetes#32551: a CLOSE_WAIT entry that expires first leaves the
// peer's later FIN un-NATed); the UDP timeouts and be_liberal left alone.
func DefaultSysctlConfig() SysctlConfig {
	return SysctlConfig{
		MaxPerCore: 32 * 1024, Min: 128 * 1024,
		TCPEstablishedTimeout: 24 * time.Hour, TCPCloseWaitTimeout: time.Hour,
	}
}

// MaxConntrackMax caps nf_conntrack_max, as kube-proxy does on machines with
// many cores (each entry costs memory whether used or not).
const MaxConntrackMax = 1 << 20

// Paths of the settings.
const (
	// NetfilterSysctlDir holds the per-network-namespace netfilter sysctls
	// of the namespace of the thread that opens them.
	NetfilterSysctlDir = "/proc/sys/net/netfilter"
	// HashsizePath is nf_conntrack's hash table size: one for the whole
	// machine (a module parameter), raised with nf_conntrack_max.
	HashsizePath = "/sys/module/nf_conntrack/parameters/hashsize"
)

// Sysctl is one setting to write.
type Sysctl struct {
	// Name is the file's name under NetfilterSysctlDir.
	Name  string
	Value int
	// Why explains the value (for nf_conntrack_max, its computation).
	Why string
}

// Plan returns the sysctls c sets on a machine with cpus CPUs, in
// kube-proxy's order: nf_conntrack_max, the TCP timeouts, be_liberal, the
// UDP timeouts. Timeouts are written in whole seconds.
func (c SysctlConfig) Plan(cpus int) []Sysctl {
	var out []Sysctl
	if c.MaxPerCore > 0 {
		scaled := c.MaxPerCore * max(cpus, 1)
		v, why := scaled, fmt.Sprintf("maxPerCore %d × %d CPUs", c.MaxPerCore, max(cpus, 1))
		switch {
		case scaled > MaxConntrackMax:
			v, why = MaxConntrackMax, why+fmt.Sprintf(", capped at %d", MaxConntrackMax)
		case scaled < c.Min:
			v, why = c.Min, why+fmt.Sprintf(" is below min %d", c.Min)
		}
		out = append(out, Sysctl{Name: "nf_conntrack_max", Value: v, Why: why})
	}
	secs := func(name string, d time.Duration, flag string) {
		if s := int(d / time.Second); s > 0 {
			out = append(out, Sysctl{Name: name, Value: s, Why: flag + " " + d.String()})
		}
	}
	secs("nf_conntrack_tcp_timeout_established", c.TCPEstablishedTimeout, "tcpEstablishedTimeout")
	secs("nf_conntrack_tcp_timeout_close_wait", c.TCPCloseWaitTimeout, "tcpCloseWaitTimeout")
	if c.TCPBeLiberal {
		out = append(out, Sysctl{Name: "nf_conntrack_tcp_be_liberal", Value: 1, Why: "tcpBeLiberal"})
	}
	secs("nf_conntrack_udp_timeout", c.UDPTimeout, "udpTimeout")
	secs("nf_conntrack_udp_timeout_stream", c.UDPStreamTimeout, "udpStreamTimeout")
	return out
}

// IntFiles reads and writes files that hold one integer (/proc/sys,
// /sys/module parameters): the kernel boundary of ApplySysctls.
type IntFiles interface {
	ReadInt(path string) (int, error)
	WriteInt(path string, v int) error
}

// ProcFiles is IntFiles on the real files. /proc/sys/net resolves in the
// network namespace of the calling thread.
type ProcFiles struct{}

// ReadInt implements IntFiles.
func (ProcFiles) ReadInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// WriteInt implements IntFiles. It opens the file for writing without
// creating it.
func (ProcFiles) WriteInt(path string, v int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(v))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Warning is a setting ApplySysctls could not make: Sysctl is its name under
// NetfilterSysctlDir, or "hashsize" for the hash table size.
type Warning struct {
	Sysctl string
	Text   string
}

func (w Warning) String() string { return w.Text }

// hashsizeName is the Warning.Sysctl of the hash size.
const hashsizeName = "hashsize"

// MachineWide reports whether the setting is one for the whole machine
// (nf_conntrack_max, the hash size), which no network namespace but the
// host's can write, rather than one of the namespace's own.
func (w Warning) MachineWide() bool {
	return w.Sysctl == "nf_conntrack_max" || w.Sysctl == hashsizeName
}

// ApplySysctls writes the sysctls of c, for a machine with cpus CPUs, where
// they differ from the current values, and raises the hash size to a
// quarter of nf_conntrack_max when it is smaller (as kube-proxy does), but
// only after nf_conntrack_max itself was written: inside a network namespace
// nf_conntrack_max is the host's and read-only, and so the machine-wide hash
// size is never touched from one.
//
// A setting that cannot be written is skipped: it costs one Warning
// (returned, in plan order) naming the sysctl, the value wanted and the
// reason, never a failure: a read-only nf_conntrack_max inside a network
// namespace is normal (kube-proxy needs --conntrack-max-per-core=0 there).
func ApplySysctls(files IntFiles, c SysctlConfig, cpus int, log klog.Logger) []Warning {
	var warnings []Warning
	for _, s := range c.Plan(cpus) {
		path := NetfilterSysctlDir + "/" + s.Name
		cur, err := files.ReadInt(path)
		if err != nil {
			warnings = append(warnings, Warning{s.Name, fmt.Sprintf("conntrack: %s not set to %d (%s): %s", s.Name, s.Value, s.Why, reason(err))})
			continue
		}
		if cur == s.Value {
			log.V(2).Info("Sysctl already set", "entry", s.Name, "value", s.Value)
			continue
		}
		if err := files.WriteInt(path, s.Value); err != nil {
			warnings = append(warnings, Warning{s.Name, fmt.Sprintf("conntrack: %s not set to %d (%s): %s; it stays %d", s.Name, s.Value, s.Why, reason(err), cur)})
			continue
		}
		log.Info("Set sysctl", "entry", s.Name, "value", s.Value, "was", cur)
		if s.Name == "nf_conntrack_max" {
			if w := raiseHashsize(files, s.Value, log); w != "" {
				warnings = append(warnings, Warning{hashsizeName, w})
			}
		}
	}
	return warnings
}

// raiseHashsize makes the hash table at least ctMax/4 buckets.
func raiseHashsize(files IntFiles, ctMax int, log klog.Logger) string {
	want := ctMax / 4
	cur, err := files.ReadInt(HashsizePath)
	if err != nil {
		return fmt.Sprintf("conntrack: hashsize not raised to %d (nf_conntrack_max %d / 4): %s", want, ctMax, reason(err))
	}
	if cur >= want {
		return ""
	}
	if err := files.WriteInt(HashsizePath, want); err != nil {
		return fmt.Sprintf("conntrack: hashsize not raised to %d (nf_conntrack_max %d / 4): %s; it stays %d", want, ctMax, reason(err), cur)
	}
	log.Info("Set conntrack hashsize", "hashsize", want, "was", cur)
	return ""
}

// reason says why a sysctl could not be read or written.
func reason(err error) string {
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return fmt.Sprintf("read-only here (%v; inside a network namespace nf_conntrack_max and the hash size are the host's)", err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("no such sysctl (%v; is the nf_conntrack module loaded?)", err)
	}
	return err.Error()
}

// OnlineCPUs counts the machine's online CPUs from
// /sys/devices/system/cpu/online ("0-3,6"), as kube-proxy prefers to
// runtime.NumCPU: the conntrack table serves the whole machine, while the
// process may be confined to fewer CPUs (kubernetes#99225). It falls back to
// runtime.NumCPU when the file is unreadable.
var OnlineCPUs = sync.OnceValue(func() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	if n, ok := countCPUList(strings.TrimSpace(string(b))); ok {
		return n
	}
	return runtime.NumCPU()
})

// countCPUList counts the CPUs of a kernel CPU list ("0-3,6,8-9").
func countCPUList(s string) (int, bool) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, false
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, false
			}
		}
		n += b - a + 1
	}
	return n, n > 0
}
