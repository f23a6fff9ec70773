//go:build ignore

// Socket-level Service load balancing: cgroup sock_addr programs that
// translate a Service frontend to one of its backends when a socket connects
// and report the frontend to getpeername, so no packet of the connection is
// ever rewritten.
//
// Maps (written by internal/ebpf/socklb; layouts must match its encoding):
//   services:  frontend (IPv6 or IPv4-mapped address, port, protocol)
//              -> backend count and the first slot of its backends
//   backends:  slot -> backend address and port
//   revnat:    socket cookie -> frontend and backend of a translated socket
//              (deleted when the socket is released; a plain hash, not LRU,
//              so a live socket's entry is never evicted: when full, a new
//              socket goes unrecorded and getpeername reports its backend)
//   lc_conns:  frontend and backend -> sockets connected and not released,
//              for least-connection
//   affinity:  client (network namespace cookie) and frontend -> its backend
//              and when it last connected, for frontends with ClientIP
//              affinity (LRU)
//   udp_revnat: socket cookie, backend address and port -> frontend, for each
//              backend a UDP socket was sent to (connect or sendmsg), so
//              recvmsg reports a datagram from that backend as from the
//              frontend (LRU: the entries of closed sockets age out)
//
// A frontend with no backends refuses the connect, or the sendmsg of an
// unconnected UDP socket, with ECONNREFUSED. A UDP socket's connect is left
// alone (its datagrams meet the rules): a connected socket would otherwise
// keep an endpoint that is gone. A destination that is no
// frontend passes untouched.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "svcnet.h"

#define ECONNREFUSED 111

#define REVNAT_MAX 262144
#define AFFINITY_MAX 262144

struct svc_value {
	__u32 count;
	__u32 base;
	// affinity_sec > 0: ClientIP affinity, a client (the socket's network
	// namespace: a pod, or the node) keeps the backend it was sent to while
	// it connects again within affinity_sec seconds and the backend stays.
	__u32 affinity_sec;
	// sched chooses among the backends: SCHED_RANDOM, SCHED_RR (the next
	// one per connect, counted in rr), SCHED_SH (by a hash of the client,
	// its socket's network namespace) or SCHED_LC (the one with the fewest
	// connected sockets of this frontend, lc_conns; sendmsg: at random).
	__u32 sched;
	__u32 rr;
};

#define SCHED_RANDOM 0
#define SCHED_RR 1
#define SCHED_SH 2
#define SCHED_LC 3

struct backend {
	__u32 addr[4];
	__u16 port;
	__u16 pad;
};

struct revnat_value {
	struct backend frontend;
	struct backend backend;
	__u8 proto;
	// counted: the connect was counted in lc_conns (SCHED_LC), and its
	// release uncounts it.
	__u8 counted;
	__u16 pad;
};

// lc_key is a backend of a frontend, as least-connection counts it.
struct lc_key {
	struct svc_key svc;
	struct backend backend;
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
	__type(key, __u32);
	__type(value, struct backend);
} backends SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, REVNAT_MAX);
	__type(key, __u64);
	__type(value, struct revnat_value);
} revnat SEC(".maps");

struct affinity_key {
	__u64 netns;
	struct svc_key svc;
	__u32 pad;
};

struct affinity_value {
	struct backend backend;
	__u32 pad;
	__u64 last_ns;
};

// lc_conns: the sockets connected to each backend of each frontend with
// SCHED_LC and not released yet.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, BACKEND_MAX);
	__type(key, struct lc_key);
	__type(value, __u64);
} lc_conns SEC(".maps");

// affinity: a client's backend per frontend, for frontends with affinity
// (LRU: a client gone idle is forgotten first).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, AFFINITY_MAX);
	__type(key, struct affinity_key);
	__type(value, struct affinity_value);
} affinity SEC(".maps");

