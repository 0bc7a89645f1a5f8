/* scidmz passive telemetry as eBPF programs on a Linux border router.
 *
 * The same algorithms, tables, hashes and widths as the software twin
 * (src/scidmz/telemetry/twin/algorithms.py, which names the paper sections) and the
 * P4 programs (telemetry_p4/); every number comes from the generated
 * scidmz_ebpf.h (gen_header.py, from constants.py). One function here per twin
 * function, in the twin's order:
 *
 *   MLC Algorithm 2   algorithm2_count         per-class byte/packet counters
 *   MLC Algorithm 5   algorithm5_queuing_delay ingress stamp, egress match -> qd_last/sum/cnt
 *   MLC Algorithm 7   algorithm7_active_flow   active-flow table, C_TH within T_TH; algorithm7_fin
 *   JENKS 3.1         cms_long_flow            Count-Min sketch, long-flow (> 10 MB) digest
 *   MLC 3.4.2/JENKS   rtt_store_data / rtt_match_ack   SEQ/eACK matching, 4-stage table, Karn
 *
 * Where the programs run (what the twin's two mirrored taps see there):
 *   scidmz_lan_in   tc clsact ingress, LAN_IF  = TAP_INGRESS (before the router's queue)
 *   scidmz_wan_in   tc clsact ingress, WAN_IF  = TAP_INGRESS then TAP_EGRESS (frames back from the WAN)
 *   scidmz_wan_out  tc clsact egress,  WAN_IF  = TAP_EGRESS, before WAN_IF's qdisc
 *   scidmz_wan_xmit tp_btf net_dev_start_xmit on WAN_IF = TAP_EGRESS, after WAN_IF's qdisc
 * (one of the last two is loaded: xmit sees what left the queue, as Algorithm 5 needs when
 * the bottleneck queue is WAN_IF's own qdisc; it needs kernel BTF.)
 *
 * Frames: Ethernet with VLAN tags and MPLS labels, IPv4 and IPv6 (the twin's 128-bit addresses,
 * extension headers), TCP and UDP, as parse.py. Tunnels the twin decapsulates (GRE, ERSPAN,
 * VXLAN, MPLS pseudowires) are counted as `tunnel` and not measured (docs/telemetry_ebpf.md
 * "Known gaps").
 *
 * Differences from the twin (all ours, see docs/telemetry_ebpf.md):
 *   - RTT digests are not sent one per sample: their sum and count per class are
 *     accumulated in the per-CPU counter block (the collector reads a handful of
 *     values per period); the per-flow sample still lands in af_table.flow_rtt.
 *   - Flow digests (new / ended / long flow) go through a ring buffer, one per packet
 *     at most, like the switch's deparser.
 *   - Per-CPU counters are exact; the shared tables are updated without locks, as
 *     the switch's registers are, so two CPUs handling packets of one flow at the
 *     same instant can interleave a read-modify-write of its slot.
 * Every program passes every packet on unchanged (TC_ACT_UNSPEC: the next filter
 * runs, as if we were not there).
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "scidmz_ebpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Frozen at load (set by the loader): the verifier prunes what it switches off. */
const volatile struct scidmz_cfg scidmz_cfg SEC(".rodata.cfg") = {};

#define MAPARRAY(NAME, N, V, FLAGS)                      \
    struct {                                             \
        __uint(type, BPF_MAP_TYPE_ARRAY);                \
        __uint(max_entries, N);                          \
        __type(key, __u32);                              \
        __type(value, V);                                \
        __uint(map_flags, FLAGS);                        \
    } NAME SEC(".maps")

MAPARRAY(rtt_table, SCIDMZ_RTT_STAGES * SCIDMZ_RTT_STAGE_SIZE, struct scidmz_cell, BPF_F_MMAPABLE);
MAPARRAY(af_table, SCIDMZ_AF_TABLE_SIZE, struct scidmz_af_slot, BPF_F_MMAPABLE);
MAPARRAY(qd_table, SCIDMZ_QD_TABLE_SIZE, struct scidmz_cell, BPF_F_MMAPABLE);
/* two counters per element: an array stores each value in round_up(size, 8) bytes */
struct cms_pair { __u32 c[2]; };
MAPARRAY(cms, SCIDMZ_CMS_ROWS * SCIDMZ_CMS_COLS / 2, struct cms_pair, 0);
MAPARRAY(qd_last, SCIDMZ_N_CLASSES, __u32, 0);

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct scidmz_counters);
} counters SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, SCIDMZ_EBPF_RINGBUF_BYTES);
} flow_events SEC(".maps");

#define MASK 0xFFFFFFFFU

/* Where the packet bytes come from: tc programs load from the skb, the transmit
 * tracepoint reads the kernel's linear buffer. */
struct src {
    void *skb;
    const unsigned char *data;  /* tc: the linear data (packet pointer); xmit: the kernel's buffer */
    const unsigned char *end;   /* tc: its end */
    __u32 len;      /* bytes of the frame the hook sees (wire length less an offloaded VLAN tag) */
    __u32 headlen;  /* linear bytes (xmit); == len for tc */
    __u32 vlan_hw;  /* a VLAN tag held in skb metadata (hardware-accelerated) */
};

/* A 128-bit address as two host-order words (IPv4 as ::ffff:a), as the twin's digests and class_lpm. */
struct a128 { __u64 hi, lo; };

/* One packet, parsed. Hash inputs (ports, IP ID or IPv6 L4 checksum, SEQ, the 32-bit address key)
 * stay in network byte order as loaded; host-order copies are made only for digests. */
struct pkt {
    struct scidmz_hkey k;   /* hash inputs, outgoing orientation */
    struct a128 sa, da;     /* source and destination as in the packet */
    struct a128 fa, fb;     /* the same in the outgoing orientation (digests) */
    __u32 src, dst;         /* hash-key addresses as in the packet (IPv4, or the IPv6 fold) */
    __u16 sport, dport;
    __u32 seq, ack;         /* host order */
    __u32 payload;
    __u32 ln;               /* frame bytes on the wire (Algorithm 2) */
    __u32 now;              /* ticks */
    __u32 fidx, fsig, flow_raw;
    __u8 kind, flags, proto, out, cls, have_flow;
};

