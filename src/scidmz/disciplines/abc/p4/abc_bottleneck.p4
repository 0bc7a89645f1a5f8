/* ABC at a bottleneck that forwards real traffic: BMv2 (v1model), IPv4.
 *
 * Menth et al., Future Internet 11(7) 159, 2019, sections 3.2-3.3 -- the same
 * meter, threshold test and averager as abc.p4 (the cross-check program, which
 * replays them against the numba core scidmz.disciplines.abc.core), and the
 * virtual FIFO of core.abc_fifo_packet, the NFQUEUE stage's queue:
 *   - a frame that enters a port of `port_fwd` leaves by the port the entry
 *     names, any other frame by its port's pair (0 <-> 1, 2 <-> 3: a wire, so
 *     a switch the controller left forwards undisciplined); only frames of
 *     entries with disc = 1 (the bottleneck direction)
 *     go through ABC, the reverse direction (ACKs) passes untouched;
 *   - the aggregate is the IPv4 source's longest match in `agg_of` (default:
 *     aggregate 1, everything else on the campus), its activity offset
 *     -log2 R_r (section 3.2's per-aggregate reference rate) an entry of
 *     `agg_weight` -- the weights the control plane rewrites every period;
 *   - Q is the backlog (bytes) of a FIFO drained at the bottleneck rate
 *     (`params`: drain in bytes/us, Q16), compared with the thresholds times
 *     1500 B: the stage's packets of QUEUE_PKT_BYTES, with no division;
 *   - a rejected packet is dropped (mark_to_drop).
 * Until the control plane has set `params`, frames are forwarded with no
 * discipline. The decay and log tables come from include/abc_tables.p4
 * (gen_tables.py: memories M_AM 3 s, M_AA 0.3 s).
 */
#include <core.p4>
#include <v1model.p4>
#include "include/abc_tables.p4"

