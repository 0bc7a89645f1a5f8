// scidmz telemetry: header types, the packet parser and the choice of the
// measured IP header, shared by the v1model and TNA programs. Include after
// core.p4, the architecture file and scidmz_constants.p4.
//
// What is parsed mirrors src/scidmz/telemetry/twin/parse.py where a switch port
// sees it (a tap delivers Ethernet; SLL, raw IP and loopback exist only in
// capture files): Ethernet; up to SCIDMZ_P4_VLAN_TAGS VLAN tags
// (0x8100 / 0x88A8 / 0x9100); up to SCIDMZ_P4_MPLS_LABELS MPLS labels, then
// IPv4 or IPv6 by the version nibble, or a pseudowire control word and
// Ethernet; IPv4 with options (skipped by IHL), IPv6 with up to
// SCIDMZ_P4_IPV6_EXT_HEADERS hop-by-hop / routing / destination-options
// headers of at most 64 bytes; one tunnel, the way a remote mirror session
// delivers a copy: GRE (checksum, key, sequence) carrying IPv4/IPv6,
// Ethernet (0x6558) or ERSPAN type I/II/III, and VXLAN (UDP 4789), then
// Ethernet with up to SCIDMZ_P4_INNER_VLAN_TAGS tags and IPv4/IPv6 again;
// TCP or UDP only when the datagram is not a fragment. The twin reads any
// number of tags, labels and extension headers; beyond these bounds the
// switch's parser stops (a parser error: the packet is not measured).
// Options and extension headers are skipped with constant-size advance()
// calls, one parser state per length, because Tofino's parser cannot
// extract variable-size headers; BMv2 accepts the same states.

#ifndef SCIDMZ_HEADERS_P4_
#define SCIDMZ_HEADERS_P4_

