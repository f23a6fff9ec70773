//go:build ignore

// Service load balancing of traffic from outside the node: tc programs on the
// node's interfaces (tcx, or clsact with cls_bpf where tcx is missing) that
// send a new connection to a NodePort, externalIP or LoadBalancer IP to one
// of its backends and keep it there in a connection table, translating every
// packet of the connection both ways.
//
//   ingress, a connection's first packet (a TCP SYN, any UDP datagram) to a
//     frontend in services: a backend at random among its count in backends,
//     or by its flow's hash in the frontend's Maglev table.
//     A backend on this node: the destination is rewritten and the packet
//     goes on through the node's stack (routing, conntrack, the pod's
//     interface). Under externalTrafficPolicy Cluster it carries the node's
//     masquerade mark (node), so the rules' postrouting masquerade gives it
//     the node's address as kube-proxy does (conntrack undoes that on the
//     answer); under Local the client's address is kept. A backend
//     elsewhere: the
//     source is rewritten too, to this node's address (node) and a port
//     of 1024-32767 or 61000-65535 (outside the kernel's default ephemeral
//     ports, so never one of the node's own connections), held until a
//     minute after the connection closed (the backend's TIME_WAIT), and the
//     packet is forwarded out of the interface the FIB names, past the
//     node's stack (it would drop a packet from its own address as a
//     martian). When that interface is not one the programs are attached to
//     (ifaces: a tunnel, another NIC), the backend's answers would arrive
//     where no program sees them, so the connection goes through the node's
//     stack as a local backend's does, DNAT and mark, masqueraded by the
//     rules.
//   ingress, an answer from a remote backend to a SNAT address and port
//     (revnat): source and destination rewritten back to the frontend and
//     the client, and forwarded likewise.
//   egress, an answer from a backend reached through the node's stack
//     (revnat): its source rewritten back to the frontend.
//
// A frontend with externalTrafficPolicy Local (SVC_LOCAL) has only local
// backends, so the client's address is always kept; traffic to it from the
// cluster's pod network (node) is left to the rules, which send it to any
// endpoint, as kube-proxy short-circuits it.
//
// Maps (written by internal/ebpf/tclb; layouts must match its encoding):
//   services: frontend (IPv6 or IPv4-mapped address, port, protocol)
//             -> backend count and flags
//   backends: frontend and index < count -> backend address, port, flags
//   conns:    a connection as the client sent it -> its backend, SNAT
//             address and port, TCP state and when it was last seen (LRU)
//   revnat:   an answer's addresses and ports as they arrive -> the
//             connection's key in conns (LRU)
//   maglev:   frontend -> its Maglev table, for frontends that choose by
//             the flow's hash (SVC_MAGLEV)
//   ifaces:   the interfaces the programs are attached to
//   node:     this node's SNAT addresses and the pod network per family
//
// A connection's entry lives for its state's lifetime after its last packet
// (ct_lifetime). A TCP SYN that finds an entry past its handshake (a client
// reusing its source port), or an expired one, starts a new connection with
// a new choice; a retransmitted SYN keeps the first. A packet that is no
// connection's and starts none (a TCP segment without SYN, a fragment, IP
// options in IPv6 extension headers, a TTL about to expire) is passed
// untouched to the node's rules, as is everything that is not to a frontend.

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "svcnet.h"

#define CONN_MAX 524288

#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define AF_INET 2
#define AF_INET6 10

// SNAT ports: SNAT_LOW_COUNT from 1024, then from SNAT_HIGH_MIN to 65535.
#define SNAT_LOW_COUNT 31744
#define SNAT_HIGH_MIN 61000
#define SNAT_PORT_COUNT (SNAT_LOW_COUNT + 65536 - SNAT_HIGH_MIN)
// SNAT_HOLD_NS: a SNAT port is not given to another connection to the same
// backend until this long after its connection closed, the backend's
// TIME_WAIT (60 s on Linux), as conntrack holds a closed NAT mapping.
#define SNAT_HOLD_NS (60ULL * 1000000000ULL)
#define SNAT_TRIES 16


#define SVC_LOCAL 1
// SVC_MAGLEV: the backend of a new connection is the one its flow hashes to
// in the frontend's table in maglev, not one at random.
#define SVC_MAGLEV 2