static __always_inline int ld_direct(const struct src *s, const __u32 off, void *buf, const __u32 n)
{
    if (s->data + off + n <= s->end) {
        __builtin_memcpy(buf, s->data + off, n);
        return 0;
    }
    return bpf_skb_load_bytes(s->skb, off, buf, n);
}

static __always_inline int ld(const struct src *s, __u32 off, void *buf, const __u32 n, const int tc)
{
    if (off > 0xFFFF || off + n > s->len)
        return -1;
    if (tc) {
        /* the general parser reads through the helper (only the Ethernet header directly):
         * an offset in packet-pointer arithmetic is tracked exactly by the verifier, and with
         * VLAN tags, MPLS labels and IPv6 extension headers every combination of depths became
         * a path of its own (over its 1M-instruction budget, measured); the helper's offset
         * argument is not tracked. The usual frames take parse_fast instead. */
        if (__builtin_constant_p(off) && off == 0)
            return ld_direct(s, 0, buf, n);
        return bpf_skb_load_bytes(s->skb, off, buf, n);
    }
    if (off + n > s->headlen)
        return -1;
    return bpf_probe_read_kernel(buf, n, s->data + off);
}

static __always_inline __u16 be16(const __u8 *b) { return ((__u16)b[0] << 8) | b[1]; }
static __always_inline __u32 raw32(const __u8 *b) { return *(const __u32 *)b; }
static __always_inline __u16 raw16(const __u8 *b) { return *(const __u16 *)b; }
static __always_inline __u64 be64(const __u8 *b) { return __builtin_bswap64(*(const __u64 *)b); }

/* constants.ADDR_FOLD: zlib.crc32 of the 16 IPv6 address bytes, as the hash key's 32-bit address
 * (parse.py's _fold), held like every key field: its big-endian bytes read as a little-endian word. */
static __always_inline __u32 addr_fold(const __u8 *a)
{
    __u32 c = 0xFFFFFFFFU;
    SCIDMZ_CRC_STEP32(c, raw32(a));
    SCIDMZ_CRC_STEP32(c, raw32(a + 4));
    SCIDMZ_CRC_STEP32(c, raw32(a + 8));
    SCIDMZ_CRC_STEP32(c, raw32(a + 12));
    return __builtin_bswap32(~c);
}

/* The tunnels parse.py decapsulates (its "one tunnel" block): GRE without routing/version bits
 * carrying IPv4, IPv6, Ethernet or ERSPAN I/II/III (frame type Ethernet), and VXLAN. Returns
 * SCIDMZ_R_TUNNEL exactly where the twin would go inside (layout.EBPF_REASONS), the twin's own
 * reason where it stops on the way, 0 when the packet is no tunnel. */
static __always_inline int tunnel(const struct src *s, const struct pkt *p, __u32 q, __u32 l4len, const int tc)
{
    __u8 b[12] __attribute__((aligned(8)));

    if (p->proto == SCIDMZ_IPPROTO_GRE && l4len >= 4 && ld(s, q, b, 4, tc) == 0) {
        __u8 g0 = b[0];
        __u16 gp = be16(b + 2);
        if ((b[1] & 0x07) || (g0 & 0x40))
            return 0;
        if (gp == SCIDMZ_ETHERTYPE_IPV4 || gp == SCIDMZ_ETHERTYPE_IPV6)
            return SCIDMZ_R_TUNNEL;
        if (gp != SCIDMZ_ETHERTYPE_TEB && gp != SCIDMZ_ETHERTYPE_ERSPAN2 && gp != SCIDMZ_ETHERTYPE_ERSPAN3)
            return 0;
        __u32 x = q + 4 + ((g0 & 0x80) ? 4 : 0) + ((g0 & 0x20) ? 4 : 0) + ((g0 & 0x10) ? 4 : 0);
        if (gp == SCIDMZ_ETHERTYPE_ERSPAN2 && (g0 & 0x10))
            x += 8;
        if (gp == SCIDMZ_ETHERTYPE_ERSPAN3) {
            if (ld(s, x, b, 12, tc) < 0)
                return SCIDMZ_R_TRUNCATED;
            if ((b[10] >> 2) & 0x1F)  /* not an Ethernet frame: the twin does not go in */
                return 0;
            x += 12 + ((b[11] & 1) ? 8 : 0);
        }
        return x + 14 > s->len ? SCIDMZ_R_TRUNCATED : SCIDMZ_R_TUNNEL;
    }
    if (p->proto == SCIDMZ_IPPROTO_UDP && l4len >= 16 && ld(s, q, b, 4, tc) == 0
        && be16(b + 2) == SCIDMZ_UDP_PORT_VXLAN)
        return q + 16 + 14 > s->len ? SCIDMZ_R_TRUNCATED : SCIDMZ_R_TUNNEL;
    return 0;
}

/* IPv4 at pos (parse.py's IPv4 branch): sets addresses, protocol, IP ID, *q and *l4len. */
static __always_inline int parse_ipv4(const struct src *s, struct pkt *p, __u32 pos, __u32 *q, __u32 *l4len,
                                      const int tc)
{
    __u8 b[20] __attribute__((aligned(8)));

    if (ld(s, pos, b, 20, tc) < 0)
        return SCIDMZ_R_TRUNCATED;
    if ((b[0] >> 4) != 4)
        return SCIDMZ_R_BAD_IP_VERSION;
    __u32 ihl = (b[0] & 0x0F) * 4;
    if (ihl < 20)
        return SCIDMZ_R_BAD_IHL;
    __u32 tot = be16(b + 2), avail = s->len - pos;
    if (tot == 0)  /* TSO / BIG TCP: the wire length is the truth */
        tot = avail;
    if (tot < ihl || tot > avail)
        return SCIDMZ_R_BAD_IP_LENGTH;
    p->k.identification = raw16(b + 4);
    p->proto = b[9];
    p->src = raw32(b + 12);
    p->dst = raw32(b + 16);
    p->sa.lo = SCIDMZ_IPV4_MAPPED_LO | __builtin_bswap32(p->src);
    p->da.lo = SCIDMZ_IPV4_MAPPED_LO | __builtin_bswap32(p->dst);
    *q = pos + ihl;
    *l4len = tot - ihl;
    if (be16(b + 6) & 0x3FFF) {  /* MF or a fragment offset */
        p->kind = SCIDMZ_KIND_L3;
        return SCIDMZ_R_FRAGMENT;
    }
    return 0;
}

