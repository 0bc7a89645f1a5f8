/* FFS at a bottleneck that forwards real traffic: BMv2 (v1model), IPv4.
 *
 * Wyss et al., "Lightweight Internet Bandwidth Allocation and Isolation with
 * Fractional Fair Shares": Algorithm 1 (section VI), the section XII estimators
 * and the Appendix A tau update, as ffs.p4 (the cross-check program, replayed
 * against the numba core scidmz.disciplines.ffs.core), at the streams' first
 * on-path node as the NFQUEUE stage runs it (core.ffs_first_node_packet):
 *   - a frame that enters a port of `port_fwd` leaves by the port the entry
 *     names, any other frame by its port's pair (0 <-> 1, 2 <-> 3: a wire, so
 *     a switch the controller left forwards undisciplined); only frames of
 *     entries with disc = 1 (the bottleneck direction)
 *     go through FFS, the reverse direction (ACKs) passes untouched;
 *   - a stream is an IPv4 source (hashed onto N_STREAMS rate estimators; ours:
 *     sources that collide share one, as the stage's slots beyond its bound);
 *     its labels r = f are its measured rate (section VI: "initialized to the
 *     stream's rate" at the first on-path node);
 *   - the ingress is the source's longest match in `ing_of` (default 1: the
 *     rest of the campus), log2 of its fairness-matrix entry M_i an entry of
 *     `ing_weight` -- the weights the control plane rewrites every period;
 *   - the capacity constants (C K, delta K, log2(C + delta)) and tau's bounds are `params`;
 *   - forward iff u < gamma, u from the switch's random(); else drop.
 * Until the control plane has set `params`, frames are forwarded with no
 * discipline. Decay, log and exp tables: include/ffs_tables.p4 (gen_tables.py:
 * K = 10 ms, the core's tau bounds and period).
 */
#include <core.p4>
#include <v1model.p4>
#include "include/ffs_tables.p4"

#define N_ING 16
#define N_STREAMS 1024

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> total_len; bit<16> id; bit<3> flags; bit<13> frag;
    bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst;
}
struct headers_t { ethernet_t eth; ipv4_t ip; }
struct meta_t {
    bit<1> disc; bit<1> armed; bit<8> ing;
    bit<64> ck_q8; bit<64> dk_q8; bit<32> log_cd_q8; bit<32> tau_min_q8; bit<32> tau_max_q8;
    bit<64> ds; bit<64> cs;   // stream decay pair (Q24)
    bit<8> top_r; bit<8> sh_r; bit<8> lsh_r; bit<32> mant_r;
    bit<64> de; bit<64> ce;   // egress decay pair (Q24)
    bit<64> di; bit<64> ci;   // ingress decay pair (Q24)
    bit<8> top_f; bit<8> sh_f; bit<8> lsh_f; bit<32> mant_f;
    bit<8> top_a; bit<8> sh_a; bit<8> lsh_a; bit<32> mant_a;
    bit<32> m_log;
    bit<64> e2_w; bit<64> e2_g;
}

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.eth); transition select(h.eth.etype) { 0x0800: ip; default: accept; } }
    state ip { pkt.extract(h.ip); transition accept; }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<64>>(N_STREAMS) rk_stream;   // the stream's R K (bits, Q8)
    register<bit<32>>(N_STREAMS) t_stream;
    action wire() { sm.egress_spec = sm.ingress_port ^ 1; }
    action fwd(bit<9> port, bit<1> disc) { sm.egress_spec = port; m.disc = disc; }
    action set_ing(bit<8> ing) { m.ing = ing; }
    action set_params(bit<64> ck_q8, bit<64> dk_q8, bit<32> log_cd_q8, bit<32> tau_min_q8, bit<32> tau_max_q8) {
        m.armed = 1; m.ck_q8 = ck_q8; m.dk_q8 = dk_q8; m.log_cd_q8 = log_cd_q8;
        m.tau_min_q8 = tau_min_q8; m.tau_max_q8 = tau_max_q8;
    }
    action set_dc_s(bit<64> d, bit<64> c) { m.ds = d; m.cs = c; }
    action set_top_r(bit<8> p, bit<8> sh, bit<8> lsh) { m.top_r = p; m.sh_r = sh; m.lsh_r = lsh; }
    action set_mant_r(bit<32> v) { m.mant_r = v; }
    table port_fwd { key = { sm.ingress_port: exact; } actions = { fwd; wire; } default_action = wire(); size = 16; }
    table ing_of { key = { h.ip.src: lpm; } actions = { set_ing; } default_action = set_ing(1); size = 256; }
    table params { actions = { set_params; NoAction; } default_action = NoAction(); }
    bit<32> dt_s;
    bit<64> rk;
    bit<8> mant_r_key;
#define set_dc set_dc_s
    table decay_s { key = { dt_s: range; } actions = { set_dc_s; } const entries = { FFS_DECAY_ENTRIES } }
#undef set_dc
#define set_top set_top_r
    table log2_top_r { key = { rk: ternary; } actions = { set_top_r; } const entries = { FFS_TOP_ENTRIES } }