#define MAGLEV_M 65537

struct svc_value {
	__u32 count;
	__u32 flags;
};

struct backend_key {
	struct svc_key svc;
	__u32 index;
};

#define BACKEND_LOCAL 1

struct backend_value {
	__u32 addr[4];
	__u16 port;
	__u16 flags;
};

struct conn_key {
	__u32 saddr[4];
	__u32 daddr[4];
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

#define CT_SYN_SENT 0
#define CT_ESTABLISHED 1
#define CT_CLOSING 2

#define CONN_SNAT 1
#define CONN_MASQ 2

struct conn_value {
	// rev is the key of the connection's answers in revnat.
	struct conn_key rev;
	__u32 backend[4];
	__u32 snat[4];
	__u16 backend_port;
	__u16 snat_port;
	__u8 state;
	__u8 flags;
	__u16 pad;
	// mark is or-ed into the packets' mark (CONN_MASQ).
	__u32 mark;
	__u32 pad2;
	__u64 last_ns;
};

struct node_config {
	// snat4, snat6: this node's address for connections to remote backends
	// (zero: none; such a connection is left to the rules).
	__u32 snat4[4];
	__u32 snat6[4];
	// pods4/6 and their masks: the cluster's pod network per family (mask
	// zero: none).
	__u32 pods4[4];
	__u32 pods4_mask[4];
	__u32 pods6[4];
	__u32 pods6_mask[4];
	// masq_mark is the mark the node's rules masquerade by.
	__u32 masq_mark;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SVC_MAX);
	__type(key, struct svc_key);
	__type(value, struct svc_value);
} services SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BACKEND_MAX);
	__type(key, struct backend_key);
	__type(value, struct backend_value);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, CONN_MAX);
	__type(key, struct conn_key);
	__type(value, struct conn_value);
} conns SEC(".maps");

struct maglev_table {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAGLEV_M);
	__type(key, __u32);
	__type(value, __u32);
};

// maglev: a frontend with SVC_MAGLEV -> its Maglev table (internal/maglev):
// slot -> index of its backend.
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, SVC_MAX);
	__type(key, struct svc_key);
	__array(values, struct maglev_table);
} maglev SEC(".maps");

// rev_value is a connection's key in conns, and when it was closed (0:
// open; a closed SNAT connection's entry stays, holding its port, for
// SNAT_HOLD_NS).
struct rev_value {
	struct conn_key fwd;
	__u64 closed_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, CONN_MAX);
	__type(key, struct conn_key);
	__type(value, struct rev_value);
} revnat SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct node_config);
} node SEC(".maps");

// ifaces: the interfaces the programs are attached to (ifindex -> 1).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u8);
} ifaces SEC(".maps");

// Header layouts, as on the wire.
struct ethhdr_ {
	__u8 dst[6];
	__u8 src[6];
	__u16 proto;
};

struct iphdr_ {
	__u8 ihl_version;
	__u8 tos;
	__u16 tot_len;
	__u16 id;
	__u16 frag_off;
	__u8 ttl;
	__u8 protocol;
	__u16 check;
	__u32 saddr;
	__u32 daddr;
};

struct ipv6hdr_ {
	__u32 vtc_flow;
	__u16 payload_len;
	__u8 nexthdr;
	__u8 hop_limit;
	__u32 saddr[4];
	__u32 daddr[4];
};

struct ports_ {
	__u16 source;
	__u16 dest;
};

#define TCP_FIN 0x01
#define TCP_SYN 0x02
#define TCP_RST 0x04
#define TCP_ACK 0x10

// pkt is a parsed packet: its addresses in the maps' form, and where its
// headers are.
struct pkt {
	struct conn_key key;
	__u32 l3off;
	__u32 l4off;
	__u32 csum_off;
	__u8 family;
	__u8 ttl;
	__u8 tcp_flags;
	__u8 pad;
};

static __always_inline int in_prefix(const __u32 a[4], const __u32 net[4], const __u32 mask[4])
{
	if (addr_zero(mask))
		return 0;
	return (a[0] & mask[0]) == net[0] && (a[1] & mask[1]) == net[1] && (a[2] & mask[2]) == net[2] &&
	       (a[3] & mask[3]) == net[3];
}