/* IPv6 at pos with hop-by-hop / routing / destination-options headers (parse.py's IPv6 branch). */
static __always_inline int parse_ipv6(const struct src *s, struct pkt *p, __u32 pos, __u32 *q, __u32 *l4len,
                                      const int tc)
{
    __u8 b[40] __attribute__((aligned(8)));

    if (ld(s, pos, b, 40, tc) < 0)
        return SCIDMZ_R_TRUNCATED;
    if ((b[0] >> 4) != 6)
        return SCIDMZ_R_BAD_IP_VERSION;
    __u32 plen = be16(b + 4), avail = s->len - pos;
    __u8 nh = b[6];
    if (plen == 0 && (nh == 0 || nh == SCIDMZ_IPPROTO_TCP || nh == SCIDMZ_IPPROTO_UDP))  /* jumbogram / BIG TCP */
        plen = avail - 40;
    if (40 + plen > avail)
        return SCIDMZ_R_BAD_IP_LENGTH;
    p->src = addr_fold(b + 8);
    p->dst = addr_fold(b + 24);
    p->sa.hi = be64(b + 8);
    p->sa.lo = be64(b + 16);
    p->da.hi = be64(b + 24);
    p->da.lo = be64(b + 32);
    __u32 end = pos + 40 + plen, x = pos + 40;
    for (int i = 0; i < SCIDMZ_EBPF_IPV6_EXT_HEADERS; i++) {
        if (nh != SCIDMZ_IPV6_EXT_HEADERS_0 && nh != SCIDMZ_IPV6_EXT_HEADERS_1 && nh != SCIDMZ_IPV6_EXT_HEADERS_2)
            break;
        if (ld(s, x, b, 2, tc) < 0)
            return SCIDMZ_R_TRUNCATED;
        nh = b[0];
        x += ((__u32)b[1] + 1) * 8;
    }
    if (x > end)
        return SCIDMZ_R_BAD_IP_LENGTH;
    p->proto = nh;
    *q = x;
    *l4len = end - x;
    if (nh == SCIDMZ_IPV6_EXT_FRAGMENT) {
        p->kind = SCIDMZ_KIND_L3;
        return SCIDMZ_R_FRAGMENT;
    }
    return 0;
}

/* parse.py's _parse_py for an Ethernet frame, reason for reason (0 = usable): VLAN tags, MPLS
 * labels, IPv4 or IPv6, TCP or UDP; tunnels and deeper stacks than the bounds are this
 * program's own reasons (layout.EBPF_REASONS). */
static __always_inline int parse(const struct src *s, struct pkt *p, const int tc)
{
    __u8 b[20] __attribute__((aligned(8)));  /* the verifier wants aligned stack loads */
    __u32 pos = 14, q = 0, l4len = 0;
    __u16 et;
    int r, i;

    p->kind = SCIDMZ_KIND_DROP;
    if (ld(s, 0, b, 14, tc) < 0)
        return SCIDMZ_R_TRUNCATED;
    et = be16(b + 12);
    for (i = 0; i < SCIDMZ_EBPF_VLAN_TAGS; i++) {
        if (et != SCIDMZ_VLAN_TPIDS_0 && et != SCIDMZ_VLAN_TPIDS_1 && et != SCIDMZ_VLAN_TPIDS_2)
            break;
        if (ld(s, pos, b, 4, tc) < 0)
            return SCIDMZ_R_TRUNCATED;
        et = be16(b + 2);
        pos += 4;
    }
    if (et == SCIDMZ_VLAN_TPIDS_0 || et == SCIDMZ_VLAN_TPIDS_1 || et == SCIDMZ_VLAN_TPIDS_2)
        return SCIDMZ_R_TOO_DEEP;
    if (et == SCIDMZ_ETHERTYPE_MPLS_0 || et == SCIDMZ_ETHERTYPE_MPLS_1) {
        for (i = 0; i < SCIDMZ_EBPF_MPLS_LABELS; i++) {
            if (ld(s, pos, b, 4, tc) < 0)
                return SCIDMZ_R_TRUNCATED;
            pos += 4;
            if (b[2] & 1)  /* bottom of stack */
                break;
        }
        if (!(b[2] & 1))
            return SCIDMZ_R_TOO_DEEP;
        if (ld(s, pos, b, 1, tc) < 0)
            return SCIDMZ_R_TRUNCATED;
        if ((b[0] >> 4) == 0)  /* a pseudowire control word, then Ethernet */
            return pos + 18 > s->len ? SCIDMZ_R_TRUNCATED : SCIDMZ_R_TUNNEL;
        if ((b[0] >> 4) != 4 && (b[0] >> 4) != 6)
            return SCIDMZ_R_MPLS_PAYLOAD;
        et = 0;
    }
    if (et == 0) {  /* decided by the version nibble (after MPLS, or a zero ethertype as the twin) */
        if (ld(s, pos, b, 1, tc) < 0)
            return SCIDMZ_R_TRUNCATED;
        et = (b[0] >> 4) == 4 ? SCIDMZ_ETHERTYPE_IPV4 : ((b[0] >> 4) == 6 ? SCIDMZ_ETHERTYPE_IPV6 : 0);
        if (!et)
            return SCIDMZ_R_BAD_IP_VERSION;
    }
    if (et == SCIDMZ_ETHERTYPE_IPV4)
        r = parse_ipv4(s, p, pos, &q, &l4len, tc);
    else if (et == SCIDMZ_ETHERTYPE_IPV6)
        r = parse_ipv6(s, p, pos, &q, &l4len, tc);
    else
        return SCIDMZ_R_NON_IP;
    if (r)
        return r;
    r = tunnel(s, p, q, l4len, tc);
    if (r)
        return r;
    if (p->proto == SCIDMZ_IPPROTO_TCP) {
        if (l4len < 20) {
            p->kind = SCIDMZ_KIND_L3;
            return SCIDMZ_R_BAD_TCP_OFFSET;
        }
        if (ld(s, q, b, 20, tc) < 0)
            return SCIDMZ_R_TRUNCATED;
        __u32 doff = (b[12] >> 4) * 4;
        if (doff < 20 || doff > l4len) {
            p->kind = SCIDMZ_KIND_L3;
            return SCIDMZ_R_BAD_TCP_OFFSET;
        }
        p->sport = raw16(b);
        p->dport = raw16(b + 2);
        p->k.seq_no = raw32(b + 4);
        p->seq = __builtin_bswap32(p->k.seq_no);
        p->ack = __builtin_bswap32(raw32(b + 8));
        p->flags = b[13];
        p->payload = l4len - doff;
        if (et == SCIDMZ_ETHERTYPE_IPV6)  /* IPv6 has no IP ID: the L4 checksum tells a retransmission */
            p->k.identification = raw16(b + 16);
        p->kind = SCIDMZ_KIND_TCP;
    } else if (p->proto == SCIDMZ_IPPROTO_UDP) {
        if (l4len < 8) {
            p->kind = SCIDMZ_KIND_L3;
            return SCIDMZ_R_BAD_UDP_LENGTH;
        }
        if (ld(s, q, b, 8, tc) < 0)
            return SCIDMZ_R_TRUNCATED;
        __u32 ulen = be16(b + 4);
        if (ulen < 8 || ulen > l4len) {
            p->kind = SCIDMZ_KIND_L3;
            return SCIDMZ_R_BAD_UDP_LENGTH;
        }
        p->sport = raw16(b);
        p->dport = raw16(b + 2);
        p->payload = ulen - 8;
        if (et == SCIDMZ_ETHERTYPE_IPV6)
            p->k.identification = raw16(b + 6);
        p->kind = SCIDMZ_KIND_UDP;
    } else {
        p->kind = SCIDMZ_KIND_L3;
        return SCIDMZ_R_OTHER_PROTOCOL;
    }
    return 0;
}

