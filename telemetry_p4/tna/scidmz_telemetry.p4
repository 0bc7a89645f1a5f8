/* scidmz passive telemetry for Tofino (TNA), the papers' Edgecore Wedge100BF-32X.
 *
 * Same algorithms, tables, hashes and widths as ../v1model/scidmz_telemetry.p4
 * and the software twin (src/scidmz/telemetry/twin/dataplane.py); every number
 * comes from ../include/scidmz_constants.p4. Differences forced by the target
 * are listed in ../README.md ("TNA deviations") and marked TNA: below.
 *
 *   MLC Algorithm 2   class_lpm (tap, dst LPM) + DirectCounter class_bytes
 *   MLC 3.4.2/JENKS   RTT: (FID, eACK) -> ts in 4 register stages, matched by ACKs
 *   MLC Algorithm 5   queuing delay per class (egress-tap ts - ingress-tap ts)
 *   MLC Algorithm 7   active flows (C_TH within T_TH), FIN/RST removal, digests
 *   JENKS 3.1         Count-Min sketch, long flow (> 10 MB) digest
 *
 * IPv4 and IPv6, the encapsulations a tap or a remote mirror session delivers
 * (VLAN, MPLS, GRE, ERSPAN, VXLAN): ../include/scidmz_headers.p4.
 *
 * Build (Intel P4 Studio / open-p4studio SDE, Tofino 1):
 *   bf-p4c --target tofino --arch tna -o build/ scidmz_telemetry.p4
 *
 * Tofino rules followed: each Register is touched by exactly one
 * RegisterAction execute() per packet; at most 4 RegisterActions per
 * Register; 32-bit (or 2x32-bit pair) register cells; no loops, no floats;
 * digests are emitted by the ingress deparser from digest_type.
 */

#include <core.p4>
#include <tna.p4>
#include "../include/scidmz_constants.p4"
#include "../include/scidmz_headers.p4"

typedef bit<SCIDMZ_RTT_INDEX_BITS> rtt_index_t;
typedef bit<SCIDMZ_AF_INDEX_BITS>  af_index_t;
typedef bit<SCIDMZ_QD_INDEX_BITS>  qd_index_t;
typedef bit<SCIDMZ_CMS_INDEX_BITS> cms_index_t;

// A 64-bit cell as a Tofino register pair: the twin's (sig << 32) | ts.
struct cell_t {
    bit<32> ts;    // low word
    bit<32> sig;   // high word
}

struct scidmz_egress_headers_t { }
struct scidmz_egress_metadata_t { }

// ---------------------------------------------------------------------------
parser ScidmzIngressParser(packet_in pkt,
                           out scidmz_headers_t hdr,
                           out scidmz_metadata_t meta,
                           out ingress_intrinsic_metadata_t ig_intr_md) {
    ScidmzPacketParser() packet_parser;
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        // every field defined (the rest zero, as BMv2 starts v1model's metadata):
        // Tofino metadata is not zeroed by itself, and p4test warns otherwise
        meta = { tap = SCIDMZ_P4_TAP_NONE, cls = SCIDMZ_CLASS_NONE, dir = SCIDMZ_DIR_NONE, l4 = 0,
                 send_flow = 0, send_rtt = 0, ... };
        packet_parser.apply(pkt, hdr);
        transition accept;
    }
}