struct udp_revnat_key {
	__u64 cookie;
	struct backend backend;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, REVNAT_MAX);
	__type(key, struct udp_revnat_key);
	__type(value, struct backend);
} udp_revnat SEC(".maps");

// Return values of cgroup sock_addr programs.
#define SYS_PROCEED 1
#define SYS_REJECT 0

// Outcomes of translate.
#define TRANSLATED 1
#define NOT_FRONTEND 0
#define NO_BACKENDS -1

static __always_inline int same_backend(const struct backend *a, const struct backend *b)
{
	return addr_eq(a->addr, b->addr) && a->port == b->port;
}

struct find_ctx {
	__u32 base;
	__u32 found;
	struct backend want;
};

static long find_backend(__u32 i, void *data)
{
	struct find_ctx *c = data;
	__u32 slot = c->base + i;
	struct backend *be = bpf_map_lookup_elem(&backends, &slot);
	if (!be)
		return 1;
	if (same_backend(be, &c->want)) {
		c->found = 1;
		return 1;
	}
	return 0;
}

// has_backend reports whether be is one of svc's backends.
static __always_inline int has_backend(const struct svc_value *svc, const struct backend *be)
{
	struct find_ctx c = {};
	c.base = svc->base;
	c.want = *be;
	bpf_loop(svc->count, find_backend, &c, 0);
	return c.found;
}

struct lc_ctx {
	struct svc_key svc;
	__u32 base;
	__u32 count;
	__u32 start;
	__u32 best;
	__u64 best_n;
};

static long lc_visit(__u32 i, void *data)
{
	struct lc_ctx *c = data;
	__u32 k = c->start + i;
	if (k >= c->count)
		k -= c->count;
	__u32 slot = c->base + k;
	struct backend *be = bpf_map_lookup_elem(&backends, &slot);
	if (!be)
		return 0;
	struct lc_key lk = {};
	lk.svc = c->svc;
	lk.backend = *be;
	__u64 *n = bpf_map_lookup_elem(&lc_conns, &lk);
	__u64 v = n ? *n : 0;
	if (v < c->best_n) {
		c->best_n = v;
		c->best = k;
	}
	return 0;
}

// least_conn returns the index of the backend of svc with the fewest
// counted sockets, ties broken from a random start.
static __always_inline __u32 least_conn(const struct svc_key *key, const struct svc_value *svc)
{
	struct lc_ctx c = {};
	c.svc = *key;
	c.base = svc->base;
	c.count = svc->count;
	c.start = bpf_get_prandom_u32() % svc->count;
	c.best = c.start;
	c.best_n = ~0ULL;
	bpf_loop(svc->count, lc_visit, &c, 0);
	return c.best < svc->count ? c.best : 0;
}

// count_conn counts a socket connected to be for the frontend of key.
static __always_inline void count_conn(const struct svc_key *key, const struct backend *be)
{
	struct lc_key lk = {};
	lk.svc = *key;
	lk.backend = *be;
	__u64 *n = bpf_map_lookup_elem(&lc_conns, &lk);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return;
	}
	__u64 one = 1;
	if (bpf_map_update_elem(&lc_conns, &lk, &one, BPF_NOEXIST) != 0) {
		n = bpf_map_lookup_elem(&lc_conns, &lk);
		if (n)
			__sync_fetch_and_add(n, 1);
	}
}

// mix spreads a 64-bit key over 32 bits (the finalizer of MurmurHash3).
static __always_inline __u32 mix(__u64 x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return (__u32)x;
}

