package healthcheck

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// loopbackListener is a Listener over real loopback sockets. A requested port
// is replaced by 0 (a free port) unless it is listed in passthrough, so tests
// can use fixed logical ports (30001, 10256) without colliding with anything;
// Addr maps a requested address to the one actually bound.
type loopbackListener struct {
	passthrough map[int]bool

	mu     sync.Mutex
	actual map[string]string // requested host:port -> bound host:port
	calls  []string          // network + " " + requested address, in order
}

func newLoopbackListener(passthrough ...int) *loopbackListener {
	l := &loopbackListener{passthrough: map[int]bool{}, actual: map[string]string{}}
	for _, p := range passthrough {
		l.passthrough[p] = true
	}
	return l
}

func (l *loopbackListener) Listen(ctx context.Context, network, address string) (net.Listener, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, err
	}
	bind := address
	if !l.passthrough[port] {
		bind = net.JoinHostPort(host, "0")
	}
	l.mu.Lock()
	l.calls = append(l.calls, network+" "+address)
	l.mu.Unlock()
	ln, err := StdListener{}.Listen(ctx, network, bind)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.actual[address] = ln.Addr().String()
	l.mu.Unlock()
	return ln, nil
}

// Addr returns the bound address for a requested one, or "" if never bound.
func (l *loopbackListener) Addr(requested string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.actual[requested]
}

func (l *loopbackListener) Calls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// waitAddr polls until requested has been bound and returns the bound address.
func (l *loopbackListener) waitAddr(t *testing.T, requested string) string {
	t.Helper()
	var got string
	eventually(t, 5*time.Second, func() error {
		if got = l.Addr(requested); got == "" {
			return fmt.Errorf("%s not bound yet", requested)
		}
		return nil
	})
	return got
}

// eventually polls f every 10ms until it returns nil, failing the test with
// f's last error after timeout.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// response is what a test checks of an HTTP answer.
type response struct {
	code    int
	headers http.Header
	body    string
}

var testClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}

// get fetches http://addr/path.
func get(addr, path string) (response, error) {
	resp, err := testClient.Get("http://" + addr + path)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{code: resp.StatusCode, headers: resp.Header, body: string(body)}, nil
}

func mustGet(t *testing.T, addr, path string) response {
	t.Helper()
	r, err := get(addr, path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", addr, path, err)
	}
	return r
}

// waitRefused polls until nothing accepts connections at addr.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	eventually(t, 5*time.Second, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return nil
		}
		c.Close()
		return fmt.Errorf("%s still accepts connections", addr)
	})
}

// runInBackground runs run(ctx) in a goroutine until the test ends (or the
// returned stop is called) and checks it returned nil.
func runInBackground(t *testing.T, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