// parse fills p from skb; 0 when it is an unfragmented TCP or UDP packet
// over IPv4 or IPv6 (no extension header) on Ethernet.
static __always_inline int parse(struct __sk_buff *skb, struct pkt *p)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr_ *eth = data;
	if ((void *)(eth + 1) > end)
		return -1;
	p->l3off = ETH_HLEN;
	if (eth->proto == bpf_htons(ETH_P_IP)) {
		struct iphdr_ *ip = data + ETH_HLEN;
		if ((void *)(ip + 1) > end)
			return -1;
		if ((ip->ihl_version >> 4) != 4 || (ip->frag_off & bpf_htons(0x3fff)))
			return -1;
		__u32 ihl = (ip->ihl_version & 0xf) * 4;
		if (ihl < 20)
			return -1;
		p->family = AF_INET;
		p->l4off = ETH_HLEN + ihl;
		p->ttl = ip->ttl;
		p->key.proto = ip->protocol;
		mapped4(p->key.saddr, ip->saddr);
		mapped4(p->key.daddr, ip->daddr);
	} else if (eth->proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr_ *ip6 = data + ETH_HLEN;
		if ((void *)(ip6 + 1) > end)
			return -1;
		p->family = AF_INET6;
		p->l4off = ETH_HLEN + sizeof(*ip6);
		p->ttl = ip6->hop_limit;
		p->key.proto = ip6->nexthdr;
		addr_cp(p->key.saddr, ip6->saddr);
		addr_cp(p->key.daddr, ip6->daddr);
	} else {
		return -1;
	}
	if (p->key.proto == IPPROTO_TCP) {
		__u8 flags;
		if (bpf_skb_load_bytes(skb, p->l4off + 13, &flags, 1))
			return -1;
		p->tcp_flags = flags;
		p->csum_off = p->l4off + 16;
	} else if (p->key.proto == IPPROTO_UDP) {
		p->csum_off = p->l4off + 6;
	} else {
		return -1;
	}
	struct ports_ ports;
	if (bpf_skb_load_bytes(skb, p->l4off, &ports, sizeof(ports)))
		return -1;
	p->key.sport = ports.source;
	p->key.dport = ports.dest;
	return 0;
}

// set_addr rewrites the source (dst 0) or destination address of p's packet
// to addr, with the IP and L4 checksums.
static __always_inline int set_addr(struct __sk_buff *skb, const struct pkt *p, int dst, const __u32 addr[4])
{
	__u64 udp = p->key.proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	const __u32 *old = dst ? p->key.daddr : p->key.saddr;
	if (p->family == AF_INET) {
		__u32 off = p->l3off + (dst ? 16 : 12);
		__u32 from = old[3], to = addr[3];
		if (bpf_l4_csum_replace(skb, p->csum_off, from, to, BPF_F_PSEUDO_HDR | udp | 4))
			return -1;
		if (bpf_l3_csum_replace(skb, p->l3off + 10, from, to, 4))
			return -1;
		return bpf_skb_store_bytes(skb, off, &to, 4, 0);
	}
	__u32 off = p->l3off + (dst ? 24 : 8);
	__u32 from[4], to[4];
	addr_cp(from, old);
	addr_cp(to, addr);
	__s64 diff = bpf_csum_diff(from, 16, to, 16, 0);
	if (diff < 0)
		return -1;
	if (bpf_l4_csum_replace(skb, p->csum_off, 0, diff, BPF_F_PSEUDO_HDR | udp))
		return -1;
	return bpf_skb_store_bytes(skb, off, to, 16, 0);
}

// set_port rewrites the source (dst 0) or destination port of p's packet.
static __always_inline int set_port(struct __sk_buff *skb, const struct pkt *p, int dst, __u16 port)
{
	__u64 udp = p->key.proto == IPPROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0;
	__u16 old = dst ? p->key.dport : p->key.sport;
	if (old == port)
		return 0;
	if (bpf_l4_csum_replace(skb, p->csum_off, old, port, udp | 2))
		return -1;
	return bpf_skb_store_bytes(skb, p->l4off + (dst ? 2 : 0), &port, 2, 0);
}