header ethernet_h {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header vlan_h {
    bit<3>  pcp;
    bit<1>  dei;
    bit<12> vid;
    bit<16> ether_type;
}

header mpls_h {
    bit<20> label;
    bit<3>  tc;
    bit<1>  bos;            // bottom of stack
    bit<8>  ttl;
}

header word_h {             // a 32-bit word: pseudowire control word, GRE checksum/key/sequence
    bit<32> word;
}

header ipv4_h {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;          // reserved, DF, MF (MF is bit 0)
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header ipv6_h {
    bit<4>   version;
    bit<8>   traffic_class;
    bit<20>  flow_label;
    bit<16>  payload_len;
    bit<8>   next_hdr;
    bit<8>   hop_limit;
    bit<128> src_addr;
    bit<128> dst_addr;
}

header ipv6_ext_h {         // the first 8 bytes of a hop-by-hop / routing / destination-options header
    bit<8>  next_hdr;
    bit<8>  hdr_ext_len;    // 8-byte units beyond the first 8
    bit<48> data;
}

header gre_h {
    bit<1>  c;              // checksum present
    bit<1>  r;              // routing present (not read)
    bit<1>  k;              // key present
    bit<1>  s;              // sequence number present
    bit<4>  reserved;
    bit<5>  flags;
    bit<3>  version;
    bit<16> proto;
}

header erspan2_h {          // ERSPAN type II: version, VLAN, COS, encap, T, session, index
    bit<64> data;
}

header erspan3_h {
    bit<4>  version;
    bit<12> vlan;
    bit<3>  cos;
    bit<2>  bso;
    bit<1>  t;
    bit<10> session;
    bit<32> timestamp;
    bit<16> sgt;
    bit<1>  p;
    bit<5>  ft;             // frame type: 0 Ethernet
    bit<6>  hw_id;
    bit<1>  d;
    bit<2>  gra;
    bit<1>  o;              // an 8-byte platform-specific subheader follows
}

header bits64_h {           // ERSPAN III platform subheader, VXLAN header
    bit<64> data;
}

header tcp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;          // CWR ECE URG ACK PSH RST SYN FIN
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

// The first IP header is ipv4/ipv6; with a tunnel it is the tunnel's outer one and
// the measured packet is inner_ipv4/inner_ipv6 (ScidmzSelectIp chooses).
struct scidmz_headers_t {
    ethernet_h ethernet;
    vlan_h[SCIDMZ_P4_VLAN_TAGS]   vlan;
    mpls_h[SCIDMZ_P4_MPLS_LABELS] mpls;
    word_h     pw_cw;
    ipv4_h     ipv4;
    ipv6_h     ipv6;
    ipv6_ext_h[SCIDMZ_P4_IPV6_EXT_HEADERS] ipv6_ext;
    gre_h      gre;
    word_h     gre_csum;
    word_h     gre_key;
    word_h     gre_seq;
    erspan2_h  erspan2;
    erspan3_h  erspan3;
    bits64_h   erspan3_plat;
    udp_h      tun_udp;
    bits64_h   vxlan;
    ethernet_h inner_ethernet;
    vlan_h[SCIDMZ_P4_INNER_VLAN_TAGS] inner_vlan;
    ipv4_h     inner_ipv4;
    ipv6_h     inner_ipv6;
    ipv6_ext_h[SCIDMZ_P4_IPV6_EXT_HEADERS] inner_ipv6_ext;
    tcp_h      tcp;
    udp_h      udp;
}

// Per-packet working state of the ingress control (both architectures).
struct scidmz_metadata_t {
    bit<8>  tap;            // SCIDMZ_TAP_INGRESS / SCIDMZ_TAP_EGRESS / SCIDMZ_P4_TAP_NONE
    bit<8>  cls;            // SCIDMZ_CLASS_*
    bit<8>  dir;            // SCIDMZ_DIR_*
    bit<8>  l4;             // 1 when TCP or UDP is usable (parse.py KIND_TCP/KIND_UDP)
    bit<32> now;            // timestamp, 32-bit ticks (constants.py "Timestamps")
    bit<32> frame_len;      // the measured Ethernet frame without FCS (parse.py frame_len)
    bit<16> payload_len;    // TCP payload bytes (from the IP length)
    bit<32> seg_len;        // sequence space of the segment: payload + SYN + FIN
    bit<8>  tcp_flags;

    // the measured IP packet (ScidmzSelectIp): family, 128-bit addresses (IPv4 as
    // ::ffff:a, constants.py "addresses"), protocol, lengths, where its frame starts
    bit<8>   fam;           // 4, 6, or 0: nothing to measure
    bit<128> addr_src;
    bit<128> addr_dst;
    bit<8>   ip_proto;
    bit<16>  ip_ident;      // IPv4 identification; IPv6: the TCP/UDP checksum
    bit<16>  ip_len;        // the whole IP packet (header included)
    bit<16>  ip_hlen;       // IP header and IPv6 extension headers
    bit<16>  frame_start;   // bytes of the packet before the measured frame (tunnel headers)
    bit<16>  l2_len;        // bytes of the measured frame before its IP header
    bit<8>   tunnel;        // 1: measured inside a tunnel (inner IP), 0: the first IP header

    scidmz_hash_key_t key;  // outgoing orientation (src = campus / DTN-s side)
    bit<32> fold_src;       // the hash-key address: IPv4 address or CRC-32 of the IPv6 address
    bit<32> fold_dst;
    bit<128> dg_src;        // digest addresses, outgoing orientation
    bit<128> dg_dst;

    // active flows (Algorithm 7)
    bit<32> flow_slot;
    bit<32> flow_sig;
    bit<8>  af_state;       // SCIDMZ_P4_AF_HIT / _NEW / _OTHER
    bit<32> af_gap;         // ticks since the slot's previous packet
    bit<8>  af_was_active;
    bit<SCIDMZ_AF_INDEX_BITS> af_slot;  // TNA: flow_slot as a register index
    bit<32> af_write;       // TNA: value af_sig takes (the sig, or 0 on FIN/RST)
    bit<8>  af_new;         // TNA: the slot was (re)claimed by this packet
    bit<32> max_eack_old;   // TNA: af_max_eack before this segment
    bit<8>  ack_past;       // TNA: the ACK is past af_recover (serial arithmetic)

    // RTT (section 3.4.2)
    bit<32> rtt_idx0;
    bit<32> rtt_idx1;
    bit<32> rtt_idx2;
    bit<32> rtt_idx3;
    bit<32> rtt_sig;
    bit<32> rtt_sig_poisoned;  // rtt_sig | SIG_POISON
    bit<8>  rtt_may_place;     // TNA: no earlier stage placed or found a duplicate
    bit<32> rtt_cut;        // now - RTT timeout: cells stamped before are expired
    bit<32> rtt_sample;
    bit<8>  rtt_done;
    bit<8>  in_recovery;

    // queuing delay (Algorithm 5)
    bit<32> qd_idx;
    bit<32> qd_sig;
    bit<32> qd_sample;
    bit<8>  qd_ok;

    // Count-Min sketch
    bit<32> cms_idx0;
    bit<32> cms_idx1;
    bit<32> cms_idx2;
    bit<32> cms_est;

    // digests: at most one per packet on both targets (see README)
    bit<8>  send_flow;
    bit<8>  send_rtt;
    scidmz_rtt_digest_t  rtt_dg;
    scidmz_flow_digest_t flow_dg;
}

// ---- the parser --------------------------------------------------------------

#define SCIDMZ_IPV4_STATES(P, H, L4)                                            \
    state P {                                                                   \
        pkt.extract(H);                                                         \
        transition select(H.version, H.ihl) {                                   \
            (4w4, 4w5):  L4;                                                    \
            (4w4, 4w6):  P##_opt1;                                              \
            (4w4, 4w7):  P##_opt2;                                              \
            (4w4, 4w8):  P##_opt3;                                              \
            (4w4, 4w9):  P##_opt4;                                              \
            (4w4, 4w10): P##_opt5;                                              \
            (4w4, 4w11): P##_opt6;                                              \
            (4w4, 4w12): P##_opt7;                                              \
            (4w4, 4w13): P##_opt8;                                              \
            (4w4, 4w14): P##_opt9;                                              \
            (4w4, 4w15): P##_opt10;                                             \
            default:     P##_bad;   /* version != 4 or IHL < 5 */               \
        }                                                                       \
    }                                                                           \
    state P##_bad { H.setInvalid(); transition accept; }                        \
    state P##_opt1  { pkt.advance(32w32);  transition L4; }                     \
    state P##_opt2  { pkt.advance(32w64);  transition L4; }                     \
    state P##_opt3  { pkt.advance(32w96);  transition L4; }                     \
    state P##_opt4  { pkt.advance(32w128); transition L4; }                     \
    state P##_opt5  { pkt.advance(32w160); transition L4; }                     \
    state P##_opt6  { pkt.advance(32w192); transition L4; }                     \
    state P##_opt7  { pkt.advance(32w224); transition L4; }                     \
    state P##_opt8  { pkt.advance(32w256); transition L4; }                     \
    state P##_opt9  { pkt.advance(32w288); transition L4; }                     \
    state P##_opt10 { pkt.advance(32w320); transition L4; }

// IPv6 and its extension headers; NEXT(p) is the state after the chain, by protocol.
#define SCIDMZ_IPV6_STATES(P, H, EXT, NEXT)                                     \
    state P {                                                                   \
        pkt.extract(H);                                                         \
        transition select(H.version, H.next_hdr) {                              \
            (4w6, SCIDMZ_IPV6_EXT_HEADERS_0): P##_ext;                          \
            (4w6, SCIDMZ_IPV6_EXT_HEADERS_1): P##_ext;                          \
            (4w6, SCIDMZ_IPV6_EXT_HEADERS_2): P##_ext;                          \
            (4w6, _): NEXT##_v6;                                                \
            default: P##_bad;                                                   \
        }                                                                       \
    }                                                                           \
    state P##_bad { H.setInvalid(); transition accept; }                        \
    state P##_ext {                                                             \
        pkt.extract(EXT.next);                                                  \
        transition select(EXT.last.hdr_ext_len) {                               \
            0: P##_ext_done;                                                    \
            1: P##_ext1;                                                        \
            2: P##_ext2;                                                        \
            3: P##_ext3;                                                        \
            4: P##_ext4;                                                        \
            5: P##_ext5;                                                        \
            6: P##_ext6;                                                        \
            7: P##_ext7;                                                        \
            default: accept;  /* longer than the switch skips: no L4 */         \
        }                                                                       \
    }                                                                           \
    state P##_ext1 { pkt.advance(32w64);  transition P##_ext_done; }            \
    state P##_ext2 { pkt.advance(32w128); transition P##_ext_done; }            \
    state P##_ext3 { pkt.advance(32w192); transition P##_ext_done; }            \
    state P##_ext4 { pkt.advance(32w256); transition P##_ext_done; }            \
    state P##_ext5 { pkt.advance(32w320); transition P##_ext_done; }            \
    state P##_ext6 { pkt.advance(32w384); transition P##_ext_done; }            \
    state P##_ext7 { pkt.advance(32w448); transition P##_ext_done; }            \
    state P##_ext_done {                                                        \
        transition select(EXT.last.next_hdr) {                                  \
            SCIDMZ_IPV6_EXT_HEADERS_0: P##_ext;                                 \
            SCIDMZ_IPV6_EXT_HEADERS_1: P##_ext;                                 \
            SCIDMZ_IPV6_EXT_HEADERS_2: P##_ext;                                 \
            default: NEXT##_ext;                                                \
        }                                                                       \
    }

