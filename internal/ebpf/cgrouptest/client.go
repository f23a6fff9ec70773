package cgrouptest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary re-executed with EnvClient set is a client process that a
// test starts inside its cgroup and namespace (Client; the test process
// itself stays outside the cgroup). It runs one operation, prints JSON lines
// on stdout and exits. A package using it calls RunClientIfAsked first thing
// in its TestMain.
//
//	dial tcp|udp ADDR:PORT N   N connects, one Attempt line each
//	bench ADDR:PORT ADDR:PORT N  N connects to each, interleaved, one BenchResult
const EnvClient = "SVCNET_CGROUP_CLIENT"

// Attempt is one connect of the dial operation.
type Attempt struct {
	Peer   string `json:"peer,omitempty"`   // getpeername after connect
	Server string `json:"server,omitempty"` // the name the server answered with
	Echo   bool   `json:"echo,omitempty"`   // the server echoed what was sent
	Errno  string `json:"errno,omitempty"`  // connect's error
	Err    string `json:"err,omitempty"`    // any other failure
	Micros int64  `json:"us"`               // how long connect took
}

// BenchResult is the bench operation's figures: mean ns per connect to each
// address (socket, connect, close with an RST), and the median over rounds of
// the difference of the two means in a round, which a burst of load on the
// machine moves less than the difference of the overall means.
type BenchResult struct {
	NsPerConnect [2]float64 `json:"ns_per_connect"`
	MedianDiffNs float64    `json:"median_diff_ns"`
}

// IOTimeout bounds each blocking socket call of a client and server.
const IOTimeout = 3 * time.Second

// RunClientIfAsked runs the client operation in os.Args and exits when the
// process was started as a client (EnvClient set); otherwise it returns.
func RunClientIfAsked() {
	if os.Getenv(EnvClient) != "" {
		os.Exit(runClient(os.Args[1:]))
	}
}

func runClient(args []string) int {
	enc := json.NewEncoder(os.Stdout)
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "socklb client:", err)
		return 2
	}
	// each encodes attempt() n times, n from the operation's last argument.
	each := func(n int, attempt func() Attempt) int {
		for range n {
			if err := enc.Encode(attempt()); err != nil {
				return fail(err)
			}
		}
		return 0
	}
	switch {
	case len(args) == 4 && args[0] == "dial":
		ap, n, err := addrCount(args[2], args[3])
		if err != nil {
			return fail(fmt.Errorf("dial %q: %w", args[1:], err))
		}
		return each(n, func() Attempt { return dial(args[1], ap) })
	case len(args) == 3 && args[0] == "sendto":
		ap, n, err := addrCount(args[1], args[2])
		if err != nil {
			return fail(fmt.Errorf("sendto %q: %w", args[1:], err))
		}
		return each(n, func() Attempt { return sendTo(ap) })
	case len(args) == 4 && args[0] == "hold":
		ap, n, err := addrCount(args[1], args[2])
		tries, terr := strconv.Atoi(args[3])
		if err != nil || terr != nil || tries < 1 {
			return fail(fmt.Errorf("hold %q: bad address, count or tries", args[1:]))
		}
		if err := hold(enc, ap, n, tries); err != nil {
			return fail(err)
		}
		return 0
	case len(args) == 4 && args[0] == "bench":
		b, berr := netip.ParseAddrPort(args[2])
		a, n, err := addrCount(args[1], args[3])
		if err != nil || berr != nil || n <= 0 {
			return fail(fmt.Errorf("bench %q: bad addresses or count", args[1:]))
		}
		r, err := bench([2]netip.AddrPort{a, b}, n)
		if err != nil {
			return fail(err)
		}
		if err := enc.Encode(r); err != nil {
			return fail(err)
		}
		return 0
	}
	return fail(fmt.Errorf("usage: dial tcp|udp ADDR:PORT N | sendto ADDR:PORT N | hold ADDR:PORT N TRIES | bench ADDR:PORT ADDR:PORT N; got %q", args))
}

// addrCount parses an operation's ADDR:PORT and N.
func addrCount(addr, count string) (netip.AddrPort, int, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return ap, 0, fmt.Errorf("bad address: %w", err)
	}
	n, err := strconv.Atoi(count)
	if err != nil {
		return ap, 0, fmt.Errorf("bad count: %w", err)
	}
	return ap, n, nil
}

// socket opens a socket of network ("tcp" or "udp") in the family of to
// (IPv6 for an IPv4-mapped address), with IOTimeout on send (which bounds a
// blocking connect) and receive.
func socket(network string, to netip.AddrPort) (int, error) {
	typ := unix.SOCK_STREAM
	if network == "udp" {
		typ = unix.SOCK_DGRAM
	} else if network != "tcp" {
		return -1, fmt.Errorf("network %q", network)
	}
	family := unix.AF_INET6
	if to.Addr().Is4() {
		family = unix.AF_INET
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket: %w", err)
	}
	tv := unix.NsecToTimeval(IOTimeout.Nanoseconds())
	for _, opt := range []int{unix.SO_SNDTIMEO, unix.SO_RCVTIMEO} {
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("setsockopt: %w", err)
		}
	}
	return fd, nil
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	}
	return &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
}