// translate looks key up and, for a frontend, picks a backend into *out by
// its scheduler, or under affinity the client's backend while it is fresh
// and still a backend.
static __always_inline int translate(void *ctx, const struct svc_key *key, struct backend *out, int connect, int *counted)
{
	struct svc_value *svc = bpf_map_lookup_elem(&services, key);
	if (!svc)
		return NOT_FRONTEND;
	__u32 count = svc->count;
	if (count == 0)
		return NO_BACKENDS;
	struct affinity_key ak = {};
	__u64 now = 0;
	if (svc->affinity_sec) {
		ak.netns = bpf_get_netns_cookie(ctx);
		ak.svc = *key;
		now = bpf_ktime_get_ns();
		struct affinity_value *av = bpf_map_lookup_elem(&affinity, &ak);
		if (av && since(now, av->last_ns) <= (__u64)svc->affinity_sec * 1000000000ULL && has_backend(svc, &av->backend)) {
			av->last_ns = now;
			*out = av->backend;
			if (svc->sched == SCHED_LC && connect) {
				count_conn(key, out);
				*counted = 1;
			}
			return TRANSLATED;
		}
	}
	__u32 pick;
	switch (svc->sched) {
	case SCHED_RR:
		pick = __sync_fetch_and_add(&svc->rr, 1) % count;
		break;
	case SCHED_SH:
		pick = mix(bpf_get_netns_cookie(ctx)) % count;
		break;
	case SCHED_LC:
		if (connect) {
			pick = least_conn(key, svc);
			break;
		}
		pick = bpf_get_prandom_u32() % count;
		break;
	default:
		pick = bpf_get_prandom_u32() % count;
	}
	__u32 slot = svc->base + pick;
	struct backend *be = bpf_map_lookup_elem(&backends, &slot);
	if (!be)
		// User space writes a frontend's backends before its services
		// entry and deletes them only a grace period after no entry
		// points to them, so this is unreachable; should it happen, the
		// connect goes untranslated rather than to a wrong place.
		return NOT_FRONTEND;
	*out = *be;
	if (svc->sched == SCHED_LC && connect) {
		count_conn(key, be);
		*counted = 1;
	}
	if (svc->affinity_sec) {
		struct affinity_value av = {};
		av.backend = *be;
		av.last_ns = now;
		bpf_map_update_elem(&affinity, &ak, &av, BPF_ANY);
	}
	return TRANSLATED;
}

// remember_udp records that the UDP socket of ctx sent to be for the
// frontend of key.
static __always_inline void remember_udp(void *ctx, const struct svc_key *key, const struct backend *be)
{
	struct udp_revnat_key rk = {};
	rk.cookie = bpf_get_socket_cookie(ctx);
	rk.backend = *be;
	struct backend fe = {};
	__builtin_memcpy(fe.addr, key->addr, sizeof(fe.addr));
	fe.port = key->port;
	bpf_map_update_elem(&udp_revnat, &rk, &fe, BPF_ANY);
}

// uncount takes the socket whose translation rv is out of lc_conns, when
// its connect was counted there.
static __always_inline void uncount(const struct revnat_value *rv)
{
	if (!rv->counted)
		return;
	struct lc_key lk = {};
	__builtin_memcpy(lk.svc.addr, rv->frontend.addr, sizeof(lk.svc.addr));
	lk.svc.port = rv->frontend.port;
	lk.svc.proto = rv->proto;
	lk.backend = rv->backend;
	__u64 *n = bpf_map_lookup_elem(&lc_conns, &lk);
	if (n && *n > 0)
		__sync_fetch_and_add(n, -1);
}

// release forgets the translation of the socket of cookie, if it has one.
static __always_inline void release(__u64 cookie)
{
	struct revnat_value *rv = bpf_map_lookup_elem(&revnat, &cookie);
	if (!rv)
		return;
	uncount(rv);
	bpf_map_delete_elem(&revnat, &cookie);
}