#undef set_top
#define set_mant set_mant_r
    table log2_mant_r { key = { mant_r_key: exact; } actions = { set_mant_r; } const entries = { FFS_MANT_ENTRIES } }
#undef set_mant
    register<bit<64>>(1) rk_star;          // R_* K (bits, Q8)
    register<bit<64>>(1) ak;               // A K (bits, Q8)
    register<bit<32>>(1) t_last;           // last arrival at the egress (us)
    register<bit<32>>(1) tau_reg;          // log2 tau, Q8 two's complement
    register<bit<32>>(1) t_tau;            // last tau update (us)
    register<bit<8>>(1) cong_reg;          // 1 while congested
    register<bit<64>>(N_ING) rk_ing;   // R_i K
    register<bit<64>>(N_ING) fk_ing;   // F_i K (lengths weighted by f/r)
    register<bit<32>>(N_ING) t_ing;

    action set_dc_e(bit<64> d, bit<64> c) { m.de = d; m.ce = c; }
    action set_dc_i(bit<64> d, bit<64> c) { m.di = d; m.ci = c; }
    action set_top_f(bit<8> p, bit<8> sh, bit<8> lsh) { m.top_f = p; m.sh_f = sh; m.lsh_f = lsh; }
    action set_top_a(bit<8> p, bit<8> sh, bit<8> lsh) { m.top_a = p; m.sh_a = sh; m.lsh_a = lsh; }
    action set_mant_f(bit<32> v) { m.mant_f = v; }
    action set_mant_a(bit<32> v) { m.mant_a = v; }
    action set_m(bit<32> v) { m.m_log = v; }
    action set_exp2_w(bit<64> v) { m.e2_w = v; }
    action set_exp2_g(bit<64> v) { m.e2_g = v; }

    bit<32> dt_e;
    bit<32> dt_i;
    bit<64> fk;
    bit<64> ax;
    bit<8> mant_f_key;
    bit<8> mant_a_key;
    bit<8> frac_w;
    bit<8> frac_g;
#define set_dc set_dc_e
    table decay_e { key = { dt_e: range; } actions = { set_dc_e; } const entries = { FFS_DECAY_ENTRIES } }
#undef set_dc
#define set_dc set_dc_i
    table decay_i { key = { dt_i: range; } actions = { set_dc_i; } const entries = { FFS_DECAY_ENTRIES } }
#undef set_dc
#define set_top set_top_f
    table log2_top_f { key = { fk: ternary; } actions = { set_top_f; } const entries = { FFS_TOP_ENTRIES } }
#undef set_top
#define set_top set_top_a
    table log2_top_a { key = { ax: ternary; } actions = { set_top_a; } const entries = { FFS_TOP_ENTRIES } }
#undef set_top
#define set_mant set_mant_f
    table log2_mant_f { key = { mant_f_key: exact; } actions = { set_mant_f; } const entries = { FFS_MANT_ENTRIES } }
#undef set_mant
#define set_mant set_mant_a
    table log2_mant_a { key = { mant_a_key: exact; } actions = { set_mant_a; } const entries = { FFS_MANT_ENTRIES } }
#undef set_mant
    table ing_weight { key = { m.ing: exact; } actions = { set_m; NoAction; } default_action = NoAction(); size = N_ING; }
#define set_exp2 set_exp2_w
    table exp2_w { key = { frac_w: exact; } actions = { set_exp2_w; } const entries = { FFS_EXP2_ENTRIES } }
#undef set_exp2
#define set_exp2 set_exp2_g
    table exp2_g { key = { frac_g: exact; } actions = { set_exp2_g; } const entries = { FFS_EXP2_ENTRIES } }
