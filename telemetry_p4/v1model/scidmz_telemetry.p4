/* scidmz passive telemetry for BMv2 (v1model).
 *
 * A measurement sink fed by two passive taps of the bottleneck router
 * (constants.py "Tap points and direction"): nothing is forwarded, every
 * packet is consumed after updating the telemetry state. The software twin
 * (src/scidmz/telemetry/twin/dataplane.py) implements the same algorithms with the
 * same tables, hashes and widths; every number comes from the generated
 * ../include/scidmz_constants.p4.
 *
 *   MLC Algorithm 2   class_lpm (tap, dst LPM) with the class_bytes direct counter
 *   MLC 3.4.2/JENKS   RTT from SEQ+len = eACK matched by ACKs, 4-stage hash table
 *   MLC Algorithm 5   queuing delay = egress-tap time - ingress-tap time per class
 *   MLC Algorithm 7   active flows (C_TH packets within T_TH), FIN/RST removal
 *   JENKS 3.1         Count-Min sketch long-flow (> 10 MB) marking
 *
 * IPv4 and IPv6, the encapsulations a tap or a remote mirror session delivers
 * (VLAN, MPLS, GRE, ERSPAN, VXLAN): ../include/scidmz_headers.p4.
 *
 * Target: p4c 1.2.4 (V1MODEL_VERSION 20200408), BMv2 simple_switch_grpc 1.15:
 *   p4c --target bmv2 --arch v1model --p4runtime-files scidmz_telemetry.p4info.txtpb \
 *       scidmz_telemetry.p4
 *
 * Style: every register is read at most once and written at most once per
 * packet, in pipeline order, so the logic maps one-to-one onto the TNA
 * program's RegisterActions.
 */

#include <core.p4>
// the two-parameter register<T, I> exists only from this v1model version on
#define V1MODEL_VERSION 20200408
#include <v1model.p4>
#include "../include/scidmz_constants.p4"
#include "../include/scidmz_headers.p4"

typedef bit<32> reg_index_t;

parser ScidmzParser(packet_in pkt,
                    out scidmz_headers_t hdr,
                    inout scidmz_metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    ScidmzPacketParser() packet_parser;
    state start {
        packet_parser.apply(pkt, hdr);
        transition accept;
    }
}

control ScidmzVerifyChecksum(inout scidmz_headers_t hdr, inout scidmz_metadata_t meta) {
    // checksums are not verified: captures taken at a sender carry offloaded
    // (wrong) checksums, and parse.py ignores them for the same reason
    apply { }
}

