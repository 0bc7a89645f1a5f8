/* FFS (Fractional Fair Shares) egress for BMv2 (v1model), log-domain fixed point.
 *
 * Wyss et al., "Lightweight Internet Bandwidth Allocation and Isolation with
 * Fractional Fair Shares": Algorithm 1 (section VI), the section XII
 * estimators and the Appendix A tau update -- the same steps, in the same
 * order, as the numba core scidmz.disciplines.ffs.core.ffs_packet, with no floats
 * and no division in the data plane:
 *   - estimators in units of R K (bits, Q8): RK <- d RK + c bits, with
 *     d = e^{-T/K} and c = K (1 - e^{-T/K}) / T from one range table on T  (decay_e, decay_i)
 *   - log2 of F_i and of A + delta by a ternary top-bit match plus an 8-bit
 *     mantissa table (Q8)                                                     (log2_top_*, log2_mant_*)
 *   - tau kept as log2 tau (Q8); Appendix A while congested: log tau += log2(C + delta) - log2(A + delta),
 *     clamped; while not: the largest log(r/f') since the uncongested interval began (ffs.tau_uncongested)
 *   - Algorithm 1: log f' = log f - log F_i + log M_i; log gamma = min(0, log f' - log r + log tau)
 *   - forward iff u < gamma: u is a 16-bit random number, gamma's threshold
 *     is 2^(frac/256) (table exp2_frac, Q16) shifted by gamma's integer part
 * Table contents and constants are generated from the Python configuration by
 * gen_tables.py (include/ffs_tables.p4).
 *
 * Packets: the cross-check header (ethertype 0x88B6) carries the arrival time
 * (us since the node started), ingress, IP length, the labels r and f as
 * log2 of bit/s (Q8, as Appendix D carries them in log form) and the random
 * number; the switch writes the new labels, log gamma, log tau and its verdict
 * back and forwards every packet on port 1 so the check can read each decision
 * (a dropped packet is marked, not dropped).
 */
#include <core.p4>
#include <v1model.p4>
#include "include/ffs_tables.p4"

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etype; }
header ffs_t {
    bit<32> t_us;
    bit<8>  ing;
    bit<16> len;
    bit<32> r_log;    // in/out: log2 r (bit/s), Q8 two's complement
    bit<32> f_log;    // in/out: log2 f (bit/s), Q8
    bit<16> u;        // random number, forward iff u / 2^16 < gamma
    bit<32> g_log;    // out: log2 gamma, Q8 (<= 0)
    bit<32> tau_log;  // out: log2 tau after this packet, Q8
    bit<8>  verdict;  // out: 1 forward, 0 drop
}
struct headers_t { ethernet_t eth; ffs_t ffs; }
struct meta_t {
    bit<64> de; bit<64> ce;   // egress decay pair (Q24)
    bit<64> di; bit<64> ci;   // ingress decay pair (Q24)
    bit<8> top_f; bit<8> sh_f; bit<8> lsh_f; bit<32> mant_f;
    bit<8> top_a; bit<8> sh_a; bit<8> lsh_a; bit<32> mant_a;
    bit<32> m_log;
    bit<64> e2_w; bit<64> e2_g;
}

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.eth); transition select(h.eth.etype) { 0x88B6: ffs; default: accept; } }
    state ffs { pkt.extract(h.ffs); transition accept; }
}

control VC(inout headers_t h, inout meta_t m) { apply { } }