// remember records that the socket of ctx was translated from the frontend
// of key to be. The insert comes first: only a socket connecting again (a
// failed connect before, or a disconnect) holds an entry already, which it
// gives up then. With revnat full, the socket goes unrecorded: getpeername
// reports its backend, and it is not counted.
static __always_inline void remember(void *ctx, const struct svc_key *key, const struct backend *be, int counted)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct revnat_value rv = {};
	__builtin_memcpy(rv.frontend.addr, key->addr, sizeof(rv.frontend.addr));
	rv.frontend.port = key->port;
	rv.backend = *be;
	rv.proto = key->proto;
	rv.counted = counted;
	if (bpf_map_update_elem(&revnat, &cookie, &rv, BPF_NOEXIST) == 0)
		return;
	release(cookie);
	if (bpf_map_update_elem(&revnat, &cookie, &rv, BPF_NOEXIST) != 0)
		uncount(&rv);
}

// udp_frontend returns the frontend the UDP socket of ctx sent to, when be
// is a backend it was translated to; NULL otherwise.
static __always_inline struct backend *udp_frontend(void *ctx, const struct backend *be)
{
	struct udp_revnat_key rk = {};
	rk.cookie = bpf_get_socket_cookie(ctx);
	rk.backend = *be;
	return bpf_map_lookup_elem(&udp_revnat, &rk);
}

static __always_inline void forget(void *ctx)
{
	release(bpf_get_socket_cookie(ctx));
}

// peer_get reads the address and port of ctx (the destination of a
// connect or sendmsg, the peer of getpeername, the source of recvmsg) as
// the maps hold them: an IPv4 address IPv4-mapped. v4 is a constant of each
// program, so the other family's fields, which its context does not allow,
// are compiled out.
static __always_inline void peer_get(struct bpf_sock_addr *ctx, int v4, struct backend *a)
{
	if (v4) {
		a->addr[0] = 0;
		a->addr[1] = 0;
		a->addr[2] = bpf_htonl(0x0000ffff);
		a->addr[3] = ctx->user_ip4;
	} else {
		a->addr[0] = ctx->user_ip6[0];
		a->addr[1] = ctx->user_ip6[1];
		a->addr[2] = ctx->user_ip6[2];
		a->addr[3] = ctx->user_ip6[3];
	}
	a->port = (__u16)ctx->user_port;
}

// peer_set writes a into ctx (for v4, an IPv4-mapped address).
static __always_inline void peer_set(struct bpf_sock_addr *ctx, int v4, const struct backend *a)
{
	if (v4) {
		ctx->user_ip4 = a->addr[3];
	} else {
		ctx->user_ip6[0] = a->addr[0];
		ctx->user_ip6[1] = a->addr[1];
		ctx->user_ip6[2] = a->addr[2];
		ctx->user_ip6[3] = a->addr[3];
	}
	ctx->user_port = a->port;
}

// key_of is the services map key of peer and proto.
static __always_inline void key_of(const struct backend *peer, __u8 proto, struct svc_key *key)
{
	__builtin_memcpy(key->addr, peer->addr, sizeof(key->addr));
	key->port = peer->port;
	key->proto = proto;
}

// translate_to_peer translates the destination of ctx (a connect, or a
// sendmsg when !connect): the SYS_ verdict; *key and *be say what it was
// translated from and to, *counted whether least-connection counted it. A
// v4 socket's frontend may only go to an IPv4 backend; a v6 socket's IPv4
// frontend (its IPv4-mapped address) has IPv4-mapped backends.
#define PASSED 2
static __always_inline int translate_to_peer(struct bpf_sock_addr *ctx, int v4, __u8 proto, int connect,
					     struct svc_key *key, struct backend *be, int *counted)
{
	struct backend peer;
	peer_get(ctx, v4, &peer);
	key_of(&peer, proto, key);
	int r = translate(ctx, key, be, connect, counted);
	if (r == NO_BACKENDS) {
		bpf_set_retval(-ECONNREFUSED);
		return SYS_REJECT;
	}
	if (r != TRANSLATED || (v4 && !is_v4_mapped(be->addr)))
		return PASSED;
	peer_set(ctx, v4, be);
	return SYS_PROCEED;
}