/* The usual frame (no VLAN tag in the data, no MPLS, IPv4 without options or IPv6 without
 * extension headers, not a fragment, TCP or UDP that is no VXLAN, lengths not zero) read at
 * fixed offsets straight from the linear data: the same fields and checks as parse() on
 * such a frame (the equivalence tests send both kinds), written only when it is one.
 * Returns 0 then, -1 to leave the frame to parse(). Ours, for speed: parse() reads through
 * the helper, one call per header. */
static __always_inline int parse_fast(const struct src *s, struct pkt *p)
{
    const __u8 *d = s->data;
    __u32 q, l4len, ident;
    __u8 proto;

    if (d + 54 > s->end)
        return -1;
    __u16 et = be16(d + 12);
    if (et == SCIDMZ_ETHERTYPE_IPV4) {
        __u32 tot = be16(d + 16);
        if (d[14] != 0x45 || tot < 20 || tot > s->len - 14 || (be16(d + 20) & 0x3FFF))
            return -1;
        proto = d[23];
        q = 34;
        l4len = tot - 20;
    } else if (et == SCIDMZ_ETHERTYPE_IPV6) {
        if (d + 74 > s->end)
            return -1;
        __u32 plen = be16(d + 18);
        if ((d[14] >> 4) != 6 || plen == 0 || 40 + plen > s->len - 14)
            return -1;
        proto = d[20];
        q = 54;
        l4len = plen;
    } else {
        return -1;
    }
    const __u8 *l4 = d + q;
    if (proto == SCIDMZ_IPPROTO_TCP) {
        if (l4 + 20 > s->end || l4len < 20)
            return -1;
        __u32 doff = (l4[12] >> 4) * 4;
        if (doff < 20 || doff > l4len)
            return -1;
        p->k.seq_no = raw32(l4 + 4);
        p->seq = __builtin_bswap32(p->k.seq_no);
        p->ack = __builtin_bswap32(raw32(l4 + 8));
        p->flags = l4[13];
        p->payload = l4len - doff;
        ident = raw16(l4 + 16);
        p->kind = SCIDMZ_KIND_TCP;
    } else if (proto == SCIDMZ_IPPROTO_UDP) {
        if (l4 + 8 > s->end || l4len < 8 || (l4len >= 16 && be16(l4 + 2) == SCIDMZ_UDP_PORT_VXLAN))
            return -1;
        __u32 ulen = be16(l4 + 4);
        if (ulen < 8 || ulen > l4len)
            return -1;
        p->payload = ulen - 8;
        ident = raw16(l4 + 6);
        p->kind = SCIDMZ_KIND_UDP;
    } else {
        return -1;
    }
    p->sport = raw16(l4);
    p->dport = raw16(l4 + 2);
    p->proto = proto;
    if (et == SCIDMZ_ETHERTYPE_IPV4) {
        p->k.identification = raw16(d + 18);
        p->src = raw32(d + 26);
        p->dst = raw32(d + 30);
        p->sa.lo = SCIDMZ_IPV4_MAPPED_LO | __builtin_bswap32(p->src);
        p->da.lo = SCIDMZ_IPV4_MAPPED_LO | __builtin_bswap32(p->dst);
    } else {
        p->k.identification = ident;  /* IPv6 has no IP ID: the L4 checksum tells a retransmission */
        p->src = addr_fold(d + 22);
        p->dst = addr_fold(d + 38);
        p->sa.hi = be64(d + 22);
        p->sa.lo = be64(d + 30);
        p->da.hi = be64(d + 38);
        p->da.lo = be64(d + 46);
    }
    return 0;
}

