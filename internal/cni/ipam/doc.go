// Package ipam is the address management of svcnet's CNI plugin: one address
// per configured subnet for each attachment (container ID + interface name),
// handed out round robin from a store on disk, as the reference host-local
// plugin does.
//
// # The store: the contract "never leaks" rests on
//
// A store is one directory (the plugin's dataDir), owned by one network:
//
//	lock                     empty; every operation holds flock(LOCK_EX) on it
//	                         for its whole duration, so concurrent plugin
//	                         processes (and goroutines: each Lock opens the file
//	                         anew) see and change the store one at a time
//	network                  the name of the network the store belongs to
//	                         (Claim): a store serves one network, so a DEL or
//	                         GC of another network sharing the directory by
//	                         mistake is refused instead of freeing its addresses
//	<address>                one file per allocated address, named by the
//	                         address in canonical text (192.168.1.2,
//	                         fd00:192:168:1::2), holding "<containerID>\r\n<ifname>"
//	                         (host-local's format): the owner of the address
//	last_reserved_ip.<net>   the address last handed out in subnet <net> ("/"
//	                         written "_"), where the next search starts
//	.tmp-*                   a write in progress; under the lock any such file is
//	                         left over from a crash and is removed
//
// No file is named after anything a caller passes: the names are the fixed
// ones above and addresses and subnets in canonical text, so no name leads
// out of the directory or past NAME_MAX. An owner is recorded only if its
// record reads back as the same owner (see Owner), so two attachments never
// share one.
//
// An address file is created whole or not at all (written to a .tmp- file,
// then hard-linked to its name, which fails if the name exists), so an
// address is never handed out twice and never owned by nobody. Every
// allocation names its owner, so DEL (release by owner), GC (release every
// owner not in the valid list) and a failed ADD (release what it reserved)
// can always find it: nothing is held that no command would free.
//
// Allocation order (pure, see Next): the usable addresses of a subnet are all
// but the network address, the gateway (the first address after it) and, for
// IPv4, the broadcast address. The search starts after the last reserved
// address, wraps around once, and takes the first address without a file.
package ipam