static __always_inline int do_connect(struct bpf_sock_addr *ctx, int v4)
{
	if (ctx->protocol == IPPROTO_UDP) {
		// A connected UDP socket keeps its peer for its life: were it
		// translated here, it would keep sending to an endpoint that is
		// gone. Left to the rules, its flow is conntrack's, which the
		// proxy clears when the endpoint goes (kube-proxy's UDP cleanup).
		forget(ctx);
		return SYS_PROCEED;
	}
	struct svc_key key = {};
	struct backend be;
	int counted = 0;
	int r = translate_to_peer(ctx, v4, (__u8)ctx->protocol, 1, &key, &be, &counted);
	if (r == PASSED) {
		forget(ctx);
		return SYS_PROCEED;
	}
	if (r == SYS_PROCEED)
		remember(ctx, &key, &be, counted);
	return r;
}

static __always_inline int do_getpeername(struct bpf_sock_addr *ctx, int v4)
{
	__u64 cookie = bpf_get_socket_cookie(ctx);
	struct revnat_value *rv = bpf_map_lookup_elem(&revnat, &cookie);
	if (!rv)
		return SYS_PROCEED;
	// Only the peer the socket was translated to is reported as the
	// frontend; anything else is the truth.
	struct backend peer;
	peer_get(ctx, v4, &peer);
	if (same_backend(&rv->backend, &peer))
		peer_set(ctx, v4, &rv->frontend);
	return SYS_PROCEED;
}

static __always_inline int do_sendmsg(struct bpf_sock_addr *ctx, int v4)
{
	struct svc_key key = {};
	struct backend be;
	int counted = 0;
	int r = translate_to_peer(ctx, v4, IPPROTO_UDP, 0, &key, &be, &counted);
	if (r == PASSED)
		return SYS_PROCEED;
	if (r == SYS_PROCEED)
		remember_udp(ctx, &key, &be);
	return r;
}

static __always_inline int do_recvmsg(struct bpf_sock_addr *ctx, int v4)
{
	struct backend peer;
	peer_get(ctx, v4, &peer);
	struct backend *fe = udp_frontend(ctx, &peer);
	if (fe)
		peer_set(ctx, v4, fe);
	return SYS_PROCEED;
}

// An IPv4 frontend is found by the v6 programs too when a dual-stack socket
// dials its IPv4-mapped address; its backends are IPv4-mapped as well.

SEC("cgroup/connect4")
int socklb_connect4(struct bpf_sock_addr *ctx) { return do_connect(ctx, 1); }

SEC("cgroup/connect6")
int socklb_connect6(struct bpf_sock_addr *ctx) { return do_connect(ctx, 0); }

SEC("cgroup/getpeername4")
int socklb_getpeername4(struct bpf_sock_addr *ctx) { return do_getpeername(ctx, 1); }

SEC("cgroup/getpeername6")
int socklb_getpeername6(struct bpf_sock_addr *ctx) { return do_getpeername(ctx, 0); }

SEC("cgroup/sendmsg4")
int socklb_sendmsg4(struct bpf_sock_addr *ctx) { return do_sendmsg(ctx, 1); }

SEC("cgroup/sendmsg6")
int socklb_sendmsg6(struct bpf_sock_addr *ctx) { return do_sendmsg(ctx, 0); }

SEC("cgroup/recvmsg4")
int socklb_recvmsg4(struct bpf_sock_addr *ctx) { return do_recvmsg(ctx, 1); }

SEC("cgroup/recvmsg6")
int socklb_recvmsg6(struct bpf_sock_addr *ctx) { return do_recvmsg(ctx, 0); }

// sock_release forgets a closed socket: its reverse translations, and its
// least-connection count.
SEC("cgroup/sock_release")
int socklb_release(struct bpf_sock *sk)
{
	release(bpf_get_socket_cookie(sk));
	return 1;
}

char __license[] SEC("license") = "Dual BSD/GPL";
