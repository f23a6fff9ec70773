package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/echo"
)

// Hit is the outcome of one request: the reply of the pod that answered, or the
// error (refused, timed out, ...). Addr is the address it went to (a name
// resolved), "" when none was dialed.
type Hit struct {
	Reply echo.Reply
	Err   error
	Addr  string
}

// ClientIP is the client address the pod saw, without the port.
func (h Hit) ClientIP() string {
	host, _, err := net.SplitHostPort(h.Reply.Client)
	if err != nil {
		return h.Reply.Client
	}
	return host
}

// Curl sends count requests from the place to url and returns what each
// met, each bounded by timeout: for http://, an HTTP GET on a new
// connection; for udp://HOST:PORT, one datagram "whoami" (the echo
// servers' line protocol, answered with the same Reply) from a new socket.
// A host name in url is resolved by the place, per request (see Dialer); a
// name it cannot resolve ends Curl with that *ResolveError and the hits
// before it.
func (l *Lab) Curl(ctx context.Context, from Place, target string, count int, timeout time.Duration) ([]Hit, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("curl %s: %w", target, err)
	}
	var ask func(context.Context, echo.DialFunc) (echo.Reply, error)
	switch u.Scheme {
	case "http":
		ask = func(ctx context.Context, dial echo.DialFunc) (echo.Reply, error) { return echo.Get(ctx, dial, target) }
	case "udp":
		ask = func(ctx context.Context, dial echo.DialFunc) (echo.Reply, error) {
			got, err := echo.UDP(ctx, dial, u.Host, "whoami")
			if err != nil {
				return echo.Reply{}, err
			}
			var r echo.Reply
			if err := json.Unmarshal([]byte(got), &r); err != nil {
				return echo.Reply{}, fmt.Errorf("udp %s: the answer %q is not an echo server's whoami: %w", u.Host, got, err)
			}
			return r, nil
		}
	default:
		return nil, fmt.Errorf("curl %s: scheme %q: lab curl speaks http:// and udp://", target, u.Scheme)
	}
	var addr string
	dial, done, err := l.dialer(from, func(a string) { addr = a })
	if err != nil {
		return nil, err
	}
	defer done()
	hits := make([]Hit, 0, count)
	for i := 0; i < count; i++ {
		addr = ""
		rctx, cancel := context.WithTimeout(ctx, timeout)
		r, err := ask(rctx, echo.DialFunc(dial))
		cancel()
		if re := (*ResolveError)(nil); errors.As(err, &re) {
			return hits, re
		}
		hits = append(hits, Hit{Reply: r, Err: err, Addr: addr})
		if ctx.Err() != nil {
			return hits, ctx.Err()
		}
	}
	return hits, nil
}

// PrintHits writes one line per request and, for more than one, a tally by pod and
// by the client address the pods saw. It returns the number of failed requests.
func PrintHits(w io.Writer, target string, hits []Hit) int {
	verb := "GET"
	if strings.HasPrefix(target, "udp://") {
		verb = "UDP"
	}
	failed := 0
	byPod, byClient := map[string]int{}, map[string]int{}
	for _, h := range hits {
		if h.Err != nil {
			failed++
			fmt.Fprintf(w, "%s %s: %s\n", verb, target, failureText(h.Err))
			continue
		}
		byPod[h.Reply.Pod+" on "+h.Reply.Node]++
		byClient[h.ClientIP()]++
		fmt.Fprintf(w, "%s %s: answered by pod %s (%s on %s); it saw the client as %s\n",
			verb, target, h.Reply.Pod, h.Reply.PodIP, h.Reply.Node, h.Reply.Client)
	}
	if len(hits) > 1 {
		fmt.Fprintf(w, "%d requests: %d answered, %d failed\n", len(hits), len(hits)-failed, failed)
		fmt.Fprintf(w, "  answered by: %s\n", tally(byPod))
		fmt.Fprintf(w, "  client seen: %s\n", tally(byClient))
	}
	return failed
}

// TraceHint is the command that traces the first failed request's packet
// (from, as given to lab curl, to the address it went to) with --verify,
// for the lab named lab ("" the default): "" when no request failed after
// being sent.
func TraceHint(lab, from, target string, hits []Hit) string {
	for _, h := range hits {
		if h.Err == nil || h.Addr == "" {
			continue
		}
		cmd := "svcnet lab trace"
		if lab != "" {
			cmd += " --name " + lab
		}
		cmd += " " + from + " " + h.Addr
		if strings.HasPrefix(target, "udp://") {
			cmd += " --proto udp"
		}
		return cmd + " --verify"
	}
	return ""
}

// tally renders counts as "a 5, b 3", largest first, then by name.
func tally(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return m[b] - m[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// HTTPGet GETs url from the place on a new connection (bounded by 2s) and returns
// the status code and up to 4 KiB of the body.
func (l *Lab) HTTPGet(ctx context.Context, from Place, url string) (int, string, error) {
	dial, done, err := l.Dialer(from)
	if err != nil {
		return 0, "", err
	}
	defer done()
	hc := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}, Timeout: 2 * time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), nil
}

// failureText says what a failed request met, in a network engineer's words.
func failureText(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (a TCP reset to the SYN, or an ICMP port unreachable)"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, context.DeadlineExceeded), os.IsTimeout(err):
		return "no answer (timed out)"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable (an ICMP host or network unreachable, or no route)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "closed without an answer"
	}
	return err.Error()
}