control ScidmzIngress(inout scidmz_headers_t hdr,
                      inout scidmz_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    // ---- state ---------------------------------------------------------------
    direct_counter(CounterType.packets_and_bytes) class_bytes;

    // RTT cells: sig in bits [63:32], timestamp in bits [31:0]
    register<bit<64>, reg_index_t>(SCIDMZ_RTT_STAGE_SIZE) rtt_stage0;
    register<bit<64>, reg_index_t>(SCIDMZ_RTT_STAGE_SIZE) rtt_stage1;
    register<bit<64>, reg_index_t>(SCIDMZ_RTT_STAGE_SIZE) rtt_stage2;
    register<bit<64>, reg_index_t>(SCIDMZ_RTT_STAGE_SIZE) rtt_stage3;

    register<bit<32>, reg_index_t>(SCIDMZ_AF_TABLE_SIZE) af_sig;
    register<bit<32>, reg_index_t>(SCIDMZ_AF_TABLE_SIZE) af_ts;
    register<bit<SCIDMZ_AF_COUNT_BITS>, reg_index_t>(SCIDMZ_AF_TABLE_SIZE) af_count;
    register<bit<8>, reg_index_t>(SCIDMZ_AF_TABLE_SIZE) af_active;
    register<bit<SCIDMZ_AF_BYTES_BITS>, reg_index_t>(SCIDMZ_AF_TABLE_SIZE) af_bytes;
    register<bit<32>, reg_index_t>(SCIDMZ_AF_TABLE_SIZE) flow_rtt;
    register<bit<32>, reg_index_t>(SCIDMZ_AF_TABLE_SIZE) af_max_eack;
    register<bit<32>, reg_index_t>(SCIDMZ_AF_TABLE_SIZE) af_recover;
    register<bit<8>, reg_index_t>(SCIDMZ_AF_TABLE_SIZE) af_recover_flag;

    // queuing-delay cells: sig in bits [63:32], ingress-tap timestamp in [31:0]
    register<bit<64>, reg_index_t>(SCIDMZ_QD_TABLE_SIZE) qd_table;
    register<bit<32>, reg_index_t>(SCIDMZ_N_CLASSES) qd_last;
    register<bit<SCIDMZ_QD_SUM_BITS>, reg_index_t>(SCIDMZ_N_CLASSES) qd_sum;
    register<bit<SCIDMZ_QD_CNT_BITS>, reg_index_t>(SCIDMZ_N_CLASSES) qd_cnt;

    register<bit<SCIDMZ_CMS_COUNTER_BITS>, reg_index_t>(SCIDMZ_CMS_COLS) cms_row0;
    register<bit<SCIDMZ_CMS_COUNTER_BITS>, reg_index_t>(SCIDMZ_CMS_COLS) cms_row1;
    register<bit<SCIDMZ_CMS_COUNTER_BITS>, reg_index_t>(SCIDMZ_CMS_COLS) cms_row2;

    // per class at the egress tap: tunnel-header bytes of the classified packets. The
    // direct counter adds each packet's whole length; the measured frame is the inner
    // one, so the control plane subtracts these (constants.py REG_CLASS_STRIP).
    register<bit<SCIDMZ_CLASS_STRIP_BITS>, reg_index_t>(SCIDMZ_N_CLASSES) class_strip;

    // ---- tap and class lookup (Algorithm 2) -----------------------------------
    action set_tap(bit<8> tap) {
        meta.tap = tap;
    }
    action unknown_port() {
        meta.tap = SCIDMZ_P4_TAP_NONE;
    }
    table tap_port {
        key = { standard_metadata.ingress_port : exact @name("ingress_port"); }
        actions = { set_tap; unknown_port; }
        default_action = unknown_port();
        size = SCIDMZ_P4_TAP_PORT_SIZE;
    }

    action set_class(bit<8> class_id) {
        meta.cls = class_id;
        meta.dir = SCIDMZ_DIR_OUT;
    }
    action class_miss() {
        meta.cls = SCIDMZ_CLASS_NONE;
        meta.dir = SCIDMZ_DIR_NONE;
    }
    // Algorithm 2: LPM on the destination; the DTN-r /32 beats the remote /16.
    // Entries exist per tap so the byte counters of the two taps stay apart.
    // One 128-bit key for both families: IPv4 a/n is ::ffff:a/(96 + n).
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
    // the same prefixes on the source address: packets coming back (ACKs)
    table class_lpm_src {
        key = { meta.addr_src : lpm @name("src_addr"); }
        actions = { set_class_src; @defaultonly class_miss; }
        default_action = class_miss();
        size = SCIDMZ_CLASS_LPM_SIZE;
    }

    // ---- helpers ---------------------------------------------------------------
    // 5-tuple in the outgoing orientation (constants.FLOW_FIELDS comment):
    // an incoming packet's addresses and ports are swapped
    action key_out() {
        meta.key.src_addr = meta.fold_src;
        meta.key.dst_addr = meta.fold_dst;
        meta.dg_src = meta.addr_src;
        meta.dg_dst = meta.addr_dst;
        meta.key.protocol = meta.ip_proto;
        meta.key.identification = meta.ip_ident;
        meta.key.src_port = 0;
        meta.key.dst_port = 0;
        meta.key.seq_no = 0;
        meta.key.eack = 0;
    }
    action key_in() {
        meta.key.src_addr = meta.fold_dst;
        meta.key.dst_addr = meta.fold_src;
        meta.dg_src = meta.addr_dst;
        meta.dg_dst = meta.addr_src;
        meta.key.protocol = meta.ip_proto;
        meta.key.identification = meta.ip_ident;
        meta.key.src_port = 0;
        meta.key.dst_port = 0;
        meta.key.seq_no = 0;
        meta.key.eack = 0;
    }

    // the hash-key addresses: IPv4 as is (the IPv4 hashes did not change with IPv6),
    // IPv6 folded to 32 bits by the standard CRC-32 (constants.py "addresses")
    action fold_addresses() {
        hash(meta.fold_src, HashAlgorithm.crc32, 32w0, { meta.addr_src }, 64w0x100000000);
        hash(meta.fold_dst, HashAlgorithm.crc32, 32w0, { meta.addr_dst }, 64w0x100000000);
    }

    action flow_hashes() {
        hash(meta.flow_slot, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_FLOW(meta.key), (bit<32>)SCIDMZ_AF_TABLE_SIZE);
        hash(meta.flow_sig, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_FLOW_SIG(meta.key), (bit<32>)SCIDMZ_SIG_POISON);
    }

    action rtt_hashes() {
        hash(meta.rtt_idx0, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_RTT_STAGE0(meta.key), (bit<32>)SCIDMZ_RTT_STAGE_SIZE);
        hash(meta.rtt_idx1, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_RTT_STAGE1(meta.key), (bit<32>)SCIDMZ_RTT_STAGE_SIZE);
        hash(meta.rtt_idx2, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_RTT_STAGE2(meta.key), (bit<32>)SCIDMZ_RTT_STAGE_SIZE);
        hash(meta.rtt_idx3, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_RTT_STAGE3(meta.key), (bit<32>)SCIDMZ_RTT_STAGE_SIZE);
        // low SIG_BITS bits of the CRC (max = 2^31 keeps exactly those)
        hash(meta.rtt_sig, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_RTT_SIG(meta.key), (bit<32>)SCIDMZ_SIG_POISON);
    }

    action qd_hashes() {
        hash(meta.qd_idx, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_QD_INDEX(meta.key), (bit<32>)SCIDMZ_QD_TABLE_SIZE);
        hash(meta.qd_sig, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_QD_SIG(meta.key), (bit<32>)SCIDMZ_SIG_POISON);
    }

    action cms_hashes() {
        hash(meta.cms_idx0, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_CMS_ROW0(meta.key), (bit<32>)SCIDMZ_CMS_COLS);
        hash(meta.cms_idx1, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_CMS_ROW1(meta.key), (bit<32>)SCIDMZ_CMS_COLS);
        hash(meta.cms_idx2, HashAlgorithm.crc32, 32w0,
             SCIDMZ_FIELDS_CMS_ROW2(meta.key), (bit<32>)SCIDMZ_CMS_COLS);
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
        meta.flow_dg.slot = meta.flow_slot;
        meta.flow_dg.ts = meta.now;
    }

    // ---- Algorithm 5: queuing delay -----------------------------------------------
    action qd_ingress_stamp() {
        // the packet entering the bottleneck router: remember when
        qd_table.write(meta.qd_idx, meta.qd_sig ++ meta.now);
    }

    apply {
        // passive sink: nothing leaves the switch
        mark_to_drop(standard_metadata);
        meta.send_flow = 0;
        meta.send_rtt = 0;
        meta.rtt_done = 0;
        meta.qd_ok = 0;
        meta.in_recovery = 0;
        meta.af_state = 0;

        ScidmzSelectIp.apply(hdr, meta);
        if (standard_metadata.parser_error == error.NoError && meta.fam != 0) {
            meta.now = standard_metadata.ingress_global_timestamp[31:0];
            // the measured frame: the packet less the tunnel headers before it (parse.py frame_len)
            meta.frame_len = standard_metadata.packet_length - (bit<32>)meta.frame_start;
            if (meta.fam == 4) {
                meta.fold_src = meta.addr_src[31:0];
                meta.fold_dst = meta.addr_dst[31:0];
            } else {
                fold_addresses();
            }

            // parse.py bad_ip_length: IP length below the header, or beyond the frame
            bit<16> l4_len = meta.ip_len - meta.ip_hlen;
            bool ip_len_ok = meta.ip_len >= meta.ip_hlen &&
                (bit<32>)meta.ip_len + (bit<32>)meta.l2_len <= meta.frame_len;

            // L4 usable only with a sane header (parse.py bad_tcp_offset / bad_udp_length)
            meta.l4 = 0;
            if (hdr.tcp.isValid()) {
                bit<16> doff = ((bit<16>)hdr.tcp.data_offset) << 2;
                if (hdr.tcp.data_offset < 5 || doff > l4_len) {
                    hdr.tcp.setInvalid();
                } else {
                    meta.l4 = 1;
                    meta.payload_len = l4_len - doff;
                    meta.tcp_flags = hdr.tcp.flags;
                    if (meta.fam == 6) { meta.ip_ident = hdr.tcp.checksum; }
                }
            }
            if (hdr.udp.isValid()) {
                if (hdr.udp.length < 8 || hdr.udp.length > l4_len) {
                    hdr.udp.setInvalid();
                } else {
                    meta.l4 = 1;
                    if (meta.fam == 6) { meta.ip_ident = hdr.udp.checksum; }
                }
            }

            tap_port.apply();
            if (meta.tap != SCIDMZ_P4_TAP_NONE && ip_len_ok) {
                if (!class_lpm.apply().hit) {
                    class_lpm_src.apply();
                }
            } else {
                meta.dir = SCIDMZ_DIR_NONE;
            }
        } else {
            meta.dir = SCIDMZ_DIR_NONE;
        }

        if (meta.dir == SCIDMZ_DIR_OUT && meta.tap == SCIDMZ_TAP_EGRESS && meta.frame_start != 0) {
            bit<SCIDMZ_CLASS_STRIP_BITS> strip;
            class_strip.read(strip, (reg_index_t)meta.cls);
            class_strip.write((reg_index_t)meta.cls, strip + (bit<SCIDMZ_CLASS_STRIP_BITS>)meta.frame_start);
        }

        if (meta.dir != SCIDMZ_DIR_NONE) {
            bit<16> sport = 0;
            bit<16> dport = 0;
            if (meta.dir == SCIDMZ_DIR_OUT) {
                key_out();
            } else {
                key_in();
            }
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

            // ---- Algorithm 5 --------------------------------------------------
            if (meta.dir == SCIDMZ_DIR_OUT) {
                qd_hashes();
                if (meta.qd_sig == SCIDMZ_SIG_EMPTY) {
                    meta.qd_sig = 1;
                }
                if (meta.tap == SCIDMZ_TAP_INGRESS) {
                    qd_ingress_stamp();
                } else {
                    bit<64> cell;
                    qd_table.read(cell, meta.qd_idx);
                    if (cell[63:32] == meta.qd_sig) {
                        qd_table.write(meta.qd_idx, 64w0);
                        bit<32> age = meta.now - cell[31:0];
                        if (age <= SCIDMZ_QD_TIMEOUT_TICKS) {
                            meta.qd_sample = age;
                            meta.qd_ok = 1;
                        }
                    }
                    if (meta.qd_ok == 1) {
                        bit<SCIDMZ_QD_SUM_BITS> qsum;
                        bit<SCIDMZ_QD_CNT_BITS> qcnt;
                        qd_last.write((reg_index_t)meta.cls, meta.qd_sample);
                        qd_sum.read(qsum, (reg_index_t)meta.cls);
                        qd_sum.write((reg_index_t)meta.cls,
                                     qsum + (bit<SCIDMZ_QD_SUM_BITS>)meta.qd_sample);
                        qd_cnt.read(qcnt, (reg_index_t)meta.cls);
                        qd_cnt.write((reg_index_t)meta.cls, qcnt + 1);
                    }
                }
            }

            // everything else runs on the bottleneck (egress) tap, TCP/UDP only
            if (meta.tap == SCIDMZ_TAP_EGRESS && meta.l4 == 1) {
                flow_hashes();
                if (meta.flow_sig == SCIDMZ_SIG_EMPTY) {
                    meta.flow_sig = 1;
                }
                // Read every per-flow register once, compute, write back once:
                // the access pattern of the TNA RegisterActions.
                bit<32> owner;
                bit<32> prev_ts;
                bit<8> active;
                bit<SCIDMZ_AF_COUNT_BITS> count;
                bit<SCIDMZ_AF_BYTES_BITS> fbytes;
                bit<32> max_eack;
                bit<32> recover;
                bit<8> rflag;
                af_sig.read(owner, meta.flow_slot);
                af_ts.read(prev_ts, meta.flow_slot);
                af_active.read(active, meta.flow_slot);
                af_count.read(count, meta.flow_slot);
                af_bytes.read(fbytes, meta.flow_slot);
                af_max_eack.read(max_eack, meta.flow_slot);
                af_recover.read(recover, meta.flow_slot);
                af_recover_flag.read(rflag, meta.flow_slot);
                bit<8> slot_ok = 0;
                bit<8> is_new = 0;
                bit<8> rtt_write = 0;
                bit<32> new_flow_rtt = 0;
                bit<32> cms_slot = SCIDMZ_TS_MASK;

                // ---- Algorithm 7: active flows (outgoing packets) -------------------
                if (meta.dir == SCIDMZ_DIR_OUT) {
                    meta.af_gap = meta.now - prev_ts;
                    if (owner == meta.flow_sig) {
                        prev_ts = meta.now;
                        if (meta.af_gap < SCIDMZ_T_TH_TICKS) {
                            if (count < SCIDMZ_C_TH) {
                                count = count + 1;
                                if (count == SCIDMZ_C_TH) {
                                    active = 1;
                                    if (meta.send_flow == 0) { flow_event(SCIDMZ_DIGEST_NEW_FLOW); }
                                }
                            }
                        } else {
                            // a gap of T_TH or more: the flow went idle, the count restarts
                            if (active == 1) {
                                active = 0;
                                if (meta.send_flow == 0) { flow_event(SCIDMZ_DIGEST_TIMEOUT); }
                            }
                            count = 1;
                        }
                        fbytes = fbytes + meta.frame_len;
                        slot_ok = 1;
                    } else if (owner == SCIDMZ_SIG_EMPTY || meta.af_gap >= SCIDMZ_T_TH_TICKS) {
                        // free slot, or its occupant idle for T_TH: take it. The
                        // timeout of an evicted active flow is reported by slot.
                        if (owner != SCIDMZ_SIG_EMPTY && active == 1) {
                            if (meta.send_flow == 0) { flow_event(SCIDMZ_DIGEST_TIMEOUT); }
                        }
                        owner = meta.flow_sig;
                        count = 1;
                        prev_ts = meta.now;
                        active = 0;
                        fbytes = meta.frame_len;
                        rtt_write = 1;
                        new_flow_rtt = 0;
                        max_eack = 0;
                        recover = 0;
                        rflag = 0;
                        slot_ok = 1;
                        is_new = 1;
                        if (SCIDMZ_C_TH <= 1) {
                            active = 1;
                            if (meta.send_flow == 0) { flow_event(SCIDMZ_DIGEST_NEW_FLOW); }
                        }
                    }
                    // else: another live flow holds the slot (a collision): not tracked

                    // ---- Count-Min sketch: long flows (JENKS 3.1) ------------------------
                    cms_hashes();
                    bit<32> v0;
                    bit<32> v1;
                    bit<32> v2;
                    cms_row0.read(v0, meta.cms_idx0);
                    cms_row1.read(v1, meta.cms_idx1);
                    cms_row2.read(v2, meta.cms_idx2);
                    // saturating add of the frame length
                    if (v0 > SCIDMZ_P4_CMS_MAX - meta.frame_len) { v0 = SCIDMZ_P4_CMS_MAX; }
                    else { v0 = v0 + meta.frame_len; }
                    if (v1 > SCIDMZ_P4_CMS_MAX - meta.frame_len) { v1 = SCIDMZ_P4_CMS_MAX; }
                    else { v1 = v1 + meta.frame_len; }
                    if (v2 > SCIDMZ_P4_CMS_MAX - meta.frame_len) { v2 = SCIDMZ_P4_CMS_MAX; }
                    else { v2 = v2 + meta.frame_len; }
                    cms_row0.write(meta.cms_idx0, v0);
                    cms_row1.write(meta.cms_idx1, v1);
                    cms_row2.write(meta.cms_idx2, v2);
                    meta.cms_est = v0;
                    if (v1 < meta.cms_est) { meta.cms_est = v1; }
                    if (v2 < meta.cms_est) { meta.cms_est = v2; }
                    // the crossing packet reports the long flow, once
                    if (meta.cms_est >= SCIDMZ_LONG_FLOW_BYTES &&
                        meta.cms_est - meta.frame_len < SCIDMZ_LONG_FLOW_BYTES) {
                        if (slot_ok == 1) {
                            cms_slot = meta.flow_slot;
                        }
                        if (meta.send_flow == 0) {
                            flow_event(SCIDMZ_DIGEST_LONG_FLOW);
                            meta.flow_dg.slot = cms_slot;
                        }
                    }
                } else if (owner == meta.flow_sig) {
                    slot_ok = 1;  // incoming packet of a tracked flow: no update
                }

                // ---- RTT (MLC 3.4.2, JENKS 3.1) ------------------------------------
                if (hdr.tcp.isValid()) {
                    if (meta.dir == SCIDMZ_DIR_OUT) {
                        meta.seg_len = (bit<32>)meta.payload_len;
                        if ((meta.tcp_flags & SCIDMZ_TCP_SYN) != 0) {
                            meta.seg_len = meta.seg_len + 1;
                        }
                        if ((meta.tcp_flags & SCIDMZ_TCP_FIN) != 0) {
                            meta.seg_len = meta.seg_len + 1;
                        }
                        if (meta.seg_len != 0) {
                            meta.key.eack = hdr.tcp.seq_no + meta.seg_len;
                            bit<8> retx = 0;
                            if (slot_ok == 1) {
                                // serial arithmetic: eACK beyond the highest seen is new data;
                                // 0 = none seen yet (the slot may come from the other tap)
                                bit<32> ahead = meta.key.eack - max_eack;
                                if (is_new == 1 || max_eack == 0 || (ahead != 0 && ahead < SCIDMZ_SIG_POISON)) {
                                    max_eack = meta.key.eack;
                                } else {
                                    // retransmission (Karn): ACKs up to the highest eACK
                                    // sent so far are ambiguous
                                    retx = 1;
                                    recover = max_eack;
                                    rflag = 1;
                                }
                            }
                            rtt_hashes();
                            if (meta.rtt_sig == SCIDMZ_SIG_EMPTY) {
                                meta.rtt_sig = 1;
                            }
                            bit<8> dup = 0;
                            bit<8> placed = 0;
                            bit<64> c0;
                            bit<64> c1;
                            bit<64> c2;
                            bit<64> c3;
                            // stage 0
                            rtt_stage0.read(c0, meta.rtt_idx0);
                            if (c0[63:32] != 0 && (c0[63:32] & SCIDMZ_SIG_MASK) == meta.rtt_sig &&
                                meta.now - c0[31:0] <= SCIDMZ_RTT_TIMEOUT_TICKS) {
                                rtt_stage0.write(meta.rtt_idx0,
                                                 (meta.rtt_sig | SCIDMZ_SIG_POISON) ++ meta.now);
                                dup = 1;
                            } else if (placed == 0 && dup == 0 && retx == 0 &&
                                       (c0[63:32] == 0 ||
                                        meta.now - c0[31:0] > SCIDMZ_RTT_TIMEOUT_TICKS)) {
                                rtt_stage0.write(meta.rtt_idx0, meta.rtt_sig ++ meta.now);
                                placed = 1;
                            }
                            // stage 1
                            rtt_stage1.read(c1, meta.rtt_idx1);
                            if (c1[63:32] != 0 && (c1[63:32] & SCIDMZ_SIG_MASK) == meta.rtt_sig &&
                                meta.now - c1[31:0] <= SCIDMZ_RTT_TIMEOUT_TICKS) {
                                rtt_stage1.write(meta.rtt_idx1,
                                                 (meta.rtt_sig | SCIDMZ_SIG_POISON) ++ meta.now);
                                dup = 1;
                            } else if (placed == 0 && dup == 0 && retx == 0 &&
                                       (c1[63:32] == 0 ||
                                        meta.now - c1[31:0] > SCIDMZ_RTT_TIMEOUT_TICKS)) {
                                rtt_stage1.write(meta.rtt_idx1, meta.rtt_sig ++ meta.now);
                                placed = 1;
                            }
                            // stage 2
                            rtt_stage2.read(c2, meta.rtt_idx2);
                            if (c2[63:32] != 0 && (c2[63:32] & SCIDMZ_SIG_MASK) == meta.rtt_sig &&
                                meta.now - c2[31:0] <= SCIDMZ_RTT_TIMEOUT_TICKS) {
                                rtt_stage2.write(meta.rtt_idx2,
                                                 (meta.rtt_sig | SCIDMZ_SIG_POISON) ++ meta.now);
                                dup = 1;
                            } else if (placed == 0 && dup == 0 && retx == 0 &&
                                       (c2[63:32] == 0 ||
                                        meta.now - c2[31:0] > SCIDMZ_RTT_TIMEOUT_TICKS)) {
                                rtt_stage2.write(meta.rtt_idx2, meta.rtt_sig ++ meta.now);
                                placed = 1;
                            }
                            // stage 3
                            rtt_stage3.read(c3, meta.rtt_idx3);
                            if (c3[63:32] != 0 && (c3[63:32] & SCIDMZ_SIG_MASK) == meta.rtt_sig &&
                                meta.now - c3[31:0] <= SCIDMZ_RTT_TIMEOUT_TICKS) {
                                rtt_stage3.write(meta.rtt_idx3,
                                                 (meta.rtt_sig | SCIDMZ_SIG_POISON) ++ meta.now);
                                dup = 1;
                            } else if (placed == 0 && dup == 0 && retx == 0 &&
                                       (c3[63:32] == 0 ||
                                        meta.now - c3[31:0] > SCIDMZ_RTT_TIMEOUT_TICKS)) {
                                rtt_stage3.write(meta.rtt_idx3, meta.rtt_sig ++ meta.now);
                                placed = 1;
                            }
                        }
                    } else if ((meta.tcp_flags & SCIDMZ_TCP_ACK) != 0) {
                        // incoming ACK: (FID reversed = the outgoing key, ACK number)
                        meta.key.eack = hdr.tcp.ack_no;
                        rtt_hashes();
                        if (meta.rtt_sig == SCIDMZ_SIG_EMPTY) {
                            meta.rtt_sig = 1;
                        }
                        bit<8> matches = 0;
                        bit<8> poisoned = 0;
                        bit<8> expired = 0;
                        bit<32> ts0 = 0;
                        bit<64> l0;
                        bit<64> l1;
                        bit<64> l2;
                        bit<64> l3;
                        // every matching cell is cleared; more than one is ambiguous
                        rtt_stage0.read(l0, meta.rtt_idx0);
                        if (l0[63:32] != 0 && (l0[63:32] & SCIDMZ_SIG_MASK) == meta.rtt_sig) {
                            matches = matches + 1;
                            if ((l0[63:32] & SCIDMZ_SIG_POISON) != 0) { poisoned = 1; }
                            if (meta.now - l0[31:0] > SCIDMZ_RTT_TIMEOUT_TICKS) { expired = 1; }
                            ts0 = l0[31:0];
                            rtt_stage0.write(meta.rtt_idx0, 64w0);
                        }
                        rtt_stage1.read(l1, meta.rtt_idx1);
                        if (l1[63:32] != 0 && (l1[63:32] & SCIDMZ_SIG_MASK) == meta.rtt_sig) {
                            matches = matches + 1;
                            if ((l1[63:32] & SCIDMZ_SIG_POISON) != 0) { poisoned = 1; }
                            if (meta.now - l1[31:0] > SCIDMZ_RTT_TIMEOUT_TICKS) { expired = 1; }
                            ts0 = l1[31:0];
                            rtt_stage1.write(meta.rtt_idx1, 64w0);
                        }
                        rtt_stage2.read(l2, meta.rtt_idx2);
                        if (l2[63:32] != 0 && (l2[63:32] & SCIDMZ_SIG_MASK) == meta.rtt_sig) {
                            matches = matches + 1;
                            if ((l2[63:32] & SCIDMZ_SIG_POISON) != 0) { poisoned = 1; }
                            if (meta.now - l2[31:0] > SCIDMZ_RTT_TIMEOUT_TICKS) { expired = 1; }
                            ts0 = l2[31:0];
                            rtt_stage2.write(meta.rtt_idx2, 64w0);
                        }
                        rtt_stage3.read(l3, meta.rtt_idx3);
                        if (l3[63:32] != 0 && (l3[63:32] & SCIDMZ_SIG_MASK) == meta.rtt_sig) {
                            matches = matches + 1;
                            if ((l3[63:32] & SCIDMZ_SIG_POISON) != 0) { poisoned = 1; }
                            if (meta.now - l3[31:0] > SCIDMZ_RTT_TIMEOUT_TICKS) { expired = 1; }
                            ts0 = l3[31:0];
                            rtt_stage3.write(meta.rtt_idx3, 64w0);
                        }
                        // Karn: while in recovery an ACK up to the recovery point gives no sample
                        meta.in_recovery = 0;
                        if (slot_ok == 1 && rflag == 1) {
                            bit<32> past = meta.key.eack - recover;
                            if (past != 0 && past < SCIDMZ_SIG_POISON) {
                                rflag = 0;
                            } else {
                                meta.in_recovery = 1;
                            }
                        }
                        if (matches == 1 && expired == 0 && poisoned == 0 && meta.in_recovery == 0) {
                            meta.rtt_sample = meta.now - ts0;
                            meta.send_rtt = 1;
                            meta.rtt_dg.src_addr = meta.dg_src;
                            meta.rtt_dg.dst_addr = meta.dg_dst;
                            meta.rtt_dg.src_port = meta.key.src_port;
                            meta.rtt_dg.dst_port = meta.key.dst_port;
                            meta.rtt_dg.protocol = meta.key.protocol;
                            meta.rtt_dg.cls = meta.cls;
                            meta.rtt_dg.rtt = meta.rtt_sample;
                            meta.rtt_dg.ts = meta.now;
                            if (slot_ok == 1) {
                                rtt_write = 1;
                                new_flow_rtt = meta.rtt_sample;
                            }
                        }
                    }

                    // ---- FIN or RST, either direction, removes the flow (Algorithm 7)
                    if ((meta.tcp_flags & (bit<8>)(SCIDMZ_TCP_FIN | SCIDMZ_TCP_RST)) != 0 &&
                        owner == meta.flow_sig) {
                        if (active == 1) {
                            if (meta.send_flow == 0) { flow_event(SCIDMZ_DIGEST_TIMEOUT); }
                        }
                        owner = SCIDMZ_SIG_EMPTY;
                        count = 0;
                        active = 0;
                        fbytes = 0;
                        rflag = 0;
                    }
                }

                af_sig.write(meta.flow_slot, owner);
                af_ts.write(meta.flow_slot, prev_ts);
                af_active.write(meta.flow_slot, active);
                af_count.write(meta.flow_slot, count);
                af_bytes.write(meta.flow_slot, fbytes);
                af_max_eack.write(meta.flow_slot, max_eack);
                af_recover.write(meta.flow_slot, recover);
                af_recover_flag.write(meta.flow_slot, rflag);
                if (rtt_write == 1) {
                    flow_rtt.write(meta.flow_slot, new_flow_rtt);
                }
            }
        }

        // One digest per packet (BMv2 keeps a single learn list per packet;
        // Tofino has one digest_type): the first flow event wins, then the
        // RTT sample (which is also in flow_rtt). See README "Digests".
        if (meta.send_flow == 1) {
            digest<scidmz_flow_digest_t>(SCIDMZ_P4_DIGEST_RECEIVER, meta.flow_dg);
        } else if (meta.send_rtt == 1) {
            digest<scidmz_rtt_digest_t>(SCIDMZ_P4_DIGEST_RECEIVER, meta.rtt_dg);
        }
    }
}

control ScidmzEgress(inout scidmz_headers_t hdr,
                     inout scidmz_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    apply { }
}

control ScidmzComputeChecksum(inout scidmz_headers_t hdr, inout scidmz_metadata_t meta) {
    apply { }
}

control ScidmzDeparser(packet_out pkt, in scidmz_headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(ScidmzParser(),
         ScidmzVerifyChecksum(),
         ScidmzIngress(),
         ScidmzEgress(),
         ScidmzComputeChecksum(),
         ScidmzDeparser()) main;