// rewrite gives p's packet the source saddr:sport and the destination
// daddr:dport.
static __always_inline int rewrite(struct __sk_buff *skb, const struct pkt *p, const __u32 saddr[4], __u16 sport,
				   const __u32 daddr[4], __u16 dport)
{
	if (!addr_eq(saddr, p->key.saddr) && set_addr(skb, p, 0, saddr))
		return -1;
	if (!addr_eq(daddr, p->key.daddr) && set_addr(skb, p, 1, daddr))
		return -1;
	if (set_port(skb, p, 0, sport) || set_port(skb, p, 1, dport))
		return -1;
	return 0;
}

// forward sends p's packet (rewritten to saddr, daddr) out of the interface
// the FIB names for daddr, its TTL or hop limit lowered, past the node's
// stack.
static __always_inline int forward(struct __sk_buff *skb, const struct pkt *p, const __u32 saddr[4],
				   const __u32 daddr[4])
{
	struct bpf_fib_lookup fib = {};
	fib.family = p->family;
	fib.l4_protocol = p->key.proto;
	fib.ifindex = skb->ifindex;
	if (p->family == AF_INET) {
		fib.ipv4_src = saddr[3];
		fib.ipv4_dst = daddr[3];
		__u16 old = bpf_htons((__u16)p->ttl << 8), new = bpf_htons((__u16)(p->ttl - 1) << 8);
		__u8 ttl = p->ttl - 1;
		if (bpf_l3_csum_replace(skb, p->l3off + 10, old, new, 2) ||
		    bpf_skb_store_bytes(skb, p->l3off + 8, &ttl, 1, 0))
			return TC_ACT_SHOT;
	} else {
		addr_cp(fib.ipv6_src, saddr);
		addr_cp(fib.ipv6_dst, daddr);
		__u8 hl = p->ttl - 1;
		if (bpf_skb_store_bytes(skb, p->l3off + 7, &hl, 1, 0))
			return TC_ACT_SHOT;
	}
	long rc = bpf_fib_lookup(skb, &fib, sizeof(fib), 0);
	if (rc == BPF_FIB_LKUP_RET_SUCCESS) {
		if (bpf_skb_store_bytes(skb, 0, fib.dmac, 6, 0) || bpf_skb_store_bytes(skb, 6, fib.smac, 6, 0))
			return TC_ACT_SHOT;
		return bpf_redirect(fib.ifindex, 0);
	}
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		struct bpf_redir_neigh nh = {};
		if (p->family == AF_INET) {
			nh.nh_family = AF_INET;
			nh.ipv4_nh = fib.ipv4_dst;
		} else {
			nh.nh_family = AF_INET6;
			addr_cp(nh.ipv6_nh, fib.ipv6_dst);
		}
		return bpf_redirect_neigh(fib.ifindex, &nh, sizeof(nh), 0);
	}
	return TC_ACT_SHOT;
}

// ct_lifetime is how long after its last packet a connection in state
// lives: a TCP handshake 60 s, an established TCP connection 6 h (as
// Cilium), a closing one 10 s, a UDP flow 60 s.
static __always_inline __u64 ct_lifetime(__u8 proto, __u8 state)
{
	if (proto == IPPROTO_UDP)
		return 60ULL * 1000000000ULL;
	if (state == CT_ESTABLISHED)
		return 6ULL * 3600ULL * 1000000000ULL;
	if (state == CT_CLOSING)
		return 10ULL * 1000000000ULL;
	return 60ULL * 1000000000ULL;
}

static __always_inline int expired(const struct conn_value *c, __u8 proto, __u64 now)
{
	return since(now, c->last_ns) > ct_lifetime(proto, c->state);
}

// track moves a connection's state on a packet with TCP flags (reply: from
// the backend) and marks it seen.
static __always_inline void track(struct conn_value *c, const struct pkt *p, int reply, __u64 now)
{
	__u8 state = c->state;
	if (p->key.proto == IPPROTO_TCP && (p->tcp_flags & (TCP_FIN | TCP_RST)))
		state = CT_CLOSING;
	else if (reply && state == CT_SYN_SENT)
		state = CT_ESTABLISHED;
	if (state != c->state)
		c->state = state;
	c->last_ns = now;
}