#define N_AGG 16

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> total_len; bit<16> id; bit<3> flags; bit<13> frag;
    bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst;
}
struct headers_t { ethernet_t eth; ipv4_t ip; }
struct meta_t {
    bit<1>  disc;
    bit<1>  armed;
    bit<8>  agg;
    bit<32> off;      // activity offset of the aggregate, Q8 two's complement
    bit<64> qmin_b; bit<64> qbase_b; bit<64> gamma_b; bit<64> buffer_b; bit<64> drain_q16;
    bit<64> d;
    bit<32> log2t;
    bit<8>  top;
    bit<8>  sh;
    bit<8>  lsh;
    bit<32> lmant;
}

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.eth); transition select(h.eth.etype) { 0x0800: ip; default: accept; } }
    state ip { pkt.extract(h.ip); transition accept; }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<64>>(N_AGG) meter_s;   // decayed bytes, Q8
    register<bit<32>>(N_AGG) meter_t;   // last packet time (us)
    register<bit<64>>(1) avg_sa;        // decayed activity sum (Q8, two's complement)
    register<bit<64>>(1) avg_n;         // decayed count, Q16
    register<bit<32>>(1) avg_t;         // last accepted time (us)
    register<bit<64>>(1) vq_b;          // virtual FIFO backlog (bytes)
    register<bit<32>>(1) vq_t;          // its last update (us)
    register<bit<32>>(1) t_start;       // the meter start (us)
    register<bit<8>>(1) started;        // 1: t_start is set; 2: the start is over 35 min ago (log2_time saturated)

    action wire() { sm.egress_spec = sm.ingress_port ^ 1; }
    action fwd(bit<9> port, bit<1> disc) { sm.egress_spec = port; m.disc = disc; }
    action set_agg(bit<8> agg) { m.agg = agg; }
    action set_ref(bit<32> off) { m.off = off; }
    action set_params(bit<64> qmin_b, bit<64> qbase_b, bit<64> gamma_b, bit<64> buffer_b, bit<64> drain_q16) {
        m.armed = 1; m.qmin_b = qmin_b; m.qbase_b = qbase_b; m.gamma_b = gamma_b; m.buffer_b = buffer_b;
        m.drain_q16 = drain_q16;
    }
    action set_decay(bit<64> d) { m.d = d; }
    action set_log2t(bit<32> v) { m.log2t = v; }
    action set_top(bit<8> p, bit<8> sh, bit<8> lsh) { m.top = p; m.sh = sh; m.lsh = lsh; }
    action set_mant(bit<32> v) { m.lmant = v; }

    table port_fwd { key = { sm.ingress_port: exact; } actions = { fwd; wire; } default_action = wire(); size = 16; }
    table agg_of { key = { h.ip.src: lpm; } actions = { set_agg; } default_action = set_agg(1); size = 256; }
    table agg_weight { key = { m.agg: exact; } actions = { set_ref; NoAction; } default_action = NoAction(); size = N_AGG; }
    table params { actions = { set_params; NoAction; } default_action = NoAction(); }

    bit<32> dt;
    bit<32> t_key;
    bit<64> s;
    bit<8> mant;
    table decay_meter { key = { dt: range; } actions = { set_decay; } const entries = { ABC_DECAY_METER_ENTRIES } }
    table decay_avg { key = { dt: range; } actions = { set_decay; } const entries = { ABC_DECAY_AVG_ENTRIES } }
    table log2_time { key = { t_key: range; } actions = { set_log2t; } const entries = { ABC_LOG2T_ENTRIES } }
    table log2_top { key = { s: ternary; } actions = { set_top; } const entries = { ABC_TOP_ENTRIES } }
    table log2_mant { key = { mant: exact; } actions = { set_mant; } const entries = { ABC_MANT_ENTRIES } }

    apply {
        m.disc = 0;
        m.armed = 0;
        m.off = 0;
        port_fwd.apply();
        if (m.disc == 0 || !h.ip.isValid()) { return; }
        params.apply();
        if (m.armed == 0) { return; }
        agg_of.apply();
        if (m.agg >= N_AGG) { m.agg = N_AGG - 1; }
        agg_weight.apply();
        bit<32> now = (bit<32>)sm.ingress_global_timestamp;
        // ---- the meter's start: log2_time takes the time since it, saturated after 35 min ----
        bit<8> st; bit<32> t0;
        started.read(st, 0);
        t_start.read(t0, 0);
        if (st == 0) { t0 = now; t_start.write(0, now); started.write(0, 1); }
        t_key = now - t0;
        if (st == 2 || t_key >= 0x80000000) { t_key = 0xffffffff; started.write(0, 2); }
        // ---- the virtual FIFO drained at the bottleneck rate ----
        bit<64> vq; bit<32> tq;
        vq_b.read(vq, 0);
        vq_t.read(tq, 0);
        bit<64> drained = ((bit<64>)(now - tq) * m.drain_q16) >> 16;
        vq = vq > drained ? vq - drained : 0;
        // ---- activity meter (as abc.p4) ----
        bit<32> idx = (bit<32>)m.agg;
        bit<32> tl;
        meter_s.read(s, idx);
        meter_t.read(tl, idx);
        dt = now - tl;
        decay_meter.apply();
        s = ((s * m.d) >> ABC_Q_DECAY) + (((bit<64>)h.ip.total_len) << 8);
        meter_s.write(idx, s);
        meter_t.write(idx, now);
        log2_time.apply();
        log2_top.apply();
        mant = (bit<8>)((s >> m.sh) << m.lsh);
        log2_mant.apply();
        int<64> a = (int<64>)(bit<64>)(((bit<32>)m.top << 8) + m.lmant) - (int<64>)(bit<64>)m.log2t
                    + (int<64>)(int<32>)m.off;
        // ---- activity AQM, in bytes of the FIFO: Q <= max(Q_min, Q_base - gamma (A - S_A/N)), times 256 N ----
        bit<64> sa_u; bit<64> n_u; bit<32> ta;
        avg_sa.read(sa_u, 0);
        avg_n.read(n_u, 0);
        avg_t.read(ta, 0);
        int<64> sa = (int<64>)sa_u;
        int<64> n = (int<64>)n_u;
        int<64> q = (int<64>)vq;
        bool ok;
        if (n_u == 0) {
            ok = q <= (int<64>)m.qbase_b;  // no history: A_avg := A
        } else {
            int<64> lhs = q * n * 256;
            int<64> th = (int<64>)m.qbase_b * n * 256 - (int<64>)m.gamma_b * (a * n - (sa << 16));
            int<64> floor_ = (int<64>)m.qmin_b * n * 256;
            ok = lhs <= (th > floor_ ? th : floor_);
        }
        if (vq >= m.buffer_b) { ok = false; }
        if (ok) {
            dt = now - ta;
            decay_avg.apply();
            sa = ((sa * (int<64>)m.d) >> ABC_Q_DECAY) + a;
            n = ((n * (int<64>)m.d) >> ABC_Q_DECAY) + 65536;
            avg_sa.write(0, (bit<64>)sa);
            avg_n.write(0, (bit<64>)n);
            avg_t.write(0, now);
            vq = vq + (bit<64>)h.ip.total_len;
        } else {
            mark_to_drop(sm);
        }
        vq_b.write(0, vq);
        vq_t.write(0, now);
    }
}

control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.eth); pkt.emit(h.ip); } }

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
