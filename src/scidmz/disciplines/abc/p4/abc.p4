/* ABC (activity-based congestion management) for BMv2 (v1model), log-domain fixed point.
 *
 * Menth et al., Future Internet 11(7) 159, 2019, sections 3.2-3.3; the same
 * meter, average and threshold as the numba core scidmz.disciplines.abc.core, but
 * with no floats and no division in the data plane:
 *   - decay exp(-dt/M) by a range table on dt (us), Q24            (decay_*)
 *   - log2 of the decayed byte sum by a ternary top-bit match plus an
 *     8-bit mantissa table, Q8                                      (log2_top, log2_mant)
 *   - log2 of the decayed time M (1 - e^{-t/M}) by a range table    (log2_time)
 *   - A_avg = S_A / N is never formed: the threshold test
 *     Q <= max(Q_min, Q_base - gamma (A - S_A/N)) is multiplied by N > 0.
 * Table contents and constants are generated from the Python configuration by
 * gen_tables.py (include/abc_tables.p4).
 *
 * Packets: the cross-check header (ethertype 0x88B5) carries a packet's
 * arrival time (us since the meter start), aggregate, IP length and the queue
 * length it found (packets); the switch writes its activity and verdict back
 * and forwards it on port 1 so the test can read every decision.
 */
#include <core.p4>
#include <v1model.p4>
#include "include/abc_tables.p4"

#define N_AGG 64

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header abc_t {
    bit<32> t_us;
    bit<8>  agg;
    bit<16> len;
    bit<16> q;
    bit<32> act;      // out: activity, Q8 two's complement
    bit<8>  verdict;  // out: 1 accept, 0 drop
}
struct headers_t { ethernet_t eth; abc_t abc; }
struct meta_t {
    bit<64> d;
    bit<32> log2t;
    bit<8>  top;
    bit<8>  sh;
    bit<8>  lsh;
    bit<32> lmant;
}

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.eth); transition select(h.eth.etype) { 0x88B5: abc; default: accept; } }
    state abc { pkt.extract(h.abc); transition accept; }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<64>>(N_AGG) meter_s;   // decayed bytes, Q8
    register<bit<32>>(N_AGG) meter_t;   // last packet time (us)
    register<bit<64>>(1) avg_sa;        // decayed activity sum (Q8, two's complement)
    register<bit<64>>(1) avg_n;         // decayed count, Q16
    register<bit<32>>(1) avg_t;         // last accepted time (us)

    action set_decay(bit<64> d) { m.d = d; }
    action set_log2t(bit<32> v) { m.log2t = v; }
    action set_top(bit<8> p, bit<8> sh, bit<8> lsh) { m.top = p; m.sh = sh; m.lsh = lsh; }
    action set_mant(bit<32> v) { m.lmant = v; }

    bit<32> dt;
    bit<64> s;
    bit<8> mant;
    table decay_meter { key = { dt: range; } actions = { set_decay; } const entries = { ABC_DECAY_METER_ENTRIES } }
    table decay_avg { key = { dt: range; } actions = { set_decay; } const entries = { ABC_DECAY_AVG_ENTRIES } }
    table log2_time { key = { h.abc.t_us: range; } actions = { set_log2t; } const entries = { ABC_LOG2T_ENTRIES } }
    table log2_top { key = { s: ternary; } actions = { set_top; } const entries = { ABC_TOP_ENTRIES } }
    table log2_mant { key = { mant: exact; } actions = { set_mant; } const entries = { ABC_MANT_ENTRIES } }

    apply {
        sm.egress_spec = 1;
        if (!h.abc.isValid()) { return; }
        bit<32> idx = (bit<32>)h.abc.agg;
        // ---- activity meter (TDRM-UTEMA reconstruction) ----
        bit<32> tl;
        meter_s.read(s, idx);
        meter_t.read(tl, idx);
        dt = h.abc.t_us - tl;
        decay_meter.apply();
        s = ((s * m.d) >> ABC_Q_DECAY) + (((bit<64>)h.abc.len) << 8);
        meter_s.write(idx, s);
        meter_t.write(idx, h.abc.t_us);
        log2_time.apply();
        log2_top.apply();
        mant = (bit<8>)((s >> m.sh) << m.lsh);
        log2_mant.apply();
        int<64> a = (int<64>)(bit<64>)(((bit<32>)m.top << 8) + m.lmant) - (int<64>)(bit<64>)m.log2t
                    + ABC_ACT_OFFSET_Q8;
        h.abc.act = (bit<32>)(bit<64>)a;
        // ---- activity AQM: Q <= max(Q_min, Q_base - gamma (A - S_A/N)), times 256 N ----
        bit<64> sa_u; bit<64> n_u; bit<32> ta;
        avg_sa.read(sa_u, 0);
        avg_n.read(n_u, 0);
        avg_t.read(ta, 0);
        int<64> sa = (int<64>)sa_u;
        int<64> n = (int<64>)n_u;
        int<64> q = (int<64>)(bit<64>)h.abc.q;
        bool ok;
        if (n_u == 0) {
            ok = q <= ABC_QBASE;  // no history: A_avg := A
        } else {
            int<64> lhs = q * n * 256;
            int<64> th = ABC_QBASE * n * 256 - ABC_GAMMA * (a * n - (sa << 16));
            int<64> floor_ = ABC_QMIN * n * 256;
            ok = lhs <= (th > floor_ ? th : floor_);
        }
        if (h.abc.q >= ABC_BUFFER) { ok = false; }
        h.abc.verdict = ok ? 8w1 : 8w0;
        if (ok) {
            dt = h.abc.t_us - ta;
            decay_avg.apply();
            sa = ((sa * (int<64>)m.d) >> ABC_Q_DECAY) + a;
            n = ((n * (int<64>)m.d) >> ABC_Q_DECAY) + 65536;
            avg_sa.write(0, (bit<64>)sa);
            avg_n.write(0, (bit<64>)n);
            avg_t.write(0, h.abc.t_us);
        }
    }
}

control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.eth); pkt.emit(h.abc); } }

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
