package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/svcnet/svcnet/internal/echo"
)

// Hit is the outcome of one request: the reply of the pod that answered, or the
// error (refused, timed out, ...).
type Hit struct {
	Reply echo.Reply
	Err   error
}

// ClientIP is the client address the pod saw, without the port.
func (h Hit) ClientIP() string {
	host, _, err := net.SplitHostPort(h.Reply.Client)
	if err != nil {
		return h.Reply.Client
	}
	return host
}

// Curl sends count HTTP GETs, each on a new connection, from the place to url and
// returns what each met. Each request is bounded by timeout. A host name in
// url is resolved by the place, per request (see Dialer); a name it cannot
// resolve ends Curl with that *ResolveError and the hits before it.
func (l *Lab) Curl(ctx context.Context, from Place, url string, count int, timeout time.Duration) ([]Hit, error) {
	dial, done, err := l.Dialer(from)
	if err != nil {
		return nil, err
	}
	defer done()
	hits := make([]Hit, 0, count)
	for i := 0; i < count; i++ {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		r, err := echo.Get(rctx, dial, url)
		cancel()
		if re := (*ResolveError)(nil); errors.As(err, &re) {
			return hits, re
		}
		hits = append(hits, Hit{Reply: r, Err: err})
		if ctx.Err() != nil {
			return hits, ctx.Err()
		}
	}
	return hits, nil
}

// PrintHits writes one line per request and, for more than one, a tally by pod and
// by the client address the pods saw. It returns the number of failed requests.
func PrintHits(w io.Writer, url string, hits []Hit) int {
	failed := 0
	byPod, byClient := map[string]int{}, map[string]int{}
	for _, h := range hits {
		if h.Err != nil {
			failed++
			fmt.Fprintf(w, "GET %s: %s\n", url, describe(h.Err))
			continue
		}
		byPod[h.Reply.Pod+" on "+h.Reply.Node]++
		byClient[h.ClientIP()]++
		fmt.Fprintf(w, "GET %s: answered by pod %s (%s on %s); it saw the client as %s\n",
			url, h.Reply.Pod, h.Reply.PodIP, h.Reply.Node, h.Reply.Client)
	}
	if len(hits) > 1 {
		fmt.Fprintf(w, "%d requests: %d answered, %d failed\n", len(hits), len(hits)-failed, failed)
		fmt.Fprintf(w, "  answered by: %s\n", tally(byPod))
		fmt.Fprintf(w, "  client seen: %s\n", tally(byClient))
	}
	return failed
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

// describe says what a failed request met, in a network engineer's words.
func describe(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded), os.IsTimeout(err):
		return "no answer (timed out)"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	}
	return err.Error()
}
