package announce

import "golang.org/x/net/bpf"

// snapLen is how much of an accepted frame the filters keep: all of it.
const snapLen = 0xffff

// arpRequestFilter accepts ARP requests only (ethertype 0x0806, opcode 1), so
// the kernel never wakes the responder for replies.
var arpRequestFilter = mustAssemble([]bpf.Instruction{
	bpf.LoadAbsolute{Off: 12, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeARP, SkipTrue: 3},
	bpf.LoadAbsolute{Off: ethHeaderLen + 6, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: arpOpRequest, SkipTrue: 1},
	bpf.RetConstant{Val: snapLen},
	bpf.RetConstant{Val: 0},
})

// nsFilter accepts IPv6 frames whose next header is ICMPv6 and whose ICMPv6
// type is neighbour solicitation, so the responder sees none of the
// interface's other IPv6 traffic.
var nsFilter = mustAssemble([]bpf.Instruction{
	bpf.LoadAbsolute{Off: 12, Size: 2},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: etherTypeIPv6, SkipTrue: 5},
	bpf.LoadAbsolute{Off: ethHeaderLen + 6, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: protoICMPv6, SkipTrue: 3},
	bpf.LoadAbsolute{Off: ethHeaderLen + ipv6HeaderLen, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmpNS, SkipTrue: 1},
	bpf.RetConstant{Val: snapLen},
	bpf.RetConstant{Val: 0},
})

func mustAssemble(prog []bpf.Instruction) []bpf.RawInstruction {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		panic("announce: assemble bpf filter: " + err.Error())
	}
	return raw
}