/* The parser as global functions: the verifier checks a global function once, on its own, and
 * its caller sees only an unknown reason and unknown packet fields. Inlined, every header depth
 * (VLAN tags x MPLS labels x IPv6 extension headers) was a separate path through the rest of
 * the program for the verifier (over its 1M-instruction budget, measured). */
__noinline int scidmz_parse_tc(struct __sk_buff *skb, struct pkt *p)
{
    struct src s = {.skb = skb, .len = skb->len, .headlen = skb->len, .vlan_hw = skb->vlan_present,
                    .data = (const unsigned char *)(long)skb->data,
                    .end = (const unsigned char *)(long)skb->data_end};

    if (!p)
        return 0;
    if (parse_fast(&s, p) == 0)
        return 0;
    return parse(&s, p, 1);
}

__noinline int scidmz_parse_xmit(__u64 data, __u32 len, __u32 headlen, struct pkt *p)
{
    struct src s = {.data = (const unsigned char *)(long)data, .len = len, .headlen = headlen};
    __u8 head[76] __attribute__((aligned(8)));

    if (!p)
        return 0;
    /* parse_fast on a copy of the first headers (one read instead of one per header), two
     * bytes in, so the IP addresses and the L4 words sit aligned (the verifier wants aligned
     * stack loads) */
    __u32 n = headlen >= 74 ? 74 : (headlen >= 54 ? 54 : 0);
    if (n && bpf_probe_read_kernel(head + 2, n == 74 ? 74 : 54, s.data) == 0) {
        struct src f = {.data = head + 2, .end = head + 2 + n, .len = len, .headlen = headlen};
        if (parse_fast(&f, p) == 0)
            return 0;
    }
    return parse(&s, p, 0);
}

/* class_lpm (Algorithm 2) on the 128-bit address: the first hit in the longest-first prefix list. */
static __always_inline __u32 classify(const struct a128 *a)
{
    for (__u32 i = 0; i < SCIDMZ_CLASS_LPM_SIZE; i++) {
        if (i >= scidmz_cfg.n_prefix)
            break;
        if ((a->hi & scidmz_cfg.prefix[i].mask_hi) == scidmz_cfg.prefix[i].net_hi
            && (a->lo & scidmz_cfg.prefix[i].mask_lo) == scidmz_cfg.prefix[i].net_lo)
            return scidmz_cfg.prefix[i].cls;
    }
    return SCIDMZ_CLASS_NONE;
}

static __always_inline __u32 signature(__u32 h)
{
    __u32 s = h & SCIDMZ_SIG_MASK;
    return s ? s : 1;
}

static __always_inline int seq_after(__u32 a, __u32 b)
{
    __u32 d = a - b;
    return d != 0 && d < 0x80000000U;
}

#define CTR(c, name) ((c)->v[SCIDMZ_CTR_##name])
#define STAT(c, S) ((c)->v[SCIDMZ_CTR_STAT0 + SCIDMZ_S_##S])

/* One flow digest per packet, as the switch's deparser emits (the first event wins). */
static __always_inline void flow_digest(struct scidmz_counters *ctr, const struct pkt *p, __u8 *sent,
                                        __u8 kind, __u32 slot)
{
    if (*sent)
        return;
    *sent = 1;
    struct scidmz_flow_event ev = {
        .kind = kind,
        .src_addr_hi = p->fa.hi,
        .src_addr_lo = p->fa.lo,
        .dst_addr_hi = p->fb.hi,
        .dst_addr_lo = p->fb.lo,
        .src_port = __builtin_bswap16(p->k.src_port),
        .dst_port = __builtin_bswap16(p->k.dst_port),
        .protocol = p->proto,
        .cls = p->cls,
        .slot = slot,
        .ts = p->now,
    };
    if (bpf_ringbuf_output(&flow_events, &ev, sizeof(ev), 0))
        CTR(ctr, EVENTS_LOST)++;
}

/* MLC Algorithm 2: bytes and packets of the packet's class at tap t. */
static __always_inline void algorithm2_count(struct scidmz_counters *ctr, const struct pkt *p, int t)
{
    __u32 i = SCIDMZ_CTR_CLS_0_0_BYTES + (t * SCIDMZ_N_CLASSES + p->cls) * 2;

    if (i + 1 < SCIDMZ_N_COUNTERS) {
        ctr->v[i] += p->ln;
        ctr->v[i + 1] += 1;
    }
}

/* MLC Algorithm 5: the ingress tap stores (sig, now); the egress tap matches and clears it. */
static __always_inline void algorithm5_queuing_delay(struct scidmz_counters *ctr, const struct pkt *p, int t)
{
    __u32 qi = scidmz_crc_qd_index(&p->k) & (SCIDMZ_QD_TABLE_SIZE - 1);
    __u32 qs = signature(scidmz_crc_qd_sig(&p->k));
    struct scidmz_cell *cell = bpf_map_lookup_elem(&qd_table, &qi);

    if (!cell)
        return;
    if (t == SCIDMZ_TAP_INGRESS) {
        if (cell->sig != 0 && p->now - cell->ts <= SCIDMZ_QD_TIMEOUT_TICKS)
            STAT(ctr, QD_OVERWRITTEN)++;
        cell->sig = qs;
        cell->ts = p->now;
    } else if (cell->sig == qs) {
        __u32 d = p->now - cell->ts;
        cell->sig = 0;
        if (d <= SCIDMZ_QD_TIMEOUT_TICKS) {
            __u32 c = p->cls;
            __u32 *last = bpf_map_lookup_elem(&qd_last, &c);
            if (last)
                *last = d;
            if (c < SCIDMZ_N_CLASSES) {
                ctr->v[SCIDMZ_CTR_QD_SUM_0 + c] += d;
                ctr->v[SCIDMZ_CTR_QD_CNT_0 + c] += 1;
            }
            STAT(ctr, QD_SAMPLES)++;
        } else {
            STAT(ctr, QD_TOO_OLD)++;
        }
    } else {
        STAT(ctr, QD_UNMATCHED)++;
    }
}

