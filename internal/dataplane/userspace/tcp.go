package userspace

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// acceptLoop serves pp's listener until it closes. Other errors (out of
// file descriptors, say) pause it with a growing delay, as net/http does.
func (p *Proxy) acceptLoop(pp *proxyPort) {
	var pause time.Duration
	for {
		c, err := pp.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || !p.backOff(pp, &pause, err) {
				return // Update removed the port, or Close
			}
			continue
		}
		pause = 0
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serveTCP(pp, c)
		}()
	}
}

// serveTCP connects client to an endpoint of pp and splices the two until
// both directions have ended. Without a reachable endpoint the client's
// connection is reset at once.
func (p *Proxy) serveTCP(pp *proxyPort, client net.Conn) {
	defer p.untrack(client)
	from := unmapped(client.RemoteAddr())
	up, ep, err := p.connect(pp, "tcp", from)
	if err != nil {
		p.stats.refused.Add(1)
		p.cfg.Log.V(1).Info("refused", "port", pp.key.String(), "client", client.RemoteAddr().String(), "err", err)
		if tc, ok := client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as the kernel's reject answers
		}
		return
	}
	p.stats.connections.Add(1)
	defer pp.bal.released(ep)
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	splice(client, up)
}

// splice copies a to b and b to a until both directions end. A direction
// that ends with EOF half-closes its destination (CloseWrite), so the other
// direction runs on; one that fails closes both connections. Both are
// closed when it returns.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			a.Close()
			b.Close()
		})
	}
	oneWay := func(dst, src net.Conn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err != nil {
			closeBoth()
			return
		}
		if hc, ok := dst.(interface{ CloseWrite() error }); ok {
			if hc.CloseWrite() == nil {
				return
			}
		}
		closeBoth() // no half-close on this connection: end it whole
	}
	wg.Add(2)
	go oneWay(b, a)
	go oneWay(a, b)
	wg.Wait()
	closeBoth()
}
