package difftest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	proc "github.com/svcnet/svcnet/internal/process"
)

// ServerOptions configures one DNS server process: CoreDNS or svcnet dns.
type ServerOptions struct {
	// Binary is the executable (CoreDNSBinary, SvcnetBinary).
	Binary string
	// Kubeconfig is the kubeconfig file of the apiserver both servers read.
	Kubeconfig string
	// Dir holds the server's log (NAME.log) and, for CoreDNS, its Corefile.
	Dir string
	// Port is the UDP and TCP port on 127.0.0.1 (FreePort).
	Port int
	// Zone is the cluster domain (default cluster.local); TTL the records' TTL
	// (default 30, kubeadm's).
	Zone string
	TTL  uint32
	// CPUs, when set, pins the process with `taskset -c CPUS` (all its threads:
	// taskset sets the affinity before exec).
	CPUs string
}

func (o ServerOptions) withDefaults() ServerOptions {
	if o.Zone == "" {
		o.Zone = "cluster.local"
	}
	if o.TTL == 0 {
		o.TTL = 30
	}
	return o
}

// Server is a running DNS server process. Addr is 127.0.0.1:port (UDP and TCP).
type Server struct {
	Name    string
	Addr    string
	LogPath string
	*proc.Process

	log *os.File
}

// Corefile returns the configuration StartCoreDNS runs CoreDNS with: kubeadm's
// kubernetes block (zone, in-addr.arpa, ip6.arpa; pods insecure; the TTL) with
// the kubeconfig, on 127.0.0.1:port, with only the errors plugin besides: no
// fallthrough, no forward, no cache, so every answer comes from the plugin. The
// server block serves those zones only, not kubeadm's ".": without forward, a
// name outside them then gets REFUSED from CoreDNS's server (as from svcnet
// without --upstream), where a "." block would answer SERVFAIL (no next plugin).
func Corefile(o ServerOptions) string {
	o = o.withDefaults()
	return fmt.Sprintf(`%[2]s:%[1]d in-addr.arpa:%[1]d ip6.arpa:%[1]d {
    bind 127.0.0.1
    errors
    kubernetes %[2]s in-addr.arpa ip6.arpa {
        kubeconfig %[3]s
        pods insecure
        ttl %[4]d
    }
}
`, o.Port, o.Zone, o.Kubeconfig, o.TTL)
}

// StartCoreDNS writes Corefile(o) into o.Dir and starts CoreDNS with it.
func StartCoreDNS(o ServerOptions) (*Server, error) {
	o = o.withDefaults()
	conf := filepath.Join(o.Dir, "Corefile")
	if err := os.WriteFile(conf, []byte(Corefile(o)), 0o644); err != nil {
		return nil, fmt.Errorf("coredns: write Corefile: %w", err)
	}
	return start("coredns", o, o.Binary, "-conf", conf)
}

// StartSvcnet starts `svcnet dns` on 127.0.0.1:o.Port, reading the apiserver of
// o.Kubeconfig, without a metrics server.
func StartSvcnet(o ServerOptions) (*Server, error) {
	o = o.withDefaults()
	return start("svcnet", o, o.Binary, "dns", "--kubeconfig", o.Kubeconfig,
		"--listen", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port)),
		"--metrics-bind-address", "", "--ttl", strconv.FormatUint(uint64(o.TTL), 10), "--zone", o.Zone)
}

func start(name string, o ServerOptions, argv ...string) (*Server, error) {
	if o.CPUs != "" {
		argv = append([]string{"taskset", "-c", o.CPUs}, argv...)
	}
	logPath := filepath.Join(o.Dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	fmt.Fprintf(f, "=== %s\n", strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	p, err := proc.Start(cmd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Server{Name: name, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port)), LogPath: logPath, Process: p, log: f}, nil
}

// Stop sends SIGTERM, SIGKILL after 5s, and closes the log. It is idempotent.
func (s *Server) Stop() error {
	err := s.Process.Stop(5*time.Second, 5*time.Second)
	if cerr := s.log.Close(); cerr != nil && !errors.Is(cerr, os.ErrClosed) && err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	return nil
}

// Tail returns the last n lines of the server's log.
func (s *Server) Tail(n int) string { return proc.LogTail(s.LogPath, n) }

// FreePort returns a port of 127.0.0.1 free for both UDP and TCP at the time of
// the call (another process may take it before the server binds it; the
// callers' readiness waits then fail naming the server).
func FreePort() (int, error) {
	var last error
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		l.Close()
		if err != nil {
			last = err
			continue
		}
		u.Close()
		return port, nil
	}
	return 0, fmt.Errorf("free port: no port free for both UDP and TCP in 20 tries: %w", last)
}