/* MLC Algorithm 7 on an outgoing packet at the egress tap. Sets *slot_ok / *is_new. */
static __always_inline void algorithm7_active_flow(struct scidmz_counters *ctr, struct pkt *p,
                                                   struct scidmz_af_slot *s, __u8 *sent,
                                                   __u8 *slot_ok, __u8 *is_new)
{
    __u32 cur = s->af_sig;

    if (cur == p->fsig) {
        __u32 gap = p->now - s->af_ts;
        s->af_ts = p->now;
        if (gap < SCIDMZ_T_TH_TICKS) {
            if (s->af_count < SCIDMZ_C_TH) {
                s->af_count += 1;
                if (s->af_count == SCIDMZ_C_TH) {
                    s->af_active = 1;
                    flow_digest(ctr, p, sent, SCIDMZ_DIGEST_NEW_FLOW, p->fidx);
                    STAT(ctr, AF_ACTIVATIONS)++;
                }
            }
        } else {
            if (s->af_active == 1) {
                s->af_active = 0;
                flow_digest(ctr, p, sent, SCIDMZ_DIGEST_TIMEOUT, p->fidx);
            }
            s->af_count = 1;
        }
        s->af_bytes += p->ln;
        *slot_ok = 1;
    } else if (cur == 0 || p->now - s->af_ts >= SCIDMZ_T_TH_TICKS) {
        if (cur != 0) {
            STAT(ctr, AF_EVICTIONS)++;
            if (s->af_active == 1)
                flow_digest(ctr, p, sent, SCIDMZ_DIGEST_TIMEOUT, p->fidx);
        }
        s->af_sig = p->fsig;
        s->af_count = 1;
        s->af_ts = p->now;
        s->af_active = 0;
        s->af_bytes = p->ln;
        s->flow_rtt = 0;
        s->af_max_eack = 0;
        s->af_recover = 0;
        s->af_recover_flag = 0;
        *slot_ok = 1;
        *is_new = 1;
        STAT(ctr, AF_NEW)++;
        if (SCIDMZ_C_TH <= 1) {
            s->af_active = 1;
            flow_digest(ctr, p, sent, SCIDMZ_DIGEST_NEW_FLOW, p->fidx);
            STAT(ctr, AF_ACTIVATIONS)++;
        }
    } else {
        STAT(ctr, AF_COLLISIONS)++;
    }
}

static __always_inline void cms_add(__u32 i, __u64 ln, __u64 *est)
{
    __u32 key = i >> 1;
    struct cms_pair *pair = bpf_map_lookup_elem(&cms, &key);

    if (!pair)
        return;
    __u32 *cell = &pair->c[i & 1];
    __u64 v = (__u64)*cell + ln;
    if (v > MASK)
        v = MASK;
    *cell = v;
    if (v < *est)
        *est = v;
}

/* JENKS 3.1: the flow's Count-Min rows (saturating); crossing LONG_FLOW_BYTES sends the digest. */
static __always_inline void cms_long_flow(struct scidmz_counters *ctr, const struct pkt *p, __u32 slot, __u8 *sent)
{
    const __u32 m = SCIDMZ_CMS_COLS - 1;
    __u64 est = MASK, ln = p->ln;

    _Static_assert(SCIDMZ_CMS_ROWS == 3, "one cms_add per row below");
    cms_add((scidmz_crc_cms_row0_f(&p->k, p->flow_raw) & m), ln, &est);
    cms_add(SCIDMZ_CMS_COLS + (scidmz_crc_cms_row1_f(&p->k, p->flow_raw) & m), ln, &est);
    cms_add(2 * SCIDMZ_CMS_COLS + (scidmz_crc_cms_row2_f(&p->k, p->flow_raw) & m), ln, &est);
    if (est >= SCIDMZ_LONG_FLOW_BYTES && est - ln < SCIDMZ_LONG_FLOW_BYTES) {
        STAT(ctr, LONG_FLOWS)++;
        flow_digest(ctr, p, sent, SCIDMZ_DIGEST_LONG_FLOW, slot);
    }
}

/* MLC Algorithm 7: FIN or RST of a tracked flow frees its slot. */
static __always_inline void algorithm7_fin(struct scidmz_counters *ctr, const struct pkt *p,
                                           struct scidmz_af_slot *s, __u8 *sent)
{
    if (s->af_active == 1)
        flow_digest(ctr, p, sent, SCIDMZ_DIGEST_TIMEOUT, p->fidx);
    s->af_sig = 0;
    s->af_count = 0;
    s->af_active = 0;
    s->af_bytes = 0;
    s->af_recover_flag = 0;
    STAT(ctr, AF_FIN_REMOVED)++;
}

static __always_inline struct scidmz_cell *rtt_cell(int stage, const struct pkt *p)
{
    const __u32 m = SCIDMZ_RTT_STAGE_SIZE - 1;
    const struct scidmz_hkey *k = &p->k;
    __u32 i;

    _Static_assert(SCIDMZ_RTT_STAGES == 4, "one case per stage below");
    switch (stage) {
    case 0: i = scidmz_crc_rtt_stage0_f(k, p->flow_raw) & m; break;
    case 1: i = SCIDMZ_RTT_STAGE_SIZE + (scidmz_crc_rtt_stage1_f(k, p->flow_raw) & m); break;
    case 2: i = 2 * SCIDMZ_RTT_STAGE_SIZE + (scidmz_crc_rtt_stage2_f(k, p->flow_raw) & m); break;
    default: i = 3 * SCIDMZ_RTT_STAGE_SIZE + (scidmz_crc_rtt_stage3_f(k, p->flow_raw) & m); break;
    }
    return bpf_map_lookup_elem(&rtt_table, &i);
}

