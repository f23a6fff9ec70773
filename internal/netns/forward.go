package netns

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Forward relays TCP connections accepted on listen (an address inside ns,
// e.g. "127.0.0.1:0") to dial, which is reached from the caller's namespace.
// It lets a process in a namespace reach a server on the host's loopback (a
// test's kube-apiserver) without any interface, address or route outside the
// namespace. It returns the listening address; the relay and every relayed
// connection stop when ctx ends.
func Forward(ctx context.Context, ns *NS, listen, dial string) (string, error) {
	l, err := Listen(ns, "tcp", listen)
	if err != nil {
		return "", fmt.Errorf("forward: %w", err)
	}
	var wg sync.WaitGroup
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	go func() {
		defer wg.Wait()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				relay(ctx, c, dial)
			}()
		}
	}()
	return l.Addr().String(), nil
}

func relay(ctx context.Context, in net.Conn, dial string) {
	defer in.Close()
	d := net.Dialer{Timeout: 10 * time.Second}
	out, err := d.DialContext(ctx, "tcp", dial)
	if err != nil {
		return
	}
	defer out.Close()
	stop := context.AfterFunc(ctx, func() { in.Close(); out.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
}
