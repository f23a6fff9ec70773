// What svcnet's BPF programs (socklb.c, tclb.c) share: the encoding of
// addresses, ports and protocols in their maps (internal/ebpf/bpfaddr is
// its Go side) and the services key both load balancers look a frontend up
// by.
#ifndef SVCNET_H
#define SVCNET_H

#include <linux/bpf.h>
#include <bpf/bpf_endian.h>

#define IPPROTO_TCP 6
#define IPPROTO_UDP 17

// Capacities of the maps both load balancers have.
#define SVC_MAX 65536
#define BACKEND_MAX 262144

// Addresses are IPv6 or IPv4-mapped IPv6 (::ffff:a.b.c.d), network order.
// Ports are in network order.
struct svc_key {
	__u32 addr[4];
	__u16 port;
	__u8 proto;
	__u8 pad;
};

static __always_inline void mapped4(__u32 addr[4], __u32 v4)
{
	addr[0] = 0;
	addr[1] = 0;
	addr[2] = bpf_htonl(0x0000ffff);
	addr[3] = v4;
}

static __always_inline int is_v4_mapped(const __u32 addr[4])
{
	return addr[0] == 0 && addr[1] == 0 && addr[2] == bpf_htonl(0x0000ffff);
}

static __always_inline int addr_zero(const __u32 a[4])
{
	return (a[0] | a[1] | a[2] | a[3]) == 0;
}

static __always_inline int addr_eq(const __u32 a[4], const __u32 b[4])
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

static __always_inline void addr_cp(__u32 dst[4], const __u32 src[4])
{
	dst[0] = src[0];
	dst[1] = src[1];
	dst[2] = src[2];
	dst[3] = src[3];
}

// since is how long ago then was at now, both bpf_ktime_get_ns() readings;
// 0 when then is later than now. A reading on one CPU can be slightly ahead
// of a later one on another (the fast monotonic clock may step back a
// little across a timekeeping update, and vCPUs' clocks may be skewed):
// such a timestamp is recent, where the unsigned difference would make it
// ages old.
static __always_inline __u64 since(__u64 now, __u64 then)
{
	return now > then ? now - then : 0;
}

#endif