parser ScidmzPacketParser(packet_in pkt, out scidmz_headers_t hdr) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            SCIDMZ_VLAN_TPIDS_0: parse_vlan;
            SCIDMZ_VLAN_TPIDS_1: parse_vlan;
            SCIDMZ_VLAN_TPIDS_2: parse_vlan;
            SCIDMZ_ETHERTYPE_MPLS_0: parse_mpls;
            SCIDMZ_ETHERTYPE_MPLS_1: parse_mpls;
            SCIDMZ_ETHERTYPE_IPV4: parse_ipv4;
            SCIDMZ_ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }
    state parse_vlan {
        pkt.extract(hdr.vlan.next);
        transition select(hdr.vlan.last.ether_type) {
            SCIDMZ_VLAN_TPIDS_0: parse_vlan;
            SCIDMZ_VLAN_TPIDS_1: parse_vlan;
            SCIDMZ_VLAN_TPIDS_2: parse_vlan;
            SCIDMZ_ETHERTYPE_MPLS_0: parse_mpls;
            SCIDMZ_ETHERTYPE_MPLS_1: parse_mpls;
            SCIDMZ_ETHERTYPE_IPV4: parse_ipv4;
            SCIDMZ_ETHERTYPE_IPV6: parse_ipv6;
            default: accept;
        }
    }
    state parse_mpls {
        pkt.extract(hdr.mpls.next);
        transition select(hdr.mpls.last.bos) {
            1w0: parse_mpls;
            1w1: parse_mpls_payload;
        }
    }
    state parse_mpls_payload {
        // below the labels: IP by its version nibble, or a pseudowire control word (RFC 4385)
        transition select(pkt.lookahead<bit<4>>()) {
            4w4: parse_ipv4;
            4w6: parse_ipv6;
            4w0: parse_pw_cw;
            default: accept;   // parse.py mpls_payload
        }
    }
    state parse_pw_cw {
        pkt.extract(hdr.pw_cw);
        transition parse_inner_ethernet;
    }

    // ---- the first IP header, and the one tunnel ----------------------------------
    SCIDMZ_IPV4_STATES(parse_ipv4, hdr.ipv4, parse_ipv4_l4)
    state parse_ipv4_l4 {
        // fragments carry no usable L4 header: class bytes only (parse.py "fragment")
        transition select(hdr.ipv4.flags[0:0], hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (1w0, 13w0, SCIDMZ_IPPROTO_TCP): parse_tcp;
            (1w0, 13w0, SCIDMZ_IPPROTO_UDP): parse_udp_or_vxlan;
            (1w0, 13w0, SCIDMZ_IPPROTO_GRE): parse_gre;
            default: accept;
        }
    }
    SCIDMZ_IPV6_STATES(parse_ipv6, hdr.ipv6, hdr.ipv6_ext, outer_l4)
    state outer_l4_v6 {
        transition select(hdr.ipv6.next_hdr) {
            SCIDMZ_IPPROTO_TCP: parse_tcp;
            SCIDMZ_IPPROTO_UDP: parse_udp_or_vxlan;
            SCIDMZ_IPPROTO_GRE: parse_gre;
            default: accept;   // a fragment header (44) included: L3 only
        }
    }
    state outer_l4_ext {
        transition select(hdr.ipv6_ext.last.next_hdr) {
            SCIDMZ_IPPROTO_TCP: parse_tcp;
            SCIDMZ_IPPROTO_UDP: parse_udp_or_vxlan;
            SCIDMZ_IPPROTO_GRE: parse_gre;
            default: accept;
        }
    }
    state parse_udp_or_vxlan {
        transition select(pkt.lookahead<bit<32>>()[15:0]) {   // the UDP destination port
            SCIDMZ_UDP_PORT_VXLAN: parse_vxlan;
            default: parse_udp;
        }
    }
    state parse_vxlan {
        pkt.extract(hdr.tun_udp);
        pkt.extract(hdr.vxlan);
        transition parse_inner_ethernet;
    }
    state parse_gre {
        pkt.extract(hdr.gre);
        transition select(hdr.gre.version, hdr.gre.r) {
            (3w0, 1w0): parse_gre_csum;
            default: accept;   // PPTP's enhanced GRE, source routing: not a mirror session
        }
    }
    state parse_gre_csum {
        transition select(hdr.gre.c) {
            1w1: parse_gre_csum_word;
            1w0: parse_gre_key;
        }
    }
    state parse_gre_csum_word {
        pkt.extract(hdr.gre_csum);
        transition parse_gre_key;
    }
    state parse_gre_key {
        transition select(hdr.gre.k) {
            1w1: parse_gre_key_word;
            1w0: parse_gre_seq;
        }
    }
    state parse_gre_key_word {
        pkt.extract(hdr.gre_key);
        transition parse_gre_seq;
    }
    state parse_gre_seq {
        transition select(hdr.gre.s) {
            1w1: parse_gre_seq_word;
            1w0: parse_gre_payload;
        }
    }
    state parse_gre_seq_word {
        pkt.extract(hdr.gre_seq);
        transition parse_gre_payload;
    }
    state parse_gre_payload {
        transition select(hdr.gre.proto, hdr.gre.s) {
            (SCIDMZ_ETHERTYPE_IPV4, _): parse_inner_ipv4;
            (SCIDMZ_ETHERTYPE_IPV6, _): parse_inner_ipv6;
            (SCIDMZ_ETHERTYPE_TEB, _): parse_inner_ethernet;
            (SCIDMZ_ETHERTYPE_ERSPAN2, 1w1): parse_erspan2;
            (SCIDMZ_ETHERTYPE_ERSPAN2, 1w0): parse_inner_ethernet;   // ERSPAN type I: no header
            (SCIDMZ_ETHERTYPE_ERSPAN3, _): parse_erspan3;
            default: accept;
        }
    }
    state parse_erspan2 {
        pkt.extract(hdr.erspan2);
        transition parse_inner_ethernet;
    }
    state parse_erspan3 {
        pkt.extract(hdr.erspan3);
        transition select(hdr.erspan3.ft, hdr.erspan3.o) {
            (5w0, 1w0): parse_inner_ethernet;
            (5w0, 1w1): parse_erspan3_plat;
            default: accept;   // not an Ethernet frame: the outer packet is measured
        }
    }
    state parse_erspan3_plat {
        pkt.extract(hdr.erspan3_plat);
        transition parse_inner_ethernet;
    }

    // ---- inside the tunnel: Ethernet, tags, IP, L4, and no second tunnel ----------
    state parse_inner_ethernet {
        pkt.extract(hdr.inner_ethernet);
        transition select(hdr.inner_ethernet.ether_type) {
            SCIDMZ_VLAN_TPIDS_0: parse_inner_vlan;
            SCIDMZ_VLAN_TPIDS_1: parse_inner_vlan;
            SCIDMZ_VLAN_TPIDS_2: parse_inner_vlan;
            SCIDMZ_ETHERTYPE_IPV4: parse_inner_ipv4;
            SCIDMZ_ETHERTYPE_IPV6: parse_inner_ipv6;
            default: accept;
        }
    }
    state parse_inner_vlan {
        pkt.extract(hdr.inner_vlan.next);
        transition select(hdr.inner_vlan.last.ether_type) {
            SCIDMZ_VLAN_TPIDS_0: parse_inner_vlan;
            SCIDMZ_VLAN_TPIDS_1: parse_inner_vlan;
            SCIDMZ_VLAN_TPIDS_2: parse_inner_vlan;
            SCIDMZ_ETHERTYPE_IPV4: parse_inner_ipv4;
            SCIDMZ_ETHERTYPE_IPV6: parse_inner_ipv6;
            default: accept;
        }
    }
    SCIDMZ_IPV4_STATES(parse_inner_ipv4, hdr.inner_ipv4, parse_inner_ipv4_l4)
    state parse_inner_ipv4_l4 {
        transition select(hdr.inner_ipv4.flags[0:0], hdr.inner_ipv4.frag_offset, hdr.inner_ipv4.protocol) {
            (1w0, 13w0, SCIDMZ_IPPROTO_TCP): parse_tcp;
            (1w0, 13w0, SCIDMZ_IPPROTO_UDP): parse_udp;
            default: accept;
        }
    }
    SCIDMZ_IPV6_STATES(parse_inner_ipv6, hdr.inner_ipv6, hdr.inner_ipv6_ext, inner_l4)
    state inner_l4_v6 {
        transition select(hdr.inner_ipv6.next_hdr) {
            SCIDMZ_IPPROTO_TCP: parse_tcp;
            SCIDMZ_IPPROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state inner_l4_ext {
        transition select(hdr.inner_ipv6_ext.last.next_hdr) {
            SCIDMZ_IPPROTO_TCP: parse_tcp;
            SCIDMZ_IPPROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_tcp {
        pkt.extract(hdr.tcp);
        transition accept;
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition accept;
    }
}

// ---- the measured IP packet ----------------------------------------------------
// parse.py's choice, header by header: the tunnel's inner IP packet if there is a
// tunnel, else the first IP header. Sets meta.fam (0: nothing to measure), the
// 128-bit addresses, protocol, identification, lengths, and where the measured
// frame starts (frame_start: tunnel headers before it; l2_len: its bytes before IP).
// The hash-key addresses (fold_src/fold_dst) are the program's: a hash extern.
#define SCIDMZ_EXT_BYTES(EXT, out)                                                      \
    out = 0;                                                                            \
    if (EXT[0].isValid()) { out = out + (((bit<16>)EXT[0].hdr_ext_len + 1) << 3); }     \
    if (EXT[1].isValid()) { out = out + (((bit<16>)EXT[1].hdr_ext_len + 1) << 3); }

#define SCIDMZ_FROM_IPV4(H)                                                             \
    meta.fam = 4;                                                                       \
    meta.addr_src = ((bit<128>)SCIDMZ_IPV4_MAPPED_LO) | (bit<128>)H.src_addr;          \
    meta.addr_dst = ((bit<128>)SCIDMZ_IPV4_MAPPED_LO) | (bit<128>)H.dst_addr;          \
    meta.ip_proto = H.protocol;                                                         \
    meta.ip_ident = H.identification;                                                   \
    meta.ip_len = H.total_len;                                                          \
    meta.ip_hlen = ((bit<16>)H.ihl) << 2;

#define SCIDMZ_FROM_IPV6(H, EXT)                                                        \
    meta.fam = 6;                                                                       \
    meta.addr_src = H.src_addr;                                                         \
    meta.addr_dst = H.dst_addr;                                                         \
    meta.ip_proto = H.next_hdr;                                                         \
    if (EXT[0].isValid()) { meta.ip_proto = EXT[0].next_hdr; }                          \
    if (EXT[1].isValid()) { meta.ip_proto = EXT[1].next_hdr; }                          \
    meta.ip_ident = 0;                                                                  \
    meta.ip_len = H.payload_len + 40;                                                   \
    SCIDMZ_EXT_BYTES(EXT, ext_bytes)                                                    \
    meta.ip_hlen = 40 + ext_bytes;

control ScidmzSelectIp(inout scidmz_headers_t hdr, inout scidmz_metadata_t meta) {
    apply {
        bit<16> ext_bytes;
        bit<16> outer_l2 = SCIDMZ_ETH_HLEN;
        if (hdr.vlan[0].isValid()) { outer_l2 = outer_l2 + 4; }
        if (hdr.vlan[1].isValid()) { outer_l2 = outer_l2 + 4; }
        if (hdr.vlan[2].isValid()) { outer_l2 = outer_l2 + 4; }
        if (hdr.vlan[3].isValid()) { outer_l2 = outer_l2 + 4; }
        if (hdr.mpls[0].isValid()) { outer_l2 = outer_l2 + 4; }
        if (hdr.mpls[1].isValid()) { outer_l2 = outer_l2 + 4; }
        if (hdr.mpls[2].isValid()) { outer_l2 = outer_l2 + 4; }
        if (hdr.mpls[3].isValid()) { outer_l2 = outer_l2 + 4; }
        // the tunnel's own headers: outer IP, GRE and its words, ERSPAN, UDP + VXLAN
        bit<16> tun = 0;
        if (hdr.ipv4.isValid()) {
            tun = ((bit<16>)hdr.ipv4.ihl) << 2;
        } else if (hdr.ipv6.isValid()) {
            SCIDMZ_EXT_BYTES(hdr.ipv6_ext, ext_bytes)
            tun = 40 + ext_bytes;
        }
        if (hdr.gre.isValid()) { tun = tun + 4; }
        if (hdr.gre_csum.isValid()) { tun = tun + 4; }
        if (hdr.gre_key.isValid()) { tun = tun + 4; }
        if (hdr.gre_seq.isValid()) { tun = tun + 4; }
        if (hdr.erspan2.isValid()) { tun = tun + 8; }
        if (hdr.erspan3.isValid()) { tun = tun + 12; }
        if (hdr.erspan3_plat.isValid()) { tun = tun + 8; }
        if (hdr.vxlan.isValid()) { tun = tun + 16; }
        bool gre_ip = hdr.gre.isValid() && hdr.gre.version == 0 && hdr.gre.r == 0 &&
            (hdr.gre.proto == SCIDMZ_ETHERTYPE_IPV4 || hdr.gre.proto == SCIDMZ_ETHERTYPE_IPV6);
        meta.tunnel = 1;
        meta.l2_len = SCIDMZ_ETH_HLEN;
        if (hdr.pw_cw.isValid()) {
            meta.frame_start = outer_l2 + 4;
        } else if (hdr.inner_ethernet.isValid()) {
            meta.frame_start = outer_l2 + tun;
        } else if (gre_ip) {
            // IP in GRE has no Ethernet header: counted as 14 + the IP packet, as parse.py
            meta.frame_start = outer_l2 + tun - SCIDMZ_ETH_HLEN;
        } else {
            meta.tunnel = 0;
            meta.frame_start = 0;
            meta.l2_len = outer_l2;
        }
        if (meta.tunnel == 1) {
            if (hdr.inner_vlan[0].isValid()) { meta.l2_len = meta.l2_len + 4; }
            if (hdr.inner_vlan[1].isValid()) { meta.l2_len = meta.l2_len + 4; }
        }
        meta.fam = 0;
        if (meta.tunnel == 1) {
            if (hdr.inner_ipv4.isValid()) {
                SCIDMZ_FROM_IPV4(hdr.inner_ipv4)
            } else if (hdr.inner_ipv6.isValid()) {
                SCIDMZ_FROM_IPV6(hdr.inner_ipv6, hdr.inner_ipv6_ext)
            }
        } else if (hdr.ipv4.isValid()) {
            SCIDMZ_FROM_IPV4(hdr.ipv4)
        } else if (hdr.ipv6.isValid()) {
            SCIDMZ_FROM_IPV6(hdr.ipv6, hdr.ipv6_ext)
        }
    }
}

#endif  // SCIDMZ_HEADERS_P4_
