// SPDX-License-Identifier: BSD-3-Clause
// The DTN host agent's other mechanism, measured by benchmarks/agent_bpf_iter.py: a BPF TCP
// iterator that sets SO_MAX_PACING_RATE with bpf_setsockopt on the sockets listed in `rates`
// (IPv4 4-tuple -> payload bytes/s). No vmlinux.h: the few kernel types are declared with
// preserve_access_index, so libbpf relocates the fields against the running kernel's BTF.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define SOL_SOCKET 1
#define SO_MAX_PACING_RATE 47
#define AF_INET 2
#define TCP_ESTABLISHED 1

struct bpf_iter_meta {
	void *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct sock_common {
	union {
		struct {
			__be32 skc_daddr;
			__be32 skc_rcv_saddr;
		};
	};
	union {
		struct {
			__be16 skc_dport;
			__u16 skc_num;
		};
	};
	unsigned short skc_family;
	volatile unsigned char skc_state;
} __attribute__((preserve_access_index));

struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
	__u32 uid;
} __attribute__((preserve_access_index));

struct key {
	__be32 daddr;
	__be16 dport;
	__u16 sport;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct key);
	__type(value, __u32);
} rates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");  // [0] sockets visited, [1] options set

static void count(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&counts, &i);
	if (c)
		__sync_fetch_and_add(c, 1);
}

SEC("iter/tcp")
int pace(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct tcp_sock *tp;
	struct key k = {};
	__u32 *rate, val;

	if (!skc)
		return 0;
	count(0);
	if (skc->skc_family != AF_INET || skc->skc_state != TCP_ESTABLISHED)
		return 0;
	k.daddr = skc->skc_daddr;
	k.dport = skc->skc_dport;
	k.sport = skc->skc_num;
	rate = bpf_map_lookup_elem(&rates, &k);
	if (!rate)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	val = *rate;
	if (bpf_setsockopt(tp, SOL_SOCKET, SO_MAX_PACING_RATE, &val, sizeof(val)) == 0)
		count(1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
