package nft

// protoNames are the IP protocols svcnet's rules name.
var protoNames = map[uint8]string{ProtoTCP: "tcp", ProtoUDP: "udp", ProtoSCTP: "sctp"}

// ProtoName returns the name of IP protocol p ("tcp", "udp", "sctp") and
// whether it is one of those; callers choose how to show another number.
func ProtoName(p uint8) (string, bool) {
	n, ok := protoNames[p]
	return n, ok
}

// ProtoNumber returns the IP protocol named name ("tcp", "udp", "sctp").
func ProtoNumber(name string) (uint8, bool) {
	for p, n := range protoNames {
		if n == name {
			return p, true
		}
	}
	return 0, false
}
