package announce

import (
	"errors"
	"net/netip"
)

// verdict is what the responder made of one received frame.
type verdict int

const (
	answered     verdict = iota
	malformed            // not decodable, or invalid per the RFC
	notRequest           // an ARP reply, or not a neighbour solicitation
	notToUs              // Ethernet destination neither ours nor broadcast/the right group
	fromSelf             // sent with our own MAC (a loop)
	notOwned             // target IP not in the owned set
	announcement         // someone else announces an owned IP (SPA == TPA): a conflict
)

var verdictNames = [...]string{"answered", "malformed", "not a request", "not addressed to us", "from self", "not owned", "announcement by another host"}

func (v verdict) String() string { return verdictNames[v] }

// answerARP decides the answer to one received ARP frame for an interface
// with MAC self. It answers a request only when its target is owned and the
// frame is broadcast or addressed to self (Linux sends unicast requests to
// refresh a cache entry); ARP probes (sender 0.0.0.0) are answered, like Linux
// does for its own addresses, so that a host probing an owned IP learns it is
// taken. A request with SPA == TPA is another host announcing that IP; it is
// reported as a conflict and not answered (fighting over it is the speaker's
// business). The returned packet is meaningful only when the verdict is
// answered.
func answerARP(frame []byte, self mac, owned func(netip.Addr) bool) (req, reply arpPacket, v verdict) {
	req, err := decodeARP(frame)
	switch {
	case err != nil:
		return req, reply, malformed
	case req.Op != arpOpRequest:
		return req, reply, notRequest
	case req.Eth.Dst != broadcastMAC && req.Eth.Dst != self:
		return req, reply, notToUs
	case req.SHA == self || req.Eth.Src == self:
		return req, reply, fromSelf
	case !owned(req.TPA):
		return req, reply, notOwned
	case req.SPA == req.TPA:
		return req, reply, announcement
	}
	return req, arpReply(req, self), answered
}

// answerNS decides the answer to one received IPv6 frame for an interface with
// MAC self. It answers a valid neighbour solicitation only when its target is
// owned and the frame is addressed to self or to the target's solicited-node
// group (on the wire and in the IPv6 header: unicast NUD probes go to the
// target itself). DAD probes for an owned target are answered (see
// solicitedNA).
func answerNS(frame []byte, self mac, owned func(netip.Addr) bool) (ns nsPacket, na naPacket, v verdict) {
	ns, err := decodeNS(frame)
	switch {
	case errors.Is(err, errNotNS):
		return ns, na, notRequest
	case err != nil:
		return ns, na, malformed
	case ns.Eth.Src == self:
		return ns, na, fromSelf
	}
	group := solicitedNode(ns.Target)
	toGroup := ns.Eth.Dst == multicastMAC(group) && ns.Dst == group
	toUs := ns.Eth.Dst == self && ns.Dst == ns.Target
	if !toGroup && !toUs {
		return ns, na, notToUs
	}
	if !owned(ns.Target) {
		return ns, na, notOwned
	}
	return ns, solicitedNA(ns, self), answered
}
