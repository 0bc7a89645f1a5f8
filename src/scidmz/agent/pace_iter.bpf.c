// SPDX-License-Identifier: BSD-3-Clause
// scidmz agent, mechanism "bpf" (agent/bpfiter.py): one walk of every TCP socket per period that
// (1) emits each established socket's addresses, inode and tcp_info fields through the iterator's
// seq file (what the sock_diag dump gives the pidfd mechanism), and (2) sets SO_MAX_PACING_RATE
// with bpf_setsockopt on the sockets listed in `rates` (socket inode -> payload bytes/s).
// No vmlinux.h: the kernel types are declared with preserve_access_index, so libbpf relocates
// the fields against the running kernel's BTF.
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define SOL_SOCKET 1
#define SO_MAX_PACING_RATE 47
#define AF_INET 2
#define AF_INET6 10
#define TCP_ESTABLISHED 1

struct bpf_iter_meta {
	void *seq;
} __attribute__((preserve_access_index));

struct in6_addr {
	__u8 s6_addr[16];
} __attribute__((preserve_access_index));

struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

struct inode {
	unsigned long i_ino;
} __attribute__((preserve_access_index));

struct file {
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct socket {
	struct file *file;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	unsigned long sk_max_pacing_rate;
	struct socket *sk_socket;
} __attribute__((preserve_access_index));

struct inet_sock {
	struct sock sk;
} __attribute__((preserve_access_index));

struct inet_connection_sock {
	struct inet_sock icsk_inet;
} __attribute__((preserve_access_index));

struct tcp_sock {
	struct inet_connection_sock inet_conn;
	__u64 bytes_acked;
	__u32 rate_delivered;
	__u32 rate_interval_us;
	__u32 mss_cache;
} __attribute__((preserve_access_index));

struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
} __attribute__((preserve_access_index));

// One record per established socket; agent/bpfiter.py's RECORD must match.
struct record {
	__u64 inode;
	__u64 max_pacing_rate;
	__u64 bytes_acked;
	__u32 rate_delivered;
	__u32 rate_interval_us;
	__u32 mss;
	__u16 family;
	__u16 lport;      // host order
	__u16 rport;      // network order
	__u16 pad;
	__u8 laddr[16];
	__u8 raddr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u64);
} rates SEC(".maps");

SEC("iter/tcp")
int pace(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct record r = {};
	struct tcp_sock *tp;
	struct socket *so;
	__u64 *want;
	__u32 val;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp || skc->skc_state != TCP_ESTABLISHED)
		return 0;
	so = tp->inet_conn.icsk_inet.sk.sk_socket;
	if (!so || !so->file)
		return 0;  // a socket no process holds (being freed, or the kernel's own)
	r.inode = so->file->f_inode->i_ino;
	r.family = skc->skc_family;
	r.lport = skc->skc_num;
	r.rport = skc->skc_dport;
	if (r.family == AF_INET) {
		__builtin_memcpy(r.laddr, &skc->skc_rcv_saddr, 4);
		__builtin_memcpy(r.raddr, &skc->skc_daddr, 4);
	} else if (r.family == AF_INET6) {
		bpf_probe_read_kernel(r.laddr, 16, &skc->skc_v6_rcv_saddr);
		bpf_probe_read_kernel(r.raddr, 16, &skc->skc_v6_daddr);
	} else {
		return 0;
	}
	want = bpf_map_lookup_elem(&rates, &r.inode);
	if (want && *want != tp->inet_conn.icsk_inet.sk.sk_max_pacing_rate) {
		// bpf_setsockopt takes an int-sized value here; ~0U means "no maximum" to the kernel.
		val = *want >= 0xffffffffULL ? 0xffffffffU : (__u32)*want;
		bpf_setsockopt(tp, SOL_SOCKET, SO_MAX_PACING_RATE, &val, sizeof(val));
	}
	r.max_pacing_rate = tp->inet_conn.icsk_inet.sk.sk_max_pacing_rate;
	r.bytes_acked = tp->bytes_acked;
	r.rate_delivered = tp->rate_delivered;
	r.rate_interval_us = tp->rate_interval_us;
	r.mss = tp->mss_cache;
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