/* An outgoing data segment: store (flow, eACK) -> now in the first free stage (Karn's rule). */
static __always_inline void rtt_store_data(struct scidmz_counters *ctr, struct pkt *p,
                                           struct scidmz_af_slot *s, __u8 slot_ok, __u8 is_new)
{
    __u32 seglen = p->payload + ((p->flags & SCIDMZ_TCP_SYN) ? 1 : 0) + ((p->flags & SCIDMZ_TCP_FIN) ? 1 : 0);
    __u8 retx = 0, placed = 0, dup = 0;

    if (seglen == 0)
        return;
    __u32 eack = p->seq + seglen;
    if (slot_ok) {
        /* 0: no eACK seen yet in this slot (twin: an ISN >= 2^31 would look like a retransmission) */
        if (is_new || s->af_max_eack == 0 || seq_after(eack, s->af_max_eack)) {
            s->af_max_eack = eack;
        } else {
            retx = 1;
            s->af_recover = s->af_max_eack;
            s->af_recover_flag = 1;
            STAT(ctr, RTT_RETX_FLOW)++;
        }
    }
    p->k.eack = __builtin_bswap32(eack);
    __u32 rs = signature(scidmz_crc_rtt_sig(&p->k));
#pragma unroll
    for (int st = 0; st < SCIDMZ_RTT_STAGES; st++) {
        struct scidmz_cell *cell = rtt_cell(st, p);
        if (!cell)
            continue;
        __u32 cur = cell->sig, age = p->now - cell->ts;
        if (cur != 0 && (cur & SCIDMZ_SIG_MASK) == rs && age <= SCIDMZ_RTT_TIMEOUT_TICKS) {
            cell->sig = rs | SCIDMZ_SIG_POISON;
            cell->ts = p->now;
            dup = 1;
            STAT(ctr, RTT_RETX_POISONED)++;
        } else if (!placed && !dup && !retx && (cur == 0 || age > SCIDMZ_RTT_TIMEOUT_TICKS)) {
            cell->sig = rs;
            cell->ts = p->now;
            placed = 1;
        }
    }
    if (placed)
        STAT(ctr, RTT_STORED)++;
    else if (!dup && !retx)
        STAT(ctr, RTT_TABLE_FULL)++;
}

/* An incoming ACK: match and clear its (flow, ACK) cells; one clean match is an RTT sample. */
static __always_inline void rtt_match_ack(struct scidmz_counters *ctr, struct pkt *p,
                                          struct scidmz_af_slot *s, __u8 slot_ok)
{
    __u32 matches = 0, ts0 = 0;
    __u8 poisoned = 0, expired = 0, in_recovery = 0;

    p->k.eack = __builtin_bswap32(p->ack);
    __u32 rs = signature(scidmz_crc_rtt_sig(&p->k));
#pragma unroll
    for (int st = 0; st < SCIDMZ_RTT_STAGES; st++) {
        struct scidmz_cell *cell = rtt_cell(st, p);
        if (!cell)
            continue;
        __u32 cur = cell->sig;
        if (cur != 0 && (cur & SCIDMZ_SIG_MASK) == rs) {
            matches++;
            if (cur & SCIDMZ_SIG_POISON)
                poisoned = 1;
            if (p->now - cell->ts > SCIDMZ_RTT_TIMEOUT_TICKS)
                expired = 1;
            ts0 = cell->ts;
            cell->sig = 0;
        }
    }
    if (slot_ok && s->af_recover_flag == 1) {
        if (seq_after(p->ack, s->af_recover))
            s->af_recover_flag = 0;
        else
            in_recovery = 1;
    }
    if (matches == 0)
        return;
    if (expired) {
        STAT(ctr, RTT_REJECTED_EXPIRED)++;
    } else if (poisoned || in_recovery) {
        STAT(ctr, RTT_REJECTED_RETX)++;
    } else if (matches > 1) {
        STAT(ctr, RTT_REJECTED_AMBIGUOUS)++;
    } else {
        __u32 sample = p->now - ts0, c = p->cls;
        if (c < SCIDMZ_N_CLASSES) {
            ctr->v[SCIDMZ_CTR_RTT_SUM_0 + c] += sample;
            ctr->v[SCIDMZ_CTR_RTT_CNT_0 + c] += 1;
        }
        STAT(ctr, RTT_SAMPLES)++;
        if (slot_ok)
            s->flow_rtt = sample;
    }
}

/* The twin's process_packets for one copy of the packet at tap t (its pipeline order). */
static __always_inline void tap_step(struct scidmz_counters *ctr, struct pkt *p, const int t)
{
    __u8 sent = 0, slot_ok = 0, is_new = 0;

    if (p->kind == SCIDMZ_KIND_TCP && p->cls == SCIDMZ_CLASS_DTN && t == SCIDMZ_TAP_EGRESS) {  /* the prefix checks */
        if (p->out) {
            STAT(ctr, DTN_OUT_TCP)++;
            if (p->payload > 0) {
                STAT(ctr, DTN_OUT_DATA)++;
                STAT(ctr, DTN_OUT_PAYLOAD) += p->payload;
            }
        } else if (p->payload > 0) {
            STAT(ctr, DTN_IN_DATA)++;
            STAT(ctr, DTN_IN_PAYLOAD) += p->payload;
        }
    }
    if (p->out) {
        algorithm2_count(ctr, p, t);
        algorithm5_queuing_delay(ctr, p, t);
    }
    if (p->kind == SCIDMZ_KIND_L3 || (t != SCIDMZ_TAP_EGRESS && t != scidmz_cfg.rtt_tap))
        return;
    if (!p->have_flow) {
        p->flow_raw = scidmz_crcraw_flow(&p->k);
        p->fidx = scidmz_crc_flow_f(&p->k, p->flow_raw) & (SCIDMZ_AF_TABLE_SIZE - 1);
        p->fsig = signature(scidmz_crc_flow_sig(&p->k));
        p->have_flow = 1;
    }
    __u32 fidx = p->fidx;
    struct scidmz_af_slot *s = bpf_map_lookup_elem(&af_table, &fidx);
    if (!s)
        return;
    if (t == SCIDMZ_TAP_EGRESS && p->out) {
        algorithm7_active_flow(ctr, p, s, &sent, &slot_ok, &is_new);
        cms_long_flow(ctr, p, slot_ok ? p->fidx : MASK, &sent);
    } else if (s->af_sig == p->fsig) {
        slot_ok = 1;
    }
    if (p->kind == SCIDMZ_KIND_TCP && t == scidmz_cfg.rtt_tap) {
        if (p->out)
            rtt_store_data(ctr, p, s, slot_ok, is_new);
        else if (p->flags & SCIDMZ_TCP_ACK)
            rtt_match_ack(ctr, p, s, slot_ok);
    }
    if (p->kind == SCIDMZ_KIND_TCP && t == SCIDMZ_TAP_EGRESS && (p->flags & (SCIDMZ_TCP_FIN | SCIDMZ_TCP_RST))
        && s->af_sig == p->fsig)
        algorithm7_fin(ctr, p, s, &sent);
}

