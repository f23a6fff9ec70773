package httpserve

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestUntilServesThenStopsOnCancel(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- Until(ctx, New(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })), l)
	}()
	resp, err := http.Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Until after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Until did not return after cancel")
	}
	if _, err := net.Dial("tcp", l.Addr().String()); err == nil {
		t.Fatal("still accepting after cancel")
	}
}

func TestUntilReportsServeFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close() // Serve fails at once on a closed listener
	if err := Until(context.Background(), New(http.NotFoundHandler()), l); err == nil {
		t.Fatal("want the Serve error")
	}
}

func TestCheckOK(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/notready", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not synced yet", http.StatusServiceUnavailable)
	})
	errc := make(chan error, 1)
	go func() { errc <- Until(ctx, New(mux), l) }()
	defer func() { cancel(); <-errc }()
	hc := &http.Client{Timeout: 5 * time.Second}
	base := "http://" + l.Addr().String()
	if err := CheckOK(ctx, hc, base+"/healthz"); err != nil {
		t.Errorf("/healthz: %v", err)
	}
	err = CheckOK(ctx, hc, base+"/notready")
	if want := "GET " + base + "/notready: HTTP 503: not synced yet"; err == nil || err.Error() != want {
		t.Errorf("/notready: %v, want %q", err, want)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if err := CheckOK(ctx, hc, "http://"+closed.Addr().String()+"/healthz"); err == nil {
		t.Error("a closed port: want the dial error")
	}
}