#undef set_exp2

    apply {
        m.disc = 0;
        m.armed = 0;
        m.m_log = 0;
        port_fwd.apply();
        if (m.disc == 0 || !h.ip.isValid()) { return; }
        params.apply();
        if (m.armed == 0) { return; }
        ing_of.apply();
        if (m.ing >= N_ING) { m.ing = N_ING - 1; }
        bit<32> now = (bit<32>)sm.ingress_global_timestamp;
        bit<32> i = (bit<32>)m.ing;
        bit<64> bits_q8 = ((bit<64>)h.ip.total_len) << 11;  // 8 bits per byte, Q8
        // ---- the stream's first on-path node: r = f = its measured rate (core.ffs_first_node_packet) ----
        bit<32> sidx;
        hash(sidx, HashAlgorithm.crc32, 32w0, { h.ip.src }, (bit<32>)N_STREAMS);
        bit<64> rsk; bit<32> tsk;
        rk_stream.read(rsk, sidx);
        t_stream.read(tsk, sidx);
        dt_s = now - tsk;
        decay_s.apply();
        rsk = ((rsk * m.ds) >> FFS_Q_DECAY) + ((bits_q8 * m.cs) >> FFS_Q_DECAY);
        rk_stream.write(sidx, rsk);
        t_stream.write(sidx, now);
        rk = rsk;
        log2_top_r.apply();
        mant_r_key = (bit<8>)((rk >> m.sh_r) << m.lsh_r);
        log2_mant_r.apply();
        int<32> r_log = (int<32>)(((bit<32>)m.top_r << 8) + m.mant_r) + FFS_OFF_Q8;
        int<32> f_log = r_log;
        // ---- estimators (section XII), all on this packet's length before Algorithm 1 ----
        bit<32> tl; bit<32> ti; bit<64> rs; bit<64> a; bit<64> ri;
        t_last.read(tl, 0);
        t_ing.read(ti, i);
        rk_star.read(rs, 0);
        ak.read(a, 0);
        rk_ing.read(ri, i);
        fk_ing.read(fk, i);
        dt_e = now - tl;
        dt_i = now - ti;
        decay_e.apply();
        decay_i.apply();
        rs = ((rs * m.de) >> FFS_Q_DECAY) + ((bits_q8 * m.ce) >> FFS_Q_DECAY);
        ri = ((ri * m.di) >> FFS_Q_DECAY) + ((bits_q8 * m.ci) >> FFS_Q_DECAY);
        // F_i weights the length by f/r = 2^((f_log - r_log)/256)
        int<32> w = f_log - r_log;
        frac_w = (bit<8>)(bit<32>)w;
        exp2_w.apply();
        int<32> wn = w >> 8;
        bit<64> wb = bits_q8 * m.e2_w;  // Q16 more
        if (wn >= 0) { wb = (wb << (bit<8>)(bit<32>)wn) >> 16; } else { wb = wb >> (bit<8>)(bit<32>)(16 - wn); }
        fk = ((fk * m.di) >> FFS_Q_DECAY) + ((wb * m.ci) >> FFS_Q_DECAY);
        rk_star.write(0, rs);
        rk_ing.write(i, ri);
        fk_ing.write(i, fk);
        t_ing.write(i, now);
        // ---- Appendix A: one tau tick when the period has passed (uses A before this packet) ----
        bit<32> tt; bit<32> tau_u; bit<8> cong;
        t_tau.read(tt, 0);
        tau_reg.read(tau_u, 0);
        cong_reg.read(cong, 0);
        int<32> tau = (int<32>)tau_u;
        bool congested = rs > (bit<64>)m.ck_q8;                        // R_* > C
        if (congested && now - tt >= FFS_TAU_PERIOD_US) {
            ax = a + m.dk_q8;
            log2_top_a.apply();
            mant_a_key = (bit<8>)((ax >> m.sh_a) << m.lsh_a);
            log2_mant_a.apply();
            int<32> log_ad = (int<32>)(((bit<32>)m.top_a << 8) + m.mant_a) + FFS_OFF_Q8;
            tau = tau + (int<32>)m.log_cd_q8 - log_ad;
            if (tau < (int<32>)m.tau_min_q8) { tau = (int<32>)m.tau_min_q8; }
            if (tau > (int<32>)m.tau_max_q8) { tau = (int<32>)m.tau_max_q8; }
            tau_reg.write(0, (bit<32>)tau);
            t_tau.write(0, now);
        }
        // ---- Algorithm 1 ----
        log2_top_f.apply();
        mant_f_key = (bit<8>)((fk >> m.sh_f) << m.lsh_f);
        log2_mant_f.apply();
        ing_weight.apply();
        int<32> log_f_i = (int<32>)(((bit<32>)m.top_f << 8) + m.mant_f) + FFS_OFF_Q8;
        int<32> f2 = f_log - log_f_i + (int<32>)m.m_log;       // line 1
        int<32> g = 0;
        if (congested) {
            g = f2 - r_log + tau;                               // line 2, log domain
            if (g > 0) { g = 0; }
            cong_reg.write(0, 1);
        } else {
            int<32> x = r_log - f2;                             // log(r / f'): tau limiting nobody
            if (cong == 1 || x > tau) { tau = x; }
            if (tau < (int<32>)m.tau_min_q8) { tau = (int<32>)m.tau_min_q8; }
            if (tau > (int<32>)m.tau_max_q8) { tau = (int<32>)m.tau_max_q8; }
            tau_reg.write(0, (bit<32>)tau);
            cong_reg.write(0, 0);
        }
        frac_g = (bit<8>)(bit<32>)g;
        exp2_g.apply();
        int<32> gn = g >> 8;                                    // <= 0
        bit<64> thr = m.e2_g >> (bit<8>)(bit<32>)(-gn);         // gamma in Q16
        bit<16> u;
        random(u, 16w0, 16w0xffff);
        if ((bit<64>)u >= thr) { mark_to_drop(sm); }            // line 5: forward iff u < gamma
        // ---- A from the expected forwarded length (section VII-A) ----
        a = ((a * m.de) >> FFS_Q_DECAY) + ((((bits_q8 * thr) >> 16) * m.ce) >> FFS_Q_DECAY);
        ak.write(0, a);
        t_last.write(0, now);
    }
}

control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.eth); pkt.emit(h.ip); } }

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