// translate_forward rewrites a client's packet of connection c.
static __always_inline int translate_forward(struct __sk_buff *skb, const struct pkt *p, const struct conn_value *c)
{
	if (c->flags & CONN_SNAT) {
		if (rewrite(skb, p, c->snat, c->snat_port, c->backend, c->backend_port))
			return TC_ACT_SHOT;
		return forward(skb, p, c->snat, c->backend);
	}
	if (rewrite(skb, p, p->key.saddr, p->key.sport, c->backend, c->backend_port))
		return TC_ACT_SHOT;
	if (c->flags & CONN_MASQ)
		skb->mark |= c->mark;
	return TC_ACT_OK;
}

// mix is MurmurHash3's 32-bit finalizer step of h with k.
static __always_inline __u32 mix(__u32 h, __u32 k)
{
	k *= 0xcc9e2d51;
	k = (k << 15) | (k >> 17);
	k *= 0x1b873593;
	h ^= k;
	h = (h << 13) | (h >> 19);
	return h * 5 + 0xe6546b64;
}

// flow_hash hashes a connection's addresses, ports and protocol with a
// fixed seed, so that every node hashes a flow the same.
static __always_inline __u32 flow_hash(const struct conn_key *k)
{
	__u32 h = 0x5f3759df;
	for (int i = 0; i < 4; i++) {
		h = mix(h, k->saddr[i]);
		h = mix(h, k->daddr[i]);
	}
	h = mix(h, ((__u32)k->sport << 16) | k->dport);
	h = mix(h, k->proto);
	h ^= h >> 16;
	h *= 0x85ebca6b;
	h ^= h >> 13;
	h *= 0xc2b2ae35;
	h ^= h >> 16;
	return h;
}

// pick returns the index of the backend of svc (key sk) for the new
// connection p: its flow's slot in the frontend's Maglev table, or one at
// random. count when there is none.
static __always_inline __u32 pick(const struct pkt *p, const struct svc_key *sk, const struct svc_value *svc)
{
	if (!(svc->flags & SVC_MAGLEV))
		return bpf_get_prandom_u32() % svc->count;
	void *table = bpf_map_lookup_elem(&maglev, sk);
	if (!table)
		return svc->count;
	__u32 slot = flow_hash(&p->key) % MAGLEV_M;
	__u32 *idx = bpf_map_lookup_elem(table, &slot);
	return idx ? *idx : svc->count;
}

static __always_inline int same_key(const struct conn_key *a, const struct conn_key *b)
{
	return addr_eq(a->saddr, b->saddr) && addr_eq(a->daddr, b->daddr) && a->sport == b->sport &&
	       a->dport == b->dport && a->proto == b->proto;
}

// reclaimable reports whether the SNAT port of revnat entry rev (value v)
// may go to a new connection: its connection closed over SNAT_HOLD_NS ago,
// or is gone, or expired without closing.
static __always_inline int reclaimable(const struct conn_key *rev, const struct rev_value *v, __u64 now)
{
	if (v->closed_ns)
		return since(now, v->closed_ns) > SNAT_HOLD_NS;
	struct conn_value *c = bpf_map_lookup_elem(&conns, &v->fwd);
	if (!c || !same_key(&c->rev, rev))
		return 1;
	if (!expired(c, rev->proto, now))
		return 0;
	return c->state != CT_CLOSING || since(now, c->last_ns) > SNAT_HOLD_NS;
}

// snat_port reserves a port of rev's destination address for a new
// connection to its source (the backend), its answers' key written to rev,
// mapping to fwd.
static __always_inline int snat_port(struct conn_key *rev, const struct conn_key *fwd, __u64 now)
{
	struct rev_value v = {};
	v.fwd = *fwd;
	for (int i = 0; i < SNAT_TRIES; i++) {
		__u32 r = bpf_get_prandom_u32() % SNAT_PORT_COUNT;
		rev->dport = bpf_htons(r < SNAT_LOW_COUNT ? 1024 + r : SNAT_HIGH_MIN + (r - SNAT_LOW_COUNT));
		if (bpf_map_update_elem(&revnat, rev, &v, BPF_NOEXIST) == 0)
			return 0;
		struct rev_value *held = bpf_map_lookup_elem(&revnat, rev);
		if (held && reclaimable(rev, held, now) && bpf_map_update_elem(&revnat, rev, &v, BPF_ANY) == 0)
			return 0;
	}
	return -1;
}