static __always_inline __u64 clock_ns(const struct src *s, const int tc)
{
    /* clock_skb: frames replayed with BPF_PROG_TEST_RUN carry their capture time in tstamp */
    if (tc && scidmz_cfg.clock_skb)
        return ((const struct __sk_buff *)s->skb)->tstamp;
    return bpf_ktime_get_ns();
}

/* Parse, count, classify, then the tap steps this hook plays. */
static __always_inline void handle(const struct src *s, const int hook, const int tc)
{
    __u32 zero = 0;
    struct scidmz_counters *ctr = bpf_map_lookup_elem(&counters, &zero);
    struct pkt p = {};

    if (!ctr)
        return;
    ctr->v[SCIDMZ_CTR_HOOK_LAN_IN + hook] += 1;
    int reason = tc ? scidmz_parse_tc(s->skb, &p)
                    : scidmz_parse_xmit((__u64)(long)s->data, s->len, s->headlen, &p);
    if (reason) {
        __u32 r = SCIDMZ_CTR_PARSE_BASE + reason;
        if (r < SCIDMZ_N_COUNTERS)
            ctr->v[r] += 1;
    }
    if (p.kind == SCIDMZ_KIND_DROP)
        return;
    p.ln = s->len + (s->vlan_hw ? 4 : 0);
    /* class_lpm: the destination classifies outgoing packets, else the source incoming ones */
    __u32 cd = classify(&p.da), cs = classify(&p.sa), c = cd ? cd : cs;
    int copies = hook == SCIDMZ_EBPF_HOOK_WAN_IN ? 2 : 1;
    if (!c) {
        STAT(ctr, UNCLASSIFIED) += copies;
        return;
    }
    if (cd && cs)
        STAT(ctr, BOTH_CLASSIFIED) += copies;
    if (cd) {
        p.out = 1;
        p.k.src_addr = p.src;
        p.k.dst_addr = p.dst;
        p.k.src_port = p.sport;
        p.k.dst_port = p.dport;
        p.fa = p.sa;
        p.fb = p.da;
    } else {
        p.k.src_addr = p.dst;
        p.k.dst_addr = p.src;
        p.k.src_port = p.dport;
        p.k.dst_port = p.sport;
        p.fa = p.da;
        p.fb = p.sa;
    }
    p.cls = c;
    p.k.protocol = p.proto;
    /* the clock only for packets that are measured (reading it is a good part of a short path) */
    p.now = (clock_ns(s, tc) / SCIDMZ_TS_TICK_NS) & MASK;
    if (hook == SCIDMZ_EBPF_HOOK_WAN_OUT) {
        tap_step(ctr, &p, SCIDMZ_TAP_EGRESS);
    } else {
        tap_step(ctr, &p, SCIDMZ_TAP_INGRESS);
        if (hook == SCIDMZ_EBPF_HOOK_WAN_IN)
            tap_step(ctr, &p, SCIDMZ_TAP_EGRESS);
    }
}

static __always_inline int tc_run(struct __sk_buff *skb, const int hook)
{
    struct src s = {
        .skb = skb, .len = skb->len, .headlen = skb->len, .vlan_hw = skb->vlan_present,
    };
    handle(&s, hook, 1);
    return TC_ACT_UNSPEC;
}

SEC("tc")
int scidmz_lan_in(struct __sk_buff *skb) { return tc_run(skb, SCIDMZ_EBPF_HOOK_LAN_IN); }

SEC("tc")
int scidmz_wan_in(struct __sk_buff *skb) { return tc_run(skb, SCIDMZ_EBPF_HOOK_WAN_IN); }

SEC("tc")
int scidmz_wan_out(struct __sk_buff *skb) { return tc_run(skb, SCIDMZ_EBPF_HOOK_WAN_OUT); }

/* ---- after WAN_IF's qdisc: the transmit tracepoint (kernel BTF, CO-RE) ---- */
struct ns_common { unsigned int inum; } __attribute__((preserve_access_index));
struct net { struct ns_common ns; } __attribute__((preserve_access_index));
typedef struct { struct net *net; } possible_net_t;
struct net_device { int ifindex; possible_net_t nd_net; } __attribute__((preserve_access_index));
struct sk_buff {
    unsigned int len, data_len;
    unsigned char *data;
    __u32 vlan_all;
} __attribute__((preserve_access_index));

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(scidmz_wan_xmit, struct sk_buff *skb, struct net_device *dev)
{
    if (BPF_CORE_READ(dev, ifindex) != (int)scidmz_cfg.wan_ifindex
        || BPF_CORE_READ(dev, nd_net.net, ns.inum) != scidmz_cfg.wan_netns)
        return 0;
    __u32 len = BPF_CORE_READ(skb, len);
    struct src s = {
        .data = BPF_CORE_READ(skb, data),
        .len = len,
        .headlen = len - BPF_CORE_READ(skb, data_len),
        .vlan_hw = BPF_CORE_READ(skb, vlan_all) != 0,
    };
    handle(&s, SCIDMZ_EBPF_HOOK_WAN_OUT, 0);
    return 0;
}