control Ing(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<64>>(1) rk_star;          // R_* K (bits, Q8)
    register<bit<64>>(1) ak;               // A K (bits, Q8)
    register<bit<32>>(1) t_last;           // last arrival at the egress (us)
    register<bit<32>>(1) tau_reg;          // log2 tau, Q8 two's complement
    register<bit<32>>(1) t_tau;            // last tau update (us)
    register<bit<8>>(1) cong_reg;          // 1 while congested
    register<bit<64>>(FFS_N_ING) rk_ing;   // R_i K
    register<bit<64>>(FFS_N_ING) fk_ing;   // F_i K (lengths weighted by f/r)
    register<bit<32>>(FFS_N_ING) t_ing;

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
    table m_log { key = { h.ffs.ing: exact; } actions = { set_m; } const entries = { FFS_M_ENTRIES } }
#define set_exp2 set_exp2_w
    table exp2_w { key = { frac_w: exact; } actions = { set_exp2_w; } const entries = { FFS_EXP2_ENTRIES } }
#undef set_exp2
#define set_exp2 set_exp2_g
    table exp2_g { key = { frac_g: exact; } actions = { set_exp2_g; } const entries = { FFS_EXP2_ENTRIES } }
#undef set_exp2

    apply {
        sm.egress_spec = 1;
        if (!h.ffs.isValid()) { return; }
        bit<32> i = (bit<32>)h.ffs.ing;
        bit<64> bits_q8 = ((bit<64>)h.ffs.len) << 11;  // 8 bits per byte, Q8
        int<32> r_log = (int<32>)h.ffs.r_log;
        int<32> f_log = (int<32>)h.ffs.f_log;
        // ---- estimators (section XII), all on this packet's length before Algorithm 1 ----
        bit<32> tl; bit<32> ti; bit<64> rs; bit<64> a; bit<64> ri;
        t_last.read(tl, 0);
        t_ing.read(ti, i);
        rk_star.read(rs, 0);
        ak.read(a, 0);
        rk_ing.read(ri, i);
        fk_ing.read(fk, i);
        dt_e = h.ffs.t_us - tl;
        dt_i = h.ffs.t_us - ti;
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
        t_ing.write(i, h.ffs.t_us);
        // ---- Appendix A: one tau tick when the period has passed (uses A before this packet) ----
        bit<32> tt; bit<32> tau_u; bit<8> cong;
        t_tau.read(tt, 0);
        tau_reg.read(tau_u, 0);
        cong_reg.read(cong, 0);
        int<32> tau = (int<32>)tau_u;
        bool congested = rs > FFS_CK_Q8;                        // R_* > C
        if (congested && h.ffs.t_us - tt >= FFS_TAU_PERIOD_US) {
            ax = a + FFS_DK_Q8;
            log2_top_a.apply();
            mant_a_key = (bit<8>)((ax >> m.sh_a) << m.lsh_a);
            log2_mant_a.apply();
            int<32> log_ad = (int<32>)(((bit<32>)m.top_a << 8) + m.mant_a) + FFS_OFF_Q8;
            tau = tau + FFS_LOG_CD_Q8 - log_ad;
            if (tau < FFS_TAU_MIN_Q8) { tau = FFS_TAU_MIN_Q8; }
            if (tau > FFS_TAU_MAX_Q8) { tau = FFS_TAU_MAX_Q8; }
            tau_reg.write(0, (bit<32>)tau);
            t_tau.write(0, h.ffs.t_us);
        }
        // ---- Algorithm 1 ----
        log2_top_f.apply();
        mant_f_key = (bit<8>)((fk >> m.sh_f) << m.lsh_f);
        log2_mant_f.apply();
        m_log.apply();
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
            if (tau < FFS_TAU_MIN_Q8) { tau = FFS_TAU_MIN_Q8; }
            if (tau > FFS_TAU_MAX_Q8) { tau = FFS_TAU_MAX_Q8; }
            tau_reg.write(0, (bit<32>)tau);
            cong_reg.write(0, 0);
        }
        frac_g = (bit<8>)(bit<32>)g;
        exp2_g.apply();
        int<32> gn = g >> 8;                                    // <= 0
        bit<64> thr = m.e2_g >> (bit<8>)(bit<32>)(-gn);         // gamma in Q16
        h.ffs.r_log = (bit<32>)(r_log + g);                     // line 3
        h.ffs.f_log = (bit<32>)f2;
        h.ffs.g_log = (bit<32>)g;
        h.ffs.tau_log = (bit<32>)tau;
        h.ffs.verdict = ((bit<64>)h.ffs.u < thr) ? 8w1 : 8w0;  // line 5
        // ---- A from the expected forwarded length (section VII-A) ----
        a = ((a * m.de) >> FFS_Q_DECAY) + ((((bits_q8 * thr) >> 16) * m.ce) >> FFS_Q_DECAY);
        ak.write(0, a);
        t_last.write(0, h.ffs.t_us);
    }
}

control Egr(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.eth); pkt.emit(h.ffs); } }

V1Switch(P(), VC(), Ing(), Egr(), CC(), D()) main;