// via_attached reports whether the FIB sends a packet from snat to the
// remote backend be out of an interface the programs are attached to
// (ifaces), so that the backend's answers to snat arrive where the ingress
// program sees them. Else (a tunnel, another interface) the connection
// goes through the node's stack and its masquerade.
static __always_inline int via_attached(struct __sk_buff *skb, const struct pkt *p, const __u32 snat[4],
					const __u32 be[4])
{
	struct bpf_fib_lookup fib = {};
	fib.family = p->family;
	fib.l4_protocol = p->key.proto;
	fib.ifindex = skb->ifindex;
	if (p->family == AF_INET) {
		fib.ipv4_src = snat[3];
		fib.ipv4_dst = be[3];
	} else {
		addr_cp(fib.ipv6_src, snat);
		addr_cp(fib.ipv6_dst, be);
	}
	long rc = bpf_fib_lookup(skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_SKIP_NEIGH);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_NO_NEIGH)
		return 0;
	__u32 ifindex = fib.ifindex;
	return bpf_map_lookup_elem(&ifaces, &ifindex) != 0;
}

// open_conn starts a connection of the client's packet p to the frontend
// svc: a backend chosen, its entries written. 0 when the packet is to be
// left to the rules.
static __always_inline struct conn_value *open_conn(struct __sk_buff *skb, const struct pkt *p,
						    const struct svc_key *sk, const struct svc_value *svc, __u64 now)
{
	if (svc->count == 0)
		return 0;
	struct node_config *cfg;
	__u32 zero = 0;
	cfg = bpf_map_lookup_elem(&node, &zero);
	if (!cfg)
		return 0;
	if (svc->flags & SVC_LOCAL) {
		if (p->family == AF_INET ? in_prefix(p->key.saddr, cfg->pods4, cfg->pods4_mask)
					 : in_prefix(p->key.saddr, cfg->pods6, cfg->pods6_mask))
			return 0;
	}
	struct backend_key bk = {};
	bk.svc = *sk;
	bk.index = pick(p, sk, svc);
	if (bk.index >= svc->count)
		return 0;
	struct backend_value *be = bpf_map_lookup_elem(&backends, &bk);
	if (!be)
		return 0;
	struct conn_value c = {};
	addr_cp(c.backend, be->addr);
	c.backend_port = be->port;
	c.last_ns = now;
	c.rev.proto = p->key.proto;
	addr_cp(c.rev.saddr, be->addr);
	c.rev.sport = be->port;
	const __u32 *snat = p->family == AF_INET ? cfg->snat4 : cfg->snat6;
	if ((be->flags & BACKEND_LOCAL) || addr_zero(snat) || !via_attached(skb, p, snat, be->addr)) {
		// Through the node's stack: its answer comes back through it
		// too (conntrack undoes the masquerade) and leaves by an
		// interface whose egress program rewrites its source.
		addr_cp(c.rev.daddr, p->key.saddr);
		c.rev.dport = p->key.sport;
		struct rev_value rv = {};
		rv.fwd = p->key;
		if (bpf_map_update_elem(&revnat, &c.rev, &rv, BPF_ANY))
			return 0;
		if (!(svc->flags & SVC_LOCAL) && cfg->masq_mark) {
			c.flags = CONN_MASQ;
			c.mark = cfg->masq_mark;
		}
	} else {
		addr_cp(c.snat, snat);
		addr_cp(c.rev.daddr, snat);
		if (snat_port(&c.rev, &p->key, now))
			return 0;
		c.snat_port = c.rev.dport;
		c.flags = CONN_SNAT;
	}
	if (bpf_map_update_elem(&conns, &p->key, &c, BPF_ANY)) {
		bpf_map_delete_elem(&revnat, &c.rev);
		return 0;
	}
	return bpf_map_lookup_elem(&conns, &p->key);
}