// ---------------------------------------------------------------------------
control ScidmzIngress(inout scidmz_headers_t hdr,
                      inout scidmz_metadata_t meta,
                      in ingress_intrinsic_metadata_t ig_intr_md,
                      in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                      inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                      inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {

    // ---- hashes: standard CRC-32 spelled out (= zlib.crc32 = BMv2 crc32) -------
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_flow;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_fsig;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_rtt0;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_rtt1;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_rtt2;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_rtt3;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_rsig;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_qdi;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_qds;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_cms0;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_cms1;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_cms2;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_flow) hash_flow;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_fsig) hash_fsig;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_rtt0) hash_rtt0;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_rtt1) hash_rtt1;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_rtt2) hash_rtt2;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_rtt3) hash_rtt3;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_rsig) hash_rsig;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_qdi) hash_qdi;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_qds) hash_qds;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_cms0) hash_cms0;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_cms1) hash_cms1;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_cms2) hash_cms2;
    // the IPv6 address folds of the hash key (constants.py "addresses")
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_fold_src;
    CRCPolynomial<bit<32>>(32w0x04C11DB7, true, false, false, 32w0xFFFFFFFF, 32w0xFFFFFFFF) poly_fold_dst;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_fold_src) hash_fold_src;
    Hash<bit<32>>(HashAlgorithm_t.CUSTOM, poly_fold_dst) hash_fold_dst;
    ScidmzSelectIp() select_ip;

    // ---- tap and class lookup (Algorithm 2) -------------------------------------
    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) class_bytes;

    action set_tap(bit<8> tap) {
        meta.tap = tap;
    }
    action unknown_port() {
        meta.tap = SCIDMZ_P4_TAP_NONE;
    }
    table tap_port {
        key = { ig_intr_md.ingress_port : exact @name("ingress_port"); }
        actions = { set_tap; unknown_port; }
        default_action = unknown_port();
        size = SCIDMZ_P4_TAP_PORT_SIZE;
    }

    action set_class(bit<8> class_id) {
        meta.cls = class_id;
        meta.dir = SCIDMZ_DIR_OUT;
        // TNA: the MAC byte count includes the 4-byte FCS; the twin counts without it
        class_bytes.count(32w4);
    }
    action class_miss() {
        meta.cls = SCIDMZ_CLASS_NONE;
        meta.dir = SCIDMZ_DIR_NONE;
    }
    // one 128-bit key for both families: IPv4 a/n is ::ffff:a/(96 + n)
    table class_lpm {
        key = {
            meta.tap      : exact @name("tap");
            meta.addr_dst : lpm   @name("dst_addr");
        }
        actions = { set_class; @defaultonly class_miss; }
        default_action = class_miss();
        counters = class_bytes;
        size = SCIDMZ_CLASS_LPM_SIZE;
    }

    action set_class_src(bit<8> class_id) {
        meta.cls = class_id;
        meta.dir = SCIDMZ_DIR_IN;
    }
    table class_lpm_src {
        key = { meta.addr_src : lpm @name("src_addr"); }
        actions = { set_class_src; @defaultonly class_miss; }
        default_action = class_miss();
        size = SCIDMZ_CLASS_LPM_SIZE;
    }

    // per class at the egress tap: tunnel-header bytes of the classified packets, which
    // the control plane subtracts from class_bytes (constants.py REG_CLASS_STRIP).
    // TNA: 32 bits (BfrtView widens it, as qd_sum).
    Register<bit<32>, bit<8>>(SCIDMZ_N_CLASSES) class_strip;
    RegisterAction<bit<32>, bit<8>, bit<32>>(class_strip) class_strip_add = {
        void apply(inout bit<32> v) { v = v + (bit<32>)meta.frame_start; }
    };

    // ---- Algorithm 5: queuing delay ---------------------------------------------
    Register<cell_t, qd_index_t>(SCIDMZ_QD_TABLE_SIZE) qd_table;
    RegisterAction<cell_t, qd_index_t, bit<32>>(qd_table) qd_stamp = {
        void apply(inout cell_t c) {
            c.sig = meta.qd_sig;
            c.ts = meta.now;
        }
    };
    // egress tap: on a signature match return the ingress-tap timestamp and
    // clear the cell (0 = no match; a real timestamp of exactly 0 is misread
    // as a miss, 1 in 2^32 ticks). The stored word is output as is because a
    // stateful ALU's output is a memory word or one of the update results.
    RegisterAction<cell_t, qd_index_t, bit<32>>(qd_table) qd_take = {
        void apply(inout cell_t c, out bit<32> stamp) {
            if (c.sig == meta.qd_sig) {
                stamp = c.ts;
                c.sig = 0;
                c.ts = 0;
            } else {
                stamp = 0;
            }
        }
    };
    Register<bit<32>, bit<8>>(SCIDMZ_N_CLASSES) qd_last;
    RegisterAction<bit<32>, bit<8>, bit<32>>(qd_last) qd_last_set = {
        void apply(inout bit<32> v) { v = meta.qd_sample; }
    };
    // TNA: 32-bit sum (no 64-bit add in one stateful ALU); BfrtView widens it
    // to 64 bits by accumulating deltas modulo 2^32 between reads.
    Register<bit<32>, bit<8>>(SCIDMZ_N_CLASSES) qd_sum;
    RegisterAction<bit<32>, bit<8>, bit<32>>(qd_sum) qd_sum_add = {
        void apply(inout bit<32> v) { v = v + meta.qd_sample; }
    };
    Register<bit<SCIDMZ_QD_CNT_BITS>, bit<8>>(SCIDMZ_N_CLASSES) qd_cnt;
    RegisterAction<bit<SCIDMZ_QD_CNT_BITS>, bit<8>, bit<32>>(qd_cnt) qd_cnt_inc = {
        void apply(inout bit<SCIDMZ_QD_CNT_BITS> v) { v = v + 1; }
    };

    // ---- Algorithm 7: active flows ------------------------------------------------
    Register<bit<32>, af_index_t>(SCIDMZ_AF_TABLE_SIZE) af_ts;
    // TNA: stamped before the owner is known (one access, earlier stage), so a
    // colliding flow refreshes a live occupant's timestamp (README).
    RegisterAction<bit<32>, af_index_t, bit<32>>(af_ts) af_ts_touch = {
        void apply(inout bit<32> v, out bit<32> prev) {
            prev = v;
            v = meta.now;
        }
    };

    Register<bit<32>, af_index_t>(SCIDMZ_AF_TABLE_SIZE) af_sig;
    // outgoing packet, occupant idle for T_TH (or empty): the slot is ours.
    // meta.af_write is the flow's sig, or 0 when a FIN/RST releases it.
    RegisterAction<bit<32>, af_index_t, bit<8>>(af_sig) af_sig_take_idle = {
        void apply(inout bit<32> v, out bit<8> state) {
            if (v == meta.flow_sig) {
                state = SCIDMZ_P4_AF_HIT;
            } else if (v == 0) {
                state = SCIDMZ_P4_AF_NEW;
            } else {
                state = SCIDMZ_P4_AF_OTHER;   // evicted occupant (was idle)
            }
            v = meta.af_write;
        }
    };
    // outgoing packet, occupant live: only an empty slot can be taken
    RegisterAction<bit<32>, af_index_t, bit<8>>(af_sig) af_sig_take_live = {
        void apply(inout bit<32> v, out bit<8> state) {
            if (v == meta.flow_sig) {
                state = SCIDMZ_P4_AF_HIT;
                v = meta.af_write;
            } else if (v == 0) {
                state = SCIDMZ_P4_AF_NEW;
                v = meta.af_write;
            } else {
                state = 0;   // collision with a live flow: not tracked
            }
        }
    };
    // incoming packet: ownership test, release on FIN/RST
    RegisterAction<bit<32>, af_index_t, bit<8>>(af_sig) af_sig_check = {
        void apply(inout bit<32> v, out bit<8> state) {
            if (v == meta.flow_sig) {
                state = SCIDMZ_P4_AF_HIT;
                v = meta.af_write;
            } else {
                state = 0;
            }
        }
    };

    Register<bit<SCIDMZ_AF_COUNT_BITS>, af_index_t>(SCIDMZ_AF_TABLE_SIZE) af_count;
    RegisterAction<bit<SCIDMZ_AF_COUNT_BITS>, af_index_t, bit<SCIDMZ_AF_COUNT_BITS>>(af_count) af_count_inc = {
        void apply(inout bit<SCIDMZ_AF_COUNT_BITS> v, out bit<SCIDMZ_AF_COUNT_BITS> old) {
            old = v;
            if (v < SCIDMZ_C_TH) {
                v = v + 1;
            }
        }
    };
    RegisterAction<bit<SCIDMZ_AF_COUNT_BITS>, af_index_t, bit<SCIDMZ_AF_COUNT_BITS>>(af_count) af_count_one = {
        void apply(inout bit<SCIDMZ_AF_COUNT_BITS> v) { v = 1; }
    };
    RegisterAction<bit<SCIDMZ_AF_COUNT_BITS>, af_index_t, bit<SCIDMZ_AF_COUNT_BITS>>(af_count) af_count_zero = {
        void apply(inout bit<SCIDMZ_AF_COUNT_BITS> v) { v = 0; }
    };

    Register<bit<8>, af_index_t>(SCIDMZ_AF_TABLE_SIZE) af_active;
    RegisterAction<bit<8>, af_index_t, bit<8>>(af_active) af_active_set = {
        void apply(inout bit<8> v, out bit<8> old) { old = v; v = 1; }
    };
    RegisterAction<bit<8>, af_index_t, bit<8>>(af_active) af_active_clear = {
        void apply(inout bit<8> v, out bit<8> old) { old = v; v = 0; }
    };
    RegisterAction<bit<8>, af_index_t, bit<8>>(af_active) af_active_read = {
        void apply(inout bit<8> v, out bit<8> old) { old = v; }
    };

    Register<bit<SCIDMZ_AF_BYTES_BITS>, af_index_t>(SCIDMZ_AF_TABLE_SIZE) af_bytes;
    RegisterAction<bit<SCIDMZ_AF_BYTES_BITS>, af_index_t, bit<32>>(af_bytes) af_bytes_add = {
        void apply(inout bit<SCIDMZ_AF_BYTES_BITS> v) { v = v + meta.frame_len; }
    };
    RegisterAction<bit<SCIDMZ_AF_BYTES_BITS>, af_index_t, bit<32>>(af_bytes) af_bytes_set = {
        void apply(inout bit<SCIDMZ_AF_BYTES_BITS> v) { v = meta.frame_len; }
    };
    RegisterAction<bit<SCIDMZ_AF_BYTES_BITS>, af_index_t, bit<32>>(af_bytes) af_bytes_zero = {
        void apply(inout bit<SCIDMZ_AF_BYTES_BITS> v) { v = 0; }
    };

    Register<bit<32>, af_index_t>(SCIDMZ_AF_TABLE_SIZE) af_max_eack;
    // returns the previous highest eACK; advances it when the segment is new data
    RegisterAction<bit<32>, af_index_t, bit<32>>(af_max_eack) af_max_eack_advance = {
        void apply(inout bit<32> v, out bit<32> old) {
            old = v;
            // v == 0: no eACK seen yet (the slot may come from the other tap)
            if (meta.af_new == 1 || v == 0 || (int<32>)(meta.key.eack - v) > 0) {
                v = meta.key.eack;
            }
        }
    };
    RegisterAction<bit<32>, af_index_t, bit<32>>(af_max_eack) af_max_eack_zero = {
        void apply(inout bit<32> v) { v = 0; }
    };

    Register<bit<32>, af_index_t>(SCIDMZ_AF_TABLE_SIZE) af_recover;
    RegisterAction<bit<32>, af_index_t, bit<32>>(af_recover) af_recover_set = {
        void apply(inout bit<32> v) { v = meta.max_eack_old; }
    };
    RegisterAction<bit<32>, af_index_t, bit<32>>(af_recover) af_recover_read = {
        void apply(inout bit<32> v, out bit<32> r) { r = v; }
    };
    RegisterAction<bit<32>, af_index_t, bit<32>>(af_recover) af_recover_zero = {
        void apply(inout bit<32> v) { v = 0; }
    };

    Register<bit<8>, af_index_t>(SCIDMZ_AF_TABLE_SIZE) af_recover_flag;
    RegisterAction<bit<8>, af_index_t, bit<8>>(af_recover_flag) af_recover_flag_set = {
        void apply(inout bit<8> v) { v = 1; }
    };
    RegisterAction<bit<8>, af_index_t, bit<8>>(af_recover_flag) af_recover_flag_zero = {
        void apply(inout bit<8> v) { v = 0; }
    };
    // incoming ACK: in recovery until the ACK passes the recovery point
    RegisterAction<bit<8>, af_index_t, bit<8>>(af_recover_flag) af_recover_flag_ack = {
        void apply(inout bit<8> v, out bit<8> in_recovery) {
            if (v == 1 && meta.ack_past == 0) {
                in_recovery = 1;
            } else {
                in_recovery = 0;
                v = 0;
            }
        }
    };

    Register<bit<32>, af_index_t>(SCIDMZ_AF_TABLE_SIZE) flow_rtt;
    RegisterAction<bit<32>, af_index_t, bit<32>>(flow_rtt) flow_rtt_set = {
        void apply(inout bit<32> v) { v = meta.rtt_sample; }
    };

    // ---- RTT: four stages of (sig, ts) cells ------------------------------------------
    // Outgoing segment: a live cell with our sig (poisoned or not) is poisoned
    // (duplicate = retransmission); otherwise (rtt_insert only) an empty or
    // expired cell takes the entry. Returns 1 = placed, 2 = duplicate.
    // "Live" is (ts - rtt_cut) >= 0 in serial arithmetic, rtt_cut = now - timeout.
    // Incoming ACK: a cell with our sig is cleared; returns its timestamp, or
    // TS_MASK when it was poisoned, or 0 when it does not match (a real
    // timestamp of exactly 0 or 2^32-1 is misread: 2 in 2^32 ticks).
    Register<cell_t, rtt_index_t>(SCIDMZ_RTT_STAGE_SIZE) rtt_stage0;
    Register<cell_t, rtt_index_t>(SCIDMZ_RTT_STAGE_SIZE) rtt_stage1;
    Register<cell_t, rtt_index_t>(SCIDMZ_RTT_STAGE_SIZE) rtt_stage2;
    Register<cell_t, rtt_index_t>(SCIDMZ_RTT_STAGE_SIZE) rtt_stage3;

