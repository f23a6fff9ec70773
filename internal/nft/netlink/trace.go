package netlink

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svcnet/svcnet/internal/netns"
)

// TraceSocket receives the nf_tables trace events (NFT_MSG_TRACE) of one
// network namespace: a NETLINK_NETFILTER socket created in the namespace and
// joined to the multicast group NFNLGRP_NFTRACE. Events are queued in the
// socket from ListenTrace on. Package nftrace decodes them.
//
// Contract: a TraceSocket is not for concurrent use.
type TraceSocket struct {
	sock
	out []TraceMsg
}

// TraceMsg is one NFT_MSG_TRACE message: the nfgenmsg family (the traced
// table's NFPROTO_*) and the undecoded NFTA_TRACE_* attributes (ParseAttrs).
type TraceMsg struct {
	Family uint8
	Attrs  []byte
}

// ListenTrace subscribes to the trace events of ns with a receive buffer of
// rcvBuf bytes.
func ListenTrace(ns *netns.NS, rcvBuf int) (*TraceSocket, error) {
	if ns == nil {
		return nil, errors.New("no network namespace given")
	}
	fd, err := openSocket(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := setRcvBuf(fd, rcvBuf); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("receive buffer: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, unix.NFNLGRP_NFTRACE); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("join NFNLGRP_NFTRACE: %w", err)
	}
	return &TraceSocket{sock: sock{fd: fd, rbuf: make([]byte, readBuf)}}, nil
}

// Receive waits up to wait for one datagram and returns its trace messages
// (valid until the next Receive); none when nothing came. An error wrapping
// unix.ENOBUFS reports that the kernel dropped events because the receive
// buffer was full.
func (s *TraceSocket) Receive(wait time.Duration) ([]TraceMsg, error) {
	fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
	k, err := unix.Poll(fds, int((wait+time.Millisecond-1)/time.Millisecond))
	if err == unix.EINTR || k == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("poll: %w", err)
	}
	msgs, err := s.recv(true)
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	s.out, err = traceMsgs(msgs, s.out[:0])
	return s.out, err
}

// Close leaves the group and releases the socket.
func (s *TraceSocket) Close() error {
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

// TraceMessages returns the trace messages of one datagram, skipping
// messages of other types.
func TraceMessages(datagram []byte) ([]TraceMsg, error) {
	msgs, err := parseMsgs(datagram, nil)
	if err != nil {
		return nil, err
	}
	return traceMsgs(msgs, nil)
}

func traceMsgs(msgs []nlMsg, out []TraceMsg) ([]TraceMsg, error) {
	for _, m := range msgs {
		if m.typ != unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_TRACE {
			continue
		}
		if len(m.data) < nfgenLen {
			return out, errors.New("trace message: truncated nfgenmsg")
		}
		out = append(out, TraceMsg{Family: m.data[0], Attrs: m.data[nfgenLen:]})
	}
	return out, nil
}

// Attr is one netlink attribute: its type without the nested and byte-order
// flags, and its payload.
type Attr struct {
	Type uint16
	Data []byte
}

// ParseAttrs splits b into attributes; a truncated or malformed attribute is
// an error.
func ParseAttrs(b []byte) ([]Attr, error) {
	var out []Attr
	a := newAttrs(b)
	for a.next() {
		out = append(out, Attr{Type: a.typ, Data: a.val})
	}
	if a.err != nil {
		return out, fmt.Errorf("netlink attribute: %w", a.err)
	}
	return out, nil
}

// String returns a NUL-terminated string attribute's value.
func (a Attr) String() string { return (&attrs{val: a.Data}).str() }
