package echo

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// DialFunc makes a connection; netns.Dialer(ns) gives one whose sockets live in
// a namespace. nil means a plain net.Dialer in the caller's namespace.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// DefaultTimeout bounds a client call whose ctx has no deadline.
const DefaultTimeout = 5 * time.Second

// maxBody bounds what the HTTP helpers read.
const maxBody = 1 << 20

// Get requests url (http://HOST:PORT/, the JSON path) with a fresh connection
// from dial and returns the parsed Reply. A status other than 200 or a body
// that is not a Reply is an error.
func Get(ctx context.Context, dial DialFunc, url string) (Reply, error) {
	body, err := GetText(ctx, dial, url)
	if err != nil {
		return Reply{}, err
	}
	var r Reply
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return Reply{}, fmt.Errorf("echo get %s: parse reply %q: %w", url, body, err)
	}
	return r, nil
}

// GetText requests url with a fresh connection from dial and returns the body
// of a 200 answer (e.g. /hostname, /clientip).
func GetText(ctx context.Context, dial DialFunc, url string) (string, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	tr := &http.Transport{DialContext: dialer(dial), DisableKeepAlives: true, Proxy: nil}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("echo get %s: %w", url, err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("echo get %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", fmt.Errorf("echo get %s: read body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("echo get %s: status %s: %q", url, resp.Status, b)
	}
	return string(b), nil
}

// UDP sends msg as one datagram to addr and returns the first datagram that
// comes back (no retransmission: a lost datagram is a timeout error).
func UDP(ctx context.Context, dial DialFunc, addr, msg string) (string, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	c, err := dialer(dial)(ctx, "udp", addr)
	if err != nil {
		return "", fmt.Errorf("echo udp %s: %w", addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", fmt.Errorf("echo udp %s: send: %w", addr, err)
	}
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	if err != nil {
		return "", fmt.Errorf("echo udp %s: receive: %w", addr, err)
	}
	return string(buf[:n]), nil
}

// TCPLine connects to addr, sends line and "\n", and returns the first line
// of the answer without its "\n" (a command's answer, or the line echoed).
func TCPLine(ctx context.Context, dial DialFunc, addr, line string) (string, error) {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	c, err := dialer(dial)(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("echo tcp %s: %w", addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", fmt.Errorf("echo tcp %s: send: %w", addr, err)
	}
	got, err := bufio.NewReader(io.LimitReader(c, maxBody)).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("echo tcp %s: receive: %w", addr, err)
	}
	return strings.TrimSuffix(got, "\n"), nil
}

func dialer(d DialFunc) DialFunc {
	if d != nil {
		return d
	}
	var nd net.Dialer
	return nd.DialContext
}

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}