// dial connects once with blocking system calls, so a refusal by the connect
// program shows as connect's own error, then sends "ping\n" and reads the
// server's name and the echo: TCP servers send their name first, UDP servers
// answer a datagram with their name and the datagram.
func dial(network string, to netip.AddrPort) Attempt {
	var a Attempt
	fd, err := socket(network, to)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	defer unix.Close(fd)
	start := time.Now()
	err = unix.Connect(fd, sockaddr(to))
	a.Micros = time.Since(start).Microseconds()
	if errno, ok := err.(unix.Errno); ok {
		a.Errno = unix.ErrnoName(errno)
		return a
	} else if err != nil {
		a.Err = err.Error()
		return a
	}
	sa, err := unix.Getpeername(fd)
	if err != nil {
		a.Err = "getpeername: " + err.Error()
		return a
	}
	a.Peer = addrPortOf(sa)
	if _, err := unix.Write(fd, []byte("ping\n")); err != nil {
		a.Err = "write: " + err.Error()
		return a
	}
	// The answer is two lines: the server's name, then the echo.
	var got []byte
	buf := make([]byte, 256)
	for len(got) < 256 && strings.Count(string(got), "\n") < 2 {
		n, err := unix.Read(fd, buf)
		if err != nil || n == 0 {
			a.Err = fmt.Sprintf("read: %v (got %q)", err, got)
			return a
		}
		got = append(got, buf[:n]...)
	}
	name, rest, _ := strings.Cut(string(got), "\n")
	a.Server, a.Echo = name, rest == "ping\n"
	return a
}

// hold makes n TCP connections to to one after the other, each socket
// connecting up to tries times while it is refused, writing each one's
// attempt line as it is made, keeps them open until stdin ends, then closes
// them.
func hold(enc *json.Encoder, to netip.AddrPort, n, tries int) error {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for range n {
		a, fd := connectKeep(to, tries)
		if fd >= 0 {
			fds = append(fds, fd)
		}
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
	_, err := io.Copy(io.Discard, os.Stdin)
	return err
}

// connectKeep is dial's connect, getpeername and greeting read over TCP,
// returning the socket open (-1 on failure). A refused connect is tried
// again on the same socket, up to tries connects in all.
func connectKeep(to netip.AddrPort, tries int) (Attempt, int) {
	var a Attempt
	fd, err := socket("tcp", to)
	if err != nil {
		a.Err = err.Error()
		return a, -1
	}
	err = unix.Connect(fd, sockaddr(to))
	for try := 1; try < tries && errors.Is(err, unix.ECONNREFUSED); try++ {
		err = unix.Connect(fd, sockaddr(to))
	}
	if err != nil {
		unix.Close(fd)
		a.Err = err.Error()
		return a, -1
	}
	if sa, err := unix.Getpeername(fd); err == nil {
		a.Peer = addrPortOf(sa)
	}
	buf := make([]byte, 64)
	n, err := unix.Read(fd, buf)
	if err != nil || n == 0 {
		unix.Close(fd)
		a.Err = fmt.Sprintf("read: %v", err)
		return a, -1
	}
	a.Server, _, _ = strings.Cut(string(buf[:n]), "\n")
	return a, fd
}

// sendTo sends "ping\n" from an unconnected UDP socket with sendto, and
// reads the answer with recvfrom: the server's name, then the echo.
func sendTo(to netip.AddrPort) Attempt {
	var a Attempt
	fd, err := socket("udp", to)
	if err != nil {
		a.Err = err.Error()
		return a
	}
	defer unix.Close(fd)
	start := time.Now()
	err = unix.Sendto(fd, []byte("ping\n"), 0, sockaddr(to))
	a.Micros = time.Since(start).Microseconds()
	if errno, ok := err.(unix.Errno); ok {
		a.Errno = unix.ErrnoName(errno)
		return a
	} else if err != nil {
		a.Err = err.Error()
		return a
	}
	buf := make([]byte, 256)
	n, from, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		a.Err = "recvfrom: " + err.Error()
		return a
	}
	a.Peer = addrPortOf(from)
	name, rest, _ := strings.Cut(string(buf[:n]), "\n")
	a.Server, a.Echo = name, rest == "ping\n"
	return a
}

// addrPortOf renders an IPv4 or IPv6 socket address ("" for others).
func addrPortOf(sa unix.Sockaddr) string {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)).String()
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port)).String()
	}
	return ""
}

// bench times n connects to each of to, in interleaved rounds so that both
// see the same machine, alternating which goes first. Each socket is closed with an RST (SO_LINGER 0), so
// no TIME_WAIT piles up and ports do not run out.
func bench(to [2]netip.AddrPort, n int) (BenchResult, error) {
	const round = 200
	var total [2]time.Duration
	var diffs []float64
	for done := 0; done < n; done += round {
		k := min(round, n-done)
		var took [2]time.Duration
		// Alternate which address goes first, so that neither gains from
		// its place in the round.
		for j := range to {
			i := (j + done/round) % 2
			ap := to[i]
			start := time.Now()
			for range k {
				if err := connectOnce(ap); err != nil {
					return BenchResult{}, fmt.Errorf("connect %v: %w", ap, err)
				}
			}
			took[i] = time.Since(start)
			total[i] += took[i]
		}
		diffs = append(diffs, float64((took[0]-took[1]).Nanoseconds())/float64(k))
	}
	var r BenchResult
	for i := range total {
		r.NsPerConnect[i] = float64(total[i].Nanoseconds()) / float64(n)
	}
	slices.Sort(diffs)
	r.MedianDiffNs = diffs[len(diffs)/2]
	return r, nil
}

func connectOnce(to netip.AddrPort) error {
	fd, err := socket("tcp", to)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		return fmt.Errorf("setsockopt: %w", err)
	}
	return unix.Connect(fd, sockaddr(to))
}