#define SCIDMZ_RTT_STAGE_ACTIONS(N)                                                   \
    RegisterAction<cell_t, rtt_index_t, bit<8>>(rtt_stage##N) rtt_insert##N = {        \
        void apply(inout cell_t c, out bit<8> res) {                                  \
            if ((c.sig == meta.rtt_sig || c.sig == meta.rtt_sig_poisoned) &&          \
                (int<32>)(c.ts - meta.rtt_cut) >= 0) {                                \
                c.sig = meta.rtt_sig_poisoned;                                        \
                c.ts = meta.now;                                                      \
                res = 2;                                                              \
            } else if (c.sig == 0 || (int<32>)(c.ts - meta.rtt_cut) < 0) {            \
                c.sig = meta.rtt_sig;                                                 \
                c.ts = meta.now;                                                      \
                res = 1;                                                              \
            } else {                                                                  \
                res = 0;                                                              \
            }                                                                         \
        }                                                                             \
    };                                                                                \
    RegisterAction<cell_t, rtt_index_t, bit<8>>(rtt_stage##N) rtt_poison##N = {        \
        void apply(inout cell_t c, out bit<8> res) {                                  \
            if ((c.sig == meta.rtt_sig || c.sig == meta.rtt_sig_poisoned) &&          \
                (int<32>)(c.ts - meta.rtt_cut) >= 0) {                                \
                c.sig = meta.rtt_sig_poisoned;                                        \
                c.ts = meta.now;                                                      \
                res = 2;                                                              \
            } else {                                                                  \
                res = 0;                                                              \
            }                                                                         \
        }                                                                             \
    };                                                                                \
    RegisterAction<cell_t, rtt_index_t, bit<32>>(rtt_stage##N) rtt_match##N = {        \
        void apply(inout cell_t c, out bit<32> stamp) {                               \
            if (c.sig == meta.rtt_sig) {                                              \
                stamp = c.ts;                                                         \
                c.sig = 0;                                                            \
                c.ts = 0;                                                             \
            } else if (c.sig == meta.rtt_sig_poisoned) {                              \
                stamp = SCIDMZ_TS_MASK;                                               \
                c.sig = 0;                                                            \
                c.ts = 0;                                                             \
            } else {                                                                  \
                stamp = 0;                                                            \
            }                                                                         \
        }                                                                             \
    };

    SCIDMZ_RTT_STAGE_ACTIONS(0)
    SCIDMZ_RTT_STAGE_ACTIONS(1)
    SCIDMZ_RTT_STAGE_ACTIONS(2)
    SCIDMZ_RTT_STAGE_ACTIONS(3)

    // ---- Count-Min sketch ------------------------------------------------------------
    Register<bit<SCIDMZ_CMS_COUNTER_BITS>, cms_index_t>(SCIDMZ_CMS_COLS) cms_row0;
    Register<bit<SCIDMZ_CMS_COUNTER_BITS>, cms_index_t>(SCIDMZ_CMS_COLS) cms_row1;
    Register<bit<SCIDMZ_CMS_COUNTER_BITS>, cms_index_t>(SCIDMZ_CMS_COLS) cms_row2;
    // saturating add (P4_16 |+|), returns the new count
    RegisterAction<bit<32>, cms_index_t, bit<32>>(cms_row0) cms_add0 = {
        void apply(inout bit<32> v, out bit<32> n) { v = v |+| meta.frame_len; n = v; }
    };
    RegisterAction<bit<32>, cms_index_t, bit<32>>(cms_row1) cms_add1 = {
        void apply(inout bit<32> v, out bit<32> n) { v = v |+| meta.frame_len; n = v; }
    };
    RegisterAction<bit<32>, cms_index_t, bit<32>>(cms_row2) cms_add2 = {
        void apply(inout bit<32> v, out bit<32> n) { v = v |+| meta.frame_len; n = v; }
    };

    // ---- helpers -------------------------------------------------------------------------
    action key_out() {
        meta.key.src_addr = meta.fold_src;
        meta.key.dst_addr = meta.fold_dst;
        meta.dg_src = meta.addr_src;
        meta.dg_dst = meta.addr_dst;
    }
    action key_in() {
        meta.key.src_addr = meta.fold_dst;
        meta.key.dst_addr = meta.fold_src;
        meta.dg_src = meta.addr_dst;
        meta.dg_dst = meta.addr_src;
    }

    action flow_event(bit<8> kind) {
        meta.send_flow = 1;
        meta.flow_dg.kind = kind;
        meta.flow_dg.src_addr = meta.dg_src;
        meta.flow_dg.dst_addr = meta.dg_dst;
        meta.flow_dg.src_port = meta.key.src_port;
        meta.flow_dg.dst_port = meta.key.dst_port;
        meta.flow_dg.protocol = meta.key.protocol;
        meta.flow_dg.cls = meta.cls;
        meta.flow_dg.slot = (bit<32>)meta.af_slot;
        meta.flow_dg.ts = meta.now;
    }

    apply {
        // passive sink: nothing is forwarded (digests are still sent)
        ig_dprsr_md.drop_ctl = 1;
        ig_dprsr_md.digest_type = 0;
        meta.now = ig_intr_md.ingress_mac_tstamp[41:10];
        // TNA: no packet length in ingress; the frame length is rebuilt from the IP
        // length + the measured frame's L2 headers (parse.py counts the wire length:
        // equal except for frames padded to the 60-byte minimum)
        select_ip.apply(hdr, meta);

        bool measured = false;
        if (ig_prsr_md.parser_err == 0 && meta.fam != 0) {
            meta.frame_len = (bit<32>)(meta.ip_len + meta.l2_len);
            if (meta.fam == 4) {
                meta.fold_src = meta.addr_src[31:0];
                meta.fold_dst = meta.addr_dst[31:0];
            } else {
                meta.fold_src = hash_fold_src.get({ meta.addr_src });
                meta.fold_dst = hash_fold_dst.get({ meta.addr_dst });
            }
            bit<16> l4_len = meta.ip_len - meta.ip_hlen;
            if (hdr.tcp.isValid()) {
                bit<16> doff = ((bit<16>)hdr.tcp.data_offset) << 2;
                if (hdr.tcp.data_offset >= 5 && doff <= l4_len && meta.ip_len >= meta.ip_hlen) {
                    meta.l4 = 1;
                    meta.payload_len = l4_len - doff;
                    meta.tcp_flags = hdr.tcp.flags;
                    if (meta.fam == 6) { meta.ip_ident = hdr.tcp.checksum; }
                } else {
                    hdr.tcp.setInvalid();
                }
            }
            if (hdr.udp.isValid()) {
                if (hdr.udp.length >= 8 && hdr.udp.length <= l4_len) {
                    meta.l4 = 1;
                    if (meta.fam == 6) { meta.ip_ident = hdr.udp.checksum; }
                } else {
                    hdr.udp.setInvalid();
                }
            }
            if (meta.ip_len >= meta.ip_hlen) {
                tap_port.apply();
                if (meta.tap != SCIDMZ_P4_TAP_NONE) {
                    if (!class_lpm.apply().hit) {
                        class_lpm_src.apply();
                    }
                    measured = meta.dir != SCIDMZ_DIR_NONE;
                }
            }
        }

        if (measured) {
            if (meta.dir == SCIDMZ_DIR_OUT && meta.tap == SCIDMZ_TAP_EGRESS && meta.frame_start != 0) {
                class_strip_add.execute(meta.cls);
            }
            if (meta.dir == SCIDMZ_DIR_OUT) { key_out(); } else { key_in(); }
            meta.key.protocol = meta.ip_proto;
            meta.key.identification = meta.ip_ident;
            meta.key.eack = 0;
            bit<16> sport = 0;
            bit<16> dport = 0;
            meta.key.seq_no = 0;
            if (hdr.tcp.isValid()) {
                sport = hdr.tcp.src_port;
                dport = hdr.tcp.dst_port;
                meta.key.seq_no = hdr.tcp.seq_no;
            } else if (hdr.udp.isValid()) {
                sport = hdr.udp.src_port;
                dport = hdr.udp.dst_port;
            }
            if (meta.dir == SCIDMZ_DIR_OUT) {
                meta.key.src_port = sport;
                meta.key.dst_port = dport;
            } else {
                meta.key.src_port = dport;
                meta.key.dst_port = sport;
            }

            // ---- Algorithm 5 ----------------------------------------------------
            if (meta.dir == SCIDMZ_DIR_OUT) {
                meta.qd_idx = (bit<32>)hash_qdi.get(SCIDMZ_FIELDS_QD_INDEX(meta.key));
                meta.qd_sig = hash_qds.get(SCIDMZ_FIELDS_QD_SIG(meta.key)) & SCIDMZ_SIG_MASK;
                if (meta.qd_sig == 0) { meta.qd_sig = 1; }
                if (meta.tap == SCIDMZ_TAP_INGRESS) {
                    qd_stamp.execute(meta.qd_idx[SCIDMZ_QD_INDEX_BITS - 1:0]);
                } else {
                    bit<32> stamp = qd_take.execute(meta.qd_idx[SCIDMZ_QD_INDEX_BITS - 1:0]);
                    meta.qd_sample = meta.now - stamp;
                    if (stamp != 0 && meta.qd_sample <= SCIDMZ_P4_TNA_QD_TIMEOUT_TICKS) {
                        qd_last_set.execute(meta.cls);
                        qd_sum_add.execute(meta.cls);
                        qd_cnt_inc.execute(meta.cls);
                    }
                }
            }

            if (meta.tap == SCIDMZ_TAP_EGRESS && meta.l4 == 1) {
                meta.af_slot = hash_flow.get(SCIDMZ_FIELDS_FLOW(meta.key))[SCIDMZ_AF_INDEX_BITS - 1:0];
                meta.flow_sig = hash_fsig.get(SCIDMZ_FIELDS_FLOW_SIG(meta.key)) & SCIDMZ_SIG_MASK;
                if (meta.flow_sig == 0) { meta.flow_sig = 1; }
                bool fin_rst = hdr.tcp.isValid() &&
                    (meta.tcp_flags & (bit<8>)(SCIDMZ_TCP_FIN | SCIDMZ_TCP_RST)) != 0;
                meta.af_write = meta.flow_sig;
                if (fin_rst) { meta.af_write = 0; }
                meta.af_new = 0;
                meta.af_state = 0;
                bit<8> slot_ok = 0;
                bit<8> evicted_active = 0;

                // ---- Algorithm 7 ------------------------------------------------
                if (meta.dir == SCIDMZ_DIR_OUT) {
                    bit<32> prev = af_ts_touch.execute(meta.af_slot);
                    meta.af_gap = meta.now - prev;
                    if (meta.af_gap >= SCIDMZ_P4_TNA_T_TH_TICKS) {
                        meta.af_state = af_sig_take_idle.execute(meta.af_slot);
                    } else {
                        meta.af_state = af_sig_take_live.execute(meta.af_slot);
                    }
                } else {
                    meta.af_state = af_sig_check.execute(meta.af_slot);
                }
                // AF_OTHER from take_idle = an idle occupant was evicted: a new flow
                if (meta.dir == SCIDMZ_DIR_OUT && meta.af_state == SCIDMZ_P4_AF_OTHER) {
                    meta.af_state = SCIDMZ_P4_AF_NEW;
                    evicted_active = 1;   // confirmed by af_active below
                }
                if (meta.af_state == SCIDMZ_P4_AF_HIT || meta.af_state == SCIDMZ_P4_AF_NEW) {
                    slot_ok = 1;
                }
                if (meta.af_state == SCIDMZ_P4_AF_NEW) {
                    meta.af_new = 1;
                }

                if (meta.dir == SCIDMZ_DIR_OUT && slot_ok == 1) {
                    bit<8> was_active;
                    if (fin_rst) {
                        af_count_zero.execute(meta.af_slot);
                        was_active = af_active_clear.execute(meta.af_slot);
                        af_bytes_zero.execute(meta.af_slot);
                        if (was_active == 1) { flow_event(SCIDMZ_DIGEST_TIMEOUT); }
                    } else if (meta.af_new == 1) {
                        af_count_one.execute(meta.af_slot);
                        was_active = af_active_clear.execute(meta.af_slot);
                        af_bytes_set.execute(meta.af_slot);
                        if (evicted_active == 1 && was_active == 1) {
                            flow_event(SCIDMZ_DIGEST_TIMEOUT);
                        }
                    } else if (meta.af_gap < SCIDMZ_P4_TNA_T_TH_TICKS) {
                        bit<SCIDMZ_AF_COUNT_BITS> old = af_count_inc.execute(meta.af_slot);
                        if (old == SCIDMZ_C_TH - 1) {
                            af_active_set.execute(meta.af_slot);
                            flow_event(SCIDMZ_DIGEST_NEW_FLOW);
                        } else {
                            af_active_read.execute(meta.af_slot);
                        }
                        af_bytes_add.execute(meta.af_slot);
                    } else {
                        af_count_one.execute(meta.af_slot);
                        was_active = af_active_clear.execute(meta.af_slot);
                        af_bytes_add.execute(meta.af_slot);
                        if (was_active == 1) { flow_event(SCIDMZ_DIGEST_TIMEOUT); }
                    }
                } else if (meta.dir == SCIDMZ_DIR_IN && slot_ok == 1 && fin_rst) {
                    af_count_zero.execute(meta.af_slot);
                    bit<8> was_active_in = af_active_clear.execute(meta.af_slot);
                    af_bytes_zero.execute(meta.af_slot);
                    if (was_active_in == 1) { flow_event(SCIDMZ_DIGEST_TIMEOUT); }
                }

                // ---- Count-Min sketch (outgoing) ---------------------------------
                if (meta.dir == SCIDMZ_DIR_OUT) {
                    bit<32> n0 = cms_add0.execute(hash_cms0.get(SCIDMZ_FIELDS_CMS_ROW0(meta.key))[SCIDMZ_CMS_INDEX_BITS - 1:0]);
                    bit<32> n1 = cms_add1.execute(hash_cms1.get(SCIDMZ_FIELDS_CMS_ROW1(meta.key))[SCIDMZ_CMS_INDEX_BITS - 1:0]);
                    bit<32> n2 = cms_add2.execute(hash_cms2.get(SCIDMZ_FIELDS_CMS_ROW2(meta.key))[SCIDMZ_CMS_INDEX_BITS - 1:0]);
                    meta.cms_est = min(n0, min(n1, n2));
                    if (meta.cms_est >= SCIDMZ_LONG_FLOW_BYTES &&
                        meta.cms_est - meta.frame_len < SCIDMZ_LONG_FLOW_BYTES &&
                        meta.send_flow == 0) {
                        flow_event(SCIDMZ_DIGEST_LONG_FLOW);
                        if (slot_ok == 0) { meta.flow_dg.slot = SCIDMZ_TS_MASK; }
                    }
                }

                // ---- RTT ----------------------------------------------------------
                bit<8> rtt_write = 0;
                if (hdr.tcp.isValid()) {
                    meta.seg_len = (bit<32>)meta.payload_len;
                    if ((meta.tcp_flags & SCIDMZ_TCP_SYN) != 0) { meta.seg_len = meta.seg_len + 1; }
                    if ((meta.tcp_flags & SCIDMZ_TCP_FIN) != 0) { meta.seg_len = meta.seg_len + 1; }
                    if (meta.dir == SCIDMZ_DIR_OUT && meta.seg_len != 0) {
                        meta.key.eack = hdr.tcp.seq_no + meta.seg_len;
                    } else {
                        meta.key.eack = hdr.tcp.ack_no;
                    }
                    meta.rtt_idx0 = (bit<32>)hash_rtt0.get(SCIDMZ_FIELDS_RTT_STAGE0(meta.key));
                    meta.rtt_idx1 = (bit<32>)hash_rtt1.get(SCIDMZ_FIELDS_RTT_STAGE1(meta.key));
                    meta.rtt_idx2 = (bit<32>)hash_rtt2.get(SCIDMZ_FIELDS_RTT_STAGE2(meta.key));
                    meta.rtt_idx3 = (bit<32>)hash_rtt3.get(SCIDMZ_FIELDS_RTT_STAGE3(meta.key));
                    meta.rtt_sig = hash_rsig.get(SCIDMZ_FIELDS_RTT_SIG(meta.key)) & SCIDMZ_SIG_MASK;
                    if (meta.rtt_sig == 0) { meta.rtt_sig = 1; }
                    meta.rtt_sig_poisoned = meta.rtt_sig | SCIDMZ_SIG_POISON;
                    meta.rtt_cut = meta.now - SCIDMZ_P4_TNA_RTT_TIMEOUT_TICKS;

                    if (meta.dir == SCIDMZ_DIR_OUT && meta.seg_len != 0) {
                        bit<8> retx = 0;
                        if (slot_ok == 1) {
                            meta.max_eack_old = af_max_eack_advance.execute(meta.af_slot);
                            bit<32> ahead = meta.key.eack - meta.max_eack_old;
                            if (meta.af_new == 0 && (ahead == 0 || ahead >= SCIDMZ_SIG_POISON)) {
                                retx = 1;
                                af_recover_set.execute(meta.af_slot);
                                af_recover_flag_set.execute(meta.af_slot);
                            } else if (meta.af_new == 1) {
                                af_recover_zero.execute(meta.af_slot);
                                af_recover_flag_zero.execute(meta.af_slot);
                            }
                        }
                        // stage by stage: insert while nothing was placed or found,
                        // afterwards (and for retransmissions) only poison duplicates
                        meta.rtt_may_place = 1;
                        if (retx == 1) { meta.rtt_may_place = 0; }
                        bit<8> r0;
                        bit<8> r1;
                        bit<8> r2;
                        if (meta.rtt_may_place == 1) {
                            r0 = rtt_insert0.execute(meta.rtt_idx0[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        } else {
                            r0 = rtt_poison0.execute(meta.rtt_idx0[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        }
                        if (r0 != 0) { meta.rtt_may_place = 0; }
                        if (meta.rtt_may_place == 1) {
                            r1 = rtt_insert1.execute(meta.rtt_idx1[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        } else {
                            r1 = rtt_poison1.execute(meta.rtt_idx1[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        }
                        if (r1 != 0) { meta.rtt_may_place = 0; }
                        if (meta.rtt_may_place == 1) {
                            r2 = rtt_insert2.execute(meta.rtt_idx2[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        } else {
                            r2 = rtt_poison2.execute(meta.rtt_idx2[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        }
                        if (r2 != 0) { meta.rtt_may_place = 0; }
                        if (meta.rtt_may_place == 1) {
                            rtt_insert3.execute(meta.rtt_idx3[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        } else {
                            rtt_poison3.execute(meta.rtt_idx3[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        }
                    } else if (meta.dir == SCIDMZ_DIR_OUT && meta.af_new == 1) {
                        // a new flow whose first packet carries no data: reset its bookkeeping
                        af_max_eack_zero.execute(meta.af_slot);
                        af_recover_zero.execute(meta.af_slot);
                        af_recover_flag_zero.execute(meta.af_slot);
                    } else if (meta.dir == SCIDMZ_DIR_IN && (meta.tcp_flags & SCIDMZ_TCP_ACK) != 0) {
                        // match and clear every stage; one match = one sample
                        bit<32> s0 = rtt_match0.execute(meta.rtt_idx0[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        bit<32> s1 = rtt_match1.execute(meta.rtt_idx1[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        bit<32> s2 = rtt_match2.execute(meta.rtt_idx2[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        bit<32> s3 = rtt_match3.execute(meta.rtt_idx3[SCIDMZ_RTT_INDEX_BITS - 1:0]);
                        bit<8> matches = 0;
                        bit<8> poisoned = 0;
                        bit<32> ts0 = 0;
                        if (s0 != 0) { matches = matches + 1; if (s0 == SCIDMZ_TS_MASK) { poisoned = 1; } else { ts0 = s0; } }
                        if (s1 != 0) { matches = matches + 1; if (s1 == SCIDMZ_TS_MASK) { poisoned = 1; } else { ts0 = s1; } }
                        if (s2 != 0) { matches = matches + 1; if (s2 == SCIDMZ_TS_MASK) { poisoned = 1; } else { ts0 = s2; } }
                        if (s3 != 0) { matches = matches + 1; if (s3 == SCIDMZ_TS_MASK) { poisoned = 1; } else { ts0 = s3; } }
                        meta.in_recovery = 0;
                        if (slot_ok == 1) {
                            bit<32> recover = af_recover_read.execute(meta.af_slot);
                            bit<32> past = meta.key.eack - recover;
                            meta.ack_past = 0;
                            if (past != 0 && past < SCIDMZ_SIG_POISON) { meta.ack_past = 1; }
                            meta.in_recovery = af_recover_flag_ack.execute(meta.af_slot);
                        }
                        meta.rtt_sample = meta.now - ts0;
                        if (matches == 1 && poisoned == 0 && meta.in_recovery == 0 &&
                            meta.rtt_sample <= SCIDMZ_P4_TNA_RTT_TIMEOUT_TICKS) {
                            meta.send_rtt = 1;
                            meta.rtt_dg.src_addr = meta.dg_src;
                            meta.rtt_dg.dst_addr = meta.dg_dst;
                            meta.rtt_dg.src_port = meta.key.src_port;
                            meta.rtt_dg.dst_port = meta.key.dst_port;
                            meta.rtt_dg.protocol = meta.key.protocol;
                            meta.rtt_dg.cls = meta.cls;
                            meta.rtt_dg.rtt = meta.rtt_sample;
                            meta.rtt_dg.ts = meta.now;
                            if (slot_ok == 1) { rtt_write = 1; }
                        }
                    }
                }
                if (rtt_write == 1) {
                    flow_rtt_set.execute(meta.af_slot);
                } else if (meta.dir == SCIDMZ_DIR_OUT && meta.af_new == 1) {
                    meta.rtt_sample = 0;
                    flow_rtt_set.execute(meta.af_slot);
                }
            }
        }

        // one digest per packet: the first flow event, else the RTT sample
        if (meta.send_flow == 1) {
            ig_dprsr_md.digest_type = SCIDMZ_P4_TNA_DIGEST_TYPE_FLOW;
        } else if (meta.send_rtt == 1) {
            ig_dprsr_md.digest_type = SCIDMZ_P4_TNA_DIGEST_TYPE_RTT;
        }
    }
}

control ScidmzIngressDeparser(packet_out pkt,
                              inout scidmz_headers_t hdr,
                              in scidmz_metadata_t meta,
                              in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Digest<scidmz_rtt_digest_t>(SCIDMZ_P4_TNA_DIGEST_TYPE_RTT) rtt_digest;
    Digest<scidmz_flow_digest_t>(SCIDMZ_P4_TNA_DIGEST_TYPE_FLOW) flow_digest;
    apply {
        if (ig_dprsr_md.digest_type == SCIDMZ_P4_TNA_DIGEST_TYPE_RTT) {
            rtt_digest.pack(meta.rtt_dg);
        } else if (ig_dprsr_md.digest_type == SCIDMZ_P4_TNA_DIGEST_TYPE_FLOW) {
            flow_digest.pack(meta.flow_dg);
        }
        pkt.emit(hdr);
    }
}

// ---------------------------------------------------------------------------
// egress: unused (every packet is dropped in ingress)
parser ScidmzEgressParser(packet_in pkt,
                          out scidmz_egress_headers_t hdr,
                          out scidmz_egress_metadata_t meta,
                          out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        transition accept;
    }
}

control ScidmzEgress(inout scidmz_egress_headers_t hdr,
                     inout scidmz_egress_metadata_t meta,
                     in egress_intrinsic_metadata_t eg_intr_md,
                     in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                     inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                     inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply { }
}

control ScidmzEgressDeparser(packet_out pkt,
                             inout scidmz_egress_headers_t hdr,
                             in scidmz_egress_metadata_t meta,
                             in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply {
        pkt.emit(hdr);
    }
}

Pipeline(ScidmzIngressParser(),
         ScidmzIngress(),
         ScidmzIngressDeparser(),
         ScidmzEgressParser(),
         ScidmzEgress(),
         ScidmzEgressDeparser()) pipe;

Switch(pipe) main;
