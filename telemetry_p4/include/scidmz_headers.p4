// scidmz telemetry: header types and the packet parser shared by the v1model
// and TNA programs. Include after core.p4, the architecture file and
// scidmz_constants.p4.
//
// What is parsed mirrors src/scidmz/telemetry/parse.py: Ethernet, up to two
// VLAN tags (0x8100 / 0x88A8 / 0x9100), IPv4 with options (skipped by IHL),
// TCP or UDP only when the datagram is not a fragment (MF = 0, offset = 0).
// Options are skipped with constant-size advance() calls, one parser state
// per IHL value, because Tofino's parser cannot extract variable-size
// headers; BMv2 accepts the same states.

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

struct scidmz_headers_t {
    ethernet_h ethernet;
    vlan_h     vlan_outer;
    vlan_h     vlan_inner;
    ipv4_h     ipv4;
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
    bit<32> frame_len;      // L2 frame length without FCS
    bit<16> l2_len;         // Ethernet + VLAN header bytes (TNA frame length)
    bit<16> payload_len;    // TCP payload bytes (from the IPv4 total length)
    bit<32> seg_len;        // sequence space of the segment: payload + SYN + FIN
    bit<8>  tcp_flags;
    scidmz_hash_key_t key;  // outgoing orientation (src = campus / DTN-s side)

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

parser ScidmzPacketParser(packet_in pkt, out scidmz_headers_t hdr) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            SCIDMZ_VLAN_TPIDS_0: parse_vlan_outer;
            SCIDMZ_VLAN_TPIDS_1: parse_vlan_outer;
            SCIDMZ_VLAN_TPIDS_2: parse_vlan_outer;
            SCIDMZ_ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_vlan_outer {
        pkt.extract(hdr.vlan_outer);
        transition select(hdr.vlan_outer.ether_type) {
            SCIDMZ_VLAN_TPIDS_0: parse_vlan_inner;
            SCIDMZ_VLAN_TPIDS_1: parse_vlan_inner;
            SCIDMZ_VLAN_TPIDS_2: parse_vlan_inner;
            SCIDMZ_ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_vlan_inner {
        pkt.extract(hdr.vlan_inner);
        // a third tag is "vlan_depth" in parse.py: no IPv4, not measured
        transition select(hdr.vlan_inner.ether_type) {
            SCIDMZ_ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.version, hdr.ipv4.ihl) {
            (4w4, 4w5):  parse_l4;
            (4w4, 4w6):  skip_opt_1;
            (4w4, 4w7):  skip_opt_2;
            (4w4, 4w8):  skip_opt_3;
            (4w4, 4w9):  skip_opt_4;
            (4w4, 4w10): skip_opt_5;
            (4w4, 4w11): skip_opt_6;
            (4w4, 4w12): skip_opt_7;
            (4w4, 4w13): skip_opt_8;
            (4w4, 4w14): skip_opt_9;
            (4w4, 4w15): skip_opt_10;
            default:     bad_ipv4;   // version != 4 or IHL < 5
        }
    }
    state bad_ipv4 {
        hdr.ipv4.setInvalid();
        transition accept;
    }
    state skip_opt_1  { pkt.advance(32w32);  transition parse_l4; }
    state skip_opt_2  { pkt.advance(32w64);  transition parse_l4; }
    state skip_opt_3  { pkt.advance(32w96);  transition parse_l4; }
    state skip_opt_4  { pkt.advance(32w128); transition parse_l4; }
    state skip_opt_5  { pkt.advance(32w160); transition parse_l4; }
    state skip_opt_6  { pkt.advance(32w192); transition parse_l4; }
    state skip_opt_7  { pkt.advance(32w224); transition parse_l4; }
    state skip_opt_8  { pkt.advance(32w256); transition parse_l4; }
    state skip_opt_9  { pkt.advance(32w288); transition parse_l4; }
    state skip_opt_10 { pkt.advance(32w320); transition parse_l4; }
    state parse_l4 {
        // fragments carry no usable L4 header: class bytes only (parse.py "fragment")
        transition select(hdr.ipv4.flags[0:0], hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (1w0, 13w0, SCIDMZ_IPPROTO_TCP): parse_tcp;
            (1w0, 13w0, SCIDMZ_IPPROTO_UDP): parse_udp;
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

#endif  // SCIDMZ_HEADERS_P4_