// close_conn deletes connection c of key; a SNAT connection's revnat
// entry stays, closed, holding its port (reclaimable).
static __always_inline void close_conn(const struct conn_key *key, struct conn_value *c, __u64 now)
{
	struct conn_key rev = c->rev;
	if (c->flags & CONN_SNAT) {
		struct rev_value v = {};
		v.fwd = *key;
		v.closed_ns = now;
		bpf_map_update_elem(&revnat, &rev, &v, BPF_EXIST);
	} else {
		bpf_map_delete_elem(&revnat, &rev);
	}
	bpf_map_delete_elem(&conns, key);
}

// from_backend_snat handles an answer from a remote backend to a SNAT
// address: TC_ACT_UNSPEC when p is none.
static __always_inline int from_backend_snat(struct __sk_buff *skb, const struct pkt *p, __u64 now)
{
	struct rev_value *rv = bpf_map_lookup_elem(&revnat, &p->key);
	if (!rv || rv->closed_ns)
		return TC_ACT_UNSPEC;
	struct conn_key k = rv->fwd;
	struct conn_value *c = bpf_map_lookup_elem(&conns, &k);
	// The connection must still be this entry's: a connection that
	// replaced it (the client reused its port) has another.
	if (!c || !(c->flags & CONN_SNAT) || !same_key(&c->rev, &p->key))
		return TC_ACT_UNSPEC;
	if (expired(c, p->key.proto, now)) {
		close_conn(&k, c, now);
		return TC_ACT_UNSPEC;
	}
	track(c, p, 1, now);
	if (p->ttl <= 1)
		return TC_ACT_SHOT;
	if (rewrite(skb, p, k.daddr, k.dport, k.saddr, k.sport))
		return TC_ACT_SHOT;
	return forward(skb, p, k.daddr, k.saddr);
}

SEC("tc")
int tclb_ingress(struct __sk_buff *skb)
{
	struct pkt p = {};
	if (parse(skb, &p))
		return TC_ACT_UNSPEC;
	__u64 now = bpf_ktime_get_ns();
	int rc = from_backend_snat(skb, &p, now);
	if (rc != TC_ACT_UNSPEC)
		return rc;

	int syn = p.key.proto == IPPROTO_TCP && (p.tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN;
	struct conn_value *c = bpf_map_lookup_elem(&conns, &p.key);
	if (c && (expired(c, p.key.proto, now) || (syn && c->state != CT_SYN_SENT))) {
		close_conn(&p.key, c, now);
		c = 0;
	}
	if (!c) {
		if (p.key.proto == IPPROTO_TCP && !syn)
			return TC_ACT_UNSPEC;
		struct svc_key sk = {};
		addr_cp(sk.addr, p.key.daddr);
		sk.port = p.key.dport;
		sk.proto = p.key.proto;
		struct svc_value *svc = bpf_map_lookup_elem(&services, &sk);
		if (!svc)
			return TC_ACT_UNSPEC;
		if (p.ttl <= 1)
			return TC_ACT_UNSPEC;
		c = open_conn(skb, &p, &sk, svc, now);
		if (!c)
			return TC_ACT_UNSPEC;
	}
	track(c, &p, 0, now);
	if ((c->flags & CONN_SNAT) && p.ttl <= 1)
		return TC_ACT_SHOT;
	return translate_forward(skb, &p, c);
}

SEC("tc")
int tclb_egress(struct __sk_buff *skb)
{
	struct pkt p = {};
	if (parse(skb, &p))
		return TC_ACT_UNSPEC;
	struct rev_value *rv = bpf_map_lookup_elem(&revnat, &p.key);
	if (!rv || rv->closed_ns)
		return TC_ACT_UNSPEC;
	struct conn_key k = rv->fwd;
	struct conn_value *c = bpf_map_lookup_elem(&conns, &k);
	if (!c || (c->flags & CONN_SNAT) || !same_key(&c->rev, &p.key))
		return TC_ACT_UNSPEC;
	__u64 now = bpf_ktime_get_ns();
	if (expired(c, p.key.proto, now)) {
		close_conn(&k, c, now);
		return TC_ACT_UNSPEC;
	}
	track(c, &p, 1, now);
	if (set_addr(skb, &p, 0, k.daddr) || set_port(skb, &p, 0, k.dport))
		return TC_ACT_SHOT;
	return TC_ACT_UNSPEC;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
