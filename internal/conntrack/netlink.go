//go:build linux

package conntrack

import (
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink/nl"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/ipfamily"
	"github.com/svcnet/svcnet/internal/netns"
)

// Netlink is the Table of one network namespace, over a ctnetlink socket.
// Its methods may be called from any goroutine, concurrently; Close must not
// run concurrently with them.
type Netlink struct {
	sockets map[int]*nl.SocketHandle
}

var _ Table = (*Netlink)(nil)

const (
	// ioTimeout bounds every send and receive on the socket, so a call can
	// never hang (a dump of a large table is many short receives).
	ioTimeout = 10 * time.Second
	// dumpAttempts bounds the retries of a dump the kernel interrupted
	// because the table changed while it was being read.
	dumpAttempts = 3
)

// NewNetlink opens a ctnetlink socket in the network namespace of the
// calling thread. To work on another namespace call it inside netns.NS.Do,
// or use NewNetlinkIn. The socket stays bound to that namespace for its life.
func NewNetlink() (*Netlink, error) {
	s, err := nl.GetNetlinkSocketAt(vnetns.None(), vnetns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("open ctnetlink socket: %w", err)
	}
	tv := unix.NsecToTimeval(ioTimeout.Nanoseconds())
	if err := errors.Join(s.SetSendTimeout(&tv), s.SetReceiveTimeout(&tv)); err != nil {
		s.Close()
		return nil, fmt.Errorf("ctnetlink socket timeouts: %w", err)
	}
	return &Netlink{sockets: map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: {Socket: s}}}, nil
}

// NewNetlinkIn opens a ctnetlink socket in namespace ns (entered through
// internal/netns on a throwaway thread; the caller's thread never moves).
func NewNetlinkIn(ns *netns.NS) (*Netlink, error) {
	var n *Netlink
	err := ns.Do(func() error {
		var err error
		n, err = NewNetlink()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("conntrack in netns %s: %w", ns.Path(), err)
	}
	return n, nil
}

// Close closes the socket.
func (n *Netlink) Close() error {
	for _, sh := range n.sockets {
		sh.Close()
	}
	return nil
}

func (n *Netlink) request(op, flags int, fam ipfamily.Family) *nl.NetlinkRequest {
	req := &nl.NetlinkRequest{
		NlMsghdr: unix.NlMsghdr{
			Len:   unix.SizeofNlMsghdr,
			Type:  ctMsgType(op),
			Flags: unix.NLM_F_REQUEST | uint16(flags),
		},
		Sockets: n.sockets,
	}
	req.AddData(&nl.Nfgenmsg{NfgenFamily: fam.Proto(), Version: nl.NFNETLINK_V0})
	return req
}

func checkFamily(fam ipfamily.Family) error {
	if fam != ipfamily.IPv4 && fam != ipfamily.IPv6 {
		return fmt.Errorf("conntrack: unknown %s", fam)
	}
	return nil
}

// List implements Table: one dump of the family's conntrack table, retried
// up to dumpAttempts times while the kernel reports it interrupted.
// Entries that fail to parse are skipped and reported as ErrPartial.
func (n *Netlink) List(fam ipfamily.Family) ([]Flow, error) {
	if err := checkFamily(fam); err != nil {
		return nil, err
	}
	var (
		flows []Flow
		bad   int
		err   error
	)
	for range dumpAttempts {
		flows, bad = flows[:0], 0
		err = n.request(nl.IPCTNL_MSG_CT_GET, unix.NLM_F_DUMP, fam).ExecuteIter(unix.NETLINK_NETFILTER, 0, func(msg []byte) bool {
			if f, perr := parseFlow(msg); perr != nil {
				bad++
			} else {
				flows = append(flows, f)
			}
			return true
		})
		if !errors.Is(err, nl.ErrDumpInterrupted) {
			break
		}
	}
	switch {
	case errors.Is(err, nl.ErrDumpInterrupted):
		return flows, fmt.Errorf("list %s conntrack after %d attempts: %w", fam, dumpAttempts, ErrPartial)
	case err != nil:
		return nil, fmt.Errorf("list %s conntrack: %w", fam, err)
	case bad > 0:
		return flows, fmt.Errorf("list %s conntrack: %d entries unparseable: %w", fam, bad, ErrPartial)
	}
	return flows, nil
}

// Delete implements Table: one IPCTNL_MSG_CT_DELETE per flow, by original
// tuple, zone and ID. It goes on after a failure and returns the first
// error with the number of failures.
func (n *Netlink) Delete(fam ipfamily.Family, flows []Flow) (int, error) {
	if err := checkFamily(fam); err != nil {
		return 0, err
	}
	deleted, failed := 0, 0
	var firstErr error
	for _, f := range flows {
		attrs, err := deleteAttrs(fam, f)
		if err == nil {
			req := n.request(nl.IPCTNL_MSG_CT_DELETE, unix.NLM_F_ACK, fam)
			for _, a := range attrs {
				req.AddData(a)
			}
			_, err = req.Execute(unix.NETLINK_NETFILTER, 0)
			switch {
			case err == nil:
				deleted++
				continue
			case errors.Is(err, unix.ENOENT):
				continue // expired, or replaced by a new entry since List
			}
			err = fmt.Errorf("delete conntrack flow %s: %w", f, err)
		}
		failed++
		if firstErr == nil {
			firstErr = err
		}
	}
	if failed > 1 {
		return deleted, fmt.Errorf("%w (%d of %d deletes failed)", firstErr, failed, len(flows))
	}
	return deleted, firstErr
}
