/* One memory step of the fused path, forwards and backwards, in C: the same equations as
 * pipeline/memory/operations.py and steps.py (eq. 1-18, footnote 1's tie rule), for the fused path's CPU loops.
 *
 * Why: at batch 10 a memory step is ~30 tiny ATen calls forwards and ~35 backwards, and their per-call cost, not
 * their arithmetic, is most of the memory's time. Here a step is one call, and a read touches only the rows it
 * reads: a read's weights are exactly 0 below the rows that fill its quantity of 1, so the sum over rows (eq. 3),
 * and the value rows' gradient (eq. 15), skip them. The Python functions stay the definition; tests compare the
 * two per step and through the whole model, in float64 and float32.
 *
 * Layout (all buffers contiguous, set up once per sequence by pipeline/memory/native.py):
 *   strengths  s_t of every step, packed: step t's (B, n_t) block at B * ends * t * (t + 1) / 2, n_t = ends (t + 1)
 *   sigs       (L, B, sig_row): sigmoid(d, u) (before the padding mask) then tanh(v), ends ordered (top, bottom)
 *   live       (L, B) padding mask or NULL
 *   values     (B, ends L, m): a single-ended memory's row i is step i's value; a DeQue's step t has rows
 *              L-1-t .. L+t, its bottom rows growing downwards from the middle (as pipeline/memory/kinds.py)
 *   reads      r_t of step t at reads + t * read_step + b * read_row, reads * m values (top first)
 * Backwards the strengths are not saved per operation but recomputed from s_{t-1}: O(n) per step, and the
 * saved state is the packed strengths alone.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t B, L, m, ends;    /* ends: 1 (Stack, Queue, ...) or 2 (DeQue) */
    int64_t pop_top, read_top; /* single-ended memories: the end the pop and the read start from */
    void *strengths, *sigs, *live, *values, *reads;
    int64_t sig_row, read_step, read_row;
    /* backwards */
    void *g_values, *g_sig, *g_s0, *g_s1, *scratch; /* g_s0/g_s1: (B, ends L) each, ping-pong between steps */
} Sequence;

#define POS(x) ((x) > 0 ? (x) : 0)

#define DEFINE_MEMORY(T, SUF)                                                                                        \
    /* pop u from s (n rows) starting at the top (highest index) or the bottom (eq. 2, 4, 7, 8) */                  \
    static void pop_##SUF(const T *s, int64_t n, T u, int top, T *taken, T *kept) {                                   \
        T ahead = 0;                                                                                                   \
        for (int64_t k = 0; k < n; k++) {                                                                              \
            int64_t i = top ? n - 1 - k : k;                                                                           \
            T tk = POS(u - ahead), kp = POS(s[i] - tk);                                                                \
            taken[i] = tk;                                                                                             \
            kept[i] = kp;                                                                                              \
            ahead += s[i];                                                                                             \
        }                                                                                                              \
    }                                                                                                                  \
    /* read weights w[i] = min(s[i], max(0, 1 - ahead[i])), the min's branch and the cap (eq. 3, 5, 10, 11) */                                                 \
    static void weights_##SUF(const T *s, int64_t n, int top, T *w, unsigned char *take, T *cap) {                    \
        T ahead = 0;                                                                                                   \
        for (int64_t k = 0; k < n; k++) {                                                                              \
            int64_t i = top ? n - 1 - k : k;                                                                           \
            T c = POS((T)1 - ahead);                                                                                   \
            int tk = s[i] <= c;                                                                                        \
            w[i] = tk ? s[i] : c;                                                                                      \
            take[i] = (unsigned char)tk;                                                                               \
            cap[i] = c;                                                                                                \
            ahead += s[i];                                                                                             \
        }                                                                                                              \
    }                                                                                                                  \
    /* r = sum_i w[i] V[i] over the rows with a weight; rows: (n, m) */                                               \
    static void read_##SUF(const T *w, const T *rows, int64_t n, int64_t m, T *r) {                                  \
        memset(r, 0, sizeof(T) * m);                                                                                   \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            T wi = w[i];                                                                                               \
            if (wi == 0) continue;                                                                                     \
            const T *v = rows + i * m;                                                                                 \
            for (int64_t k = 0; k < m; k++) r[k] += wi * v[k];                                                         \
        }                                                                                                              \
    }                                                                                                                  \
    /* <a, b> with 8 independent partial sums, so that the compiler can keep them in one vector register */         \
    static T dot_##SUF(const T *a, const T *b, int64_t m) {                                                          \
        T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sum = 0;                                                                  \
        int64_t j = 0;                                                                                                 \
        for (; j + 8 <= m; j += 8)                                                                                     \
            for (int k = 0; k < 8; k++) acc[k] += a[j + k] * b[j + k];                                                 \
        for (int k = 0; k < 8; k++) sum += acc[k];                                                                     \
        for (; j < m; j++) sum += a[j] * b[j];                                                                         \
        return sum;                                                                                                    \
    }                                                                                                                  \
    /* The reads' adjoint over the value rows, one pass for one or two reads (the DeQue's two ends): the dot         \
     * products of eq. 18, g_w[k][i] = <V[i], dL/dr_k>, where they reach a strength (the min took s[i], or the cap   \
     * was positive: else footnote 1 stops them), and eq. 15, dL/dV[i] += sum_k w_k[i] dL/dr_k. */                     \
    static void rows_backward_##SUF(int reads, const T *g_r, T *const *w, unsigned char *const *take, T *const *cap, \
                                    const T *rows, T *g_rows, int64_t n, int64_t m, T *const *g_w) {                  \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            const T *v = rows + i * m;                                                                                 \
            T w_i[2] = {0, 0};                                                                                         \
            int any = 0;                                                                                               \
            for (int k = 0; k < reads; k++) {                                                                          \
                g_w[k][i] = (take[k][i] || cap[k][i] > 0) ? dot_##SUF(v, g_r + k * m, m) : 0;                          \
                w_i[k] = w[k][i];                                                                                      \
                any |= w_i[k] != 0;                                                                                    \
            }                                                                                                          \
            if (!any) continue;                                                                                        \
            T *gv = g_rows + i * m;                                                                                    \
            if (reads == 1 || w_i[1] == 0)                                                                             \
                for (int64_t j = 0; j < m; j++) gv[j] += w_i[0] * g_r[j];                                              \
            else                                                                                                       \
                for (int64_t j = 0; j < m; j++) gv[j] += w_i[0] * g_r[j] + w_i[1] * g_r[m + j];                        \
        }                                                                                                              \
    }                                                                                                                  \
    /* The rest of a read's adjoint (eq. 18), a traversal: dL/ds[i] += (the min took s[i] ? g_w[i] : 0) minus the     \
     * gradients of the caps (1 - ahead) of the rows the read visits after row i. */                                  \
    static void read_backward_##SUF(const T *g_w, const unsigned char *take, const T *cap, int64_t n, int top,        \
                                    T *g_s) {                                                                          \
        T after = 0;                                                                                                   \
        for (int64_t k = n - 1; k >= 0; k--) {                                                                         \
            int64_t i = top ? n - 1 - k : k;                                                                           \
            g_s[i] += (take[i] ? g_w[i] : 0) - after;                                                                  \
            if (!take[i] && cap[i] > 0) after += g_w[i]; /* the min took the cap */                                   \
        }                                                                                                              \
    }                                                                                                                  \
    /* the pop's adjoint (eq. 16-17): dL/ds_prev into g_prev, returns dL/du */                                        \
    static T pop_backward_##SUF(const T *g_out, const T *taken, const T *kept, int64_t n, int top, T *g_prev) {       \
        T after = 0, g_u = 0;                                                                                          \
        for (int64_t k = n - 1; k >= 0; k--) {                                                                         \
            int64_t i = top ? n - 1 - k : k;                                                                           \
            T g_kept = kept[i] > 0 ? g_out[i] : 0;                                                                     \
            T g_ahead = taken[i] > 0 ? g_kept : 0;                                                                     \
            g_prev[i] = g_kept + after;                                                                                \
            after += g_ahead;                                                                                          \
            g_u -= g_ahead;                                                                                            \
        }                                                                                                              \
        return g_u;                                                                                                    \
    }                                                                                                                  \
    static T *block_##SUF(const Sequence *q, int64_t t) { /* s_t, (B, ends (t + 1)); t = -1: empty */               \
        return (T *)q->strengths + q->B * q->ends * t * (t + 1) / 2;                                                   \
    }                                                                                                                  \
    /* d and u of batch row b at step t, times the padding mask (ends of each) */                                     \
    static void signals_##SUF(const Sequence *q, int64_t t, int64_t b, T *d, T *u) {                                 \
        const T *p = (const T *)q->sigs + (t * q->B + b) * q->sig_row;                                                 \
        T live = q->live ? ((const T *)q->live)[t * q->B + b] : (T)1;                                                  \
        for (int64_t e = 0; e < q->ends; e++) {                                                                        \
            d[e] = p[e] * live;                                                                                        \
            u[e] = p[q->ends + e] * live;                                                                              \
        }                                                                                                              \
    }                                                                                                                  \
    /* Per-step work space (reused by every batch row): parts 0-9 of N values, the two reads' min branches (2 N   \
     * bytes, inside one N-value slot), then backwards dL/ds_t, the DeQue's dL/d(after the top pop) and the second  \
     * read's g_w (the first's is part 9). */                                                                         \
    static void scratch_##SUF(const Sequence *q, T *scr, T **parts, unsigned char **take) {                          \
        int64_t N = q->ends * q->L + 2;                                                                                \
        for (int k = 0; k < 10; k++) parts[k] = scr + k * N;                                                           \
        take[0] = (unsigned char *)(scr + 10 * N);                                                                     \
        take[1] = take[0] + N;                                                                                         \
    }                                                                                                                  \
    /* Recompute step t of batch row b: pops, the new strengths and the read weights. parts: 0 taken, 1 kept      \
     * (first pop); 2 taken, 3 kept (the DeQue's bottom pop); 4 s_t; 5 w, 6 cap (first read); 7 w, 8 cap (second) */   \
    static void forward_state_##SUF(const Sequence *q, int64_t t, int64_t b, T **parts, unsigned char **take,         \
                                    T *d, T *u) {                                                                      \
        int64_t n_prev = q->ends * t, n = n_prev + q->ends;                                                            \
        const T *s_prev = t > 0 ? block_##SUF(q, t - 1) + b * n_prev : NULL;                                           \
        T *s = parts[4];                                                                                               \
        signals_##SUF(q, t, b, d, u);                                                                                  \
        if (q->ends == 1) {                                                                                            \
            pop_##SUF(s_prev, n_prev, u[0], (int)q->pop_top, parts[0], parts[1]); /* eq. 2 / 4 */                    \
            memcpy(s, parts[1], sizeof(T) * n_prev);                                                                   \
            s[n_prev] = d[0];                                                                                          \
            weights_##SUF(s, n, (int)q->read_top, parts[5], take[0], parts[6]); /* eq. 3 / 5 */                      \
        } else {                                                                                                       \
            pop_##SUF(s_prev, n_prev, u[0], 1, parts[0], parts[1]);       /* eq. 7 */                                \
            pop_##SUF(parts[1], n_prev, u[1], 0, parts[2], parts[3]);     /* eq. 8 */                                \
            s[0] = d[1];                                                  /* eq. 9 */                                \
            memcpy(s + 1, parts[3], sizeof(T) * n_prev);                                                               \
            s[n - 1] = d[0];                                                                                           \
            weights_##SUF(s, n, 1, parts[5], take[0], parts[6]);          /* eq. 10 */                               \
            weights_##SUF(s, n, 0, parts[7], take[1], parts[8]);          /* eq. 11 */                               \
        }                                                                                                              \
    }                                                                                                                  \
    static T *rows_##SUF(const Sequence *q, int64_t t, int64_t b, T *base) { /* step t's first live row */          \
        int64_t lo = q->ends == 1 ? 0 : q->L - 1 - t;                                                                  \
        return base + (b * q->ends * q->L + lo) * q->m;                                                                \
    }                                                                                                                  \
    void forward_##SUF(const Sequence *q, int64_t t) {                                                                 \
        int64_t m = q->m, n = q->ends * (t + 1);                                                                        \
        T *scr = (T *)q->scratch, *parts[10], d[2], u[2];                                                              \
        unsigned char *take[2];                                                                                        \
        scratch_##SUF(q, scr, parts, take);                                                                            \
        for (int64_t b = 0; b < q->B; b++) {                                                                           \
            T *rows = rows_##SUF(q, t, b, (T *)q->values);                                                             \
            const T *v = (const T *)q->sigs + (t * q->B + b) * q->sig_row + 2 * q->ends;                               \
            if (q->ends == 1) {                                                                                        \
                memcpy(rows + t * m, v, sizeof(T) * m); /* eq. 1 */                                                    \
            } else {                                                                                                   \
                memcpy(rows + (n - 1) * m, v, sizeof(T) * m); /* eq. 6: v_top */                                       \
                memcpy(rows, v + m, sizeof(T) * m);           /* v_bot */                                              \
            }                                                                                                          \
            forward_state_##SUF(q, t, b, parts, take, d, u);                                                           \
            memcpy(block_##SUF(q, t) + b * n, parts[4], sizeof(T) * n);                                                \
            T *r = (T *)q->reads + t * q->read_step + b * q->read_row;                                                 \
            read_##SUF(parts[5], rows, n, m, r);                                                                       \
            if (q->ends == 2) read_##SUF(parts[7], rows, n, m, r + m);                                                 \
        }                                                                                                              \
    }                                                                                                                  \
    /* Step t backwards. g_r: dL/dr_t (B rows of g_r_row); dL/ds_t from step t+1 is in the ping-pong buffer of t's    \
     * parity unless t == L-1; writes dL/ds_{t-1} to the other one and step t's signal gradients (times their local  \
     * derivatives and the padding mask) to g_sig[t]. */                                                              \
    void backward_##SUF(const Sequence *q, int64_t t, const T *g_r, int64_t g_r_row) {                               \
        int64_t m = q->m, ends = q->ends, n_prev = ends * t, n = n_prev + ends, N = ends * q->L + 2;                   \
        T *scr = (T *)q->scratch, *parts[10], d[2], u[2];                                                              \
        unsigned char *take[2];                                                                                        \
        T *g_next = (T *)((t & 1) ? q->g_s1 : q->g_s0), *g_prev = (T *)((t & 1) ? q->g_s0 : q->g_s1);                \
        T *g_s = scr + 11 * N, *g_mid = scr + 12 * N;                                                                  \
        scratch_##SUF(q, scr, parts, take);                                                                            \
        T *w[2] = {parts[5], parts[7]}, *cap[2] = {parts[6], parts[8]}, *g_w[2] = {parts[9], scr + 13 * N};          \
        for (int64_t b = 0; b < q->B; b++) {                                                                           \
            forward_state_##SUF(q, t, b, parts, take, d, u);                                                           \
            const T *gr = g_r + b * g_r_row;                                                                           \
            T *rows = rows_##SUF(q, t, b, (T *)q->values), *g_rows = rows_##SUF(q, t, b, (T *)q->g_values);          \
            if (t < q->L - 1) memcpy(g_s, g_next + b * n, sizeof(T) * n);                                              \
            else memset(g_s, 0, sizeof(T) * n);                                                                        \
            T *g_sig = (T *)q->g_sig + (t * q->B + b) * q->sig_row;                                                    \
            const T *p = (const T *)q->sigs + (t * q->B + b) * q->sig_row;                                             \
            T live = q->live ? ((const T *)q->live)[t * q->B + b] : (T)1, g_du[4];                                     \
            T *gp = g_prev + b * n_prev;                                                                               \
            if (ends == 1) {                                                                                           \
                rows_backward_##SUF(1, gr, w, take, cap, rows, g_rows, n, m, g_w);              /* eq. 15, 18 */     \
                read_backward_##SUF(g_w[0], take[0], cap[0], n, (int)q->read_top, g_s);                              \
                g_du[0] = g_s[n_prev];                                                  /* eq. 14 */                 \
                g_du[1] = pop_backward_##SUF(g_s, parts[0], parts[1], n_prev, (int)q->pop_top, gp); /* eq. 16-17 */  \
            } else {                                                                                                   \
                rows_backward_##SUF(2, gr, w, take, cap, rows, g_rows, n, m, g_w);                                    \
                read_backward_##SUF(g_w[0], take[0], cap[0], n, 1, g_s);                                              \
                read_backward_##SUF(g_w[1], take[1], cap[1], n, 0, g_s);                                              \
                g_du[0] = g_s[n - 1]; /* d_top */                                                                      \
                g_du[1] = g_s[0];     /* d_bot */                                                                      \
                g_du[3] = pop_backward_##SUF(g_s + 1, parts[2], parts[3], n_prev, 0, g_mid); /* eq. 8 */              \
                g_du[2] = pop_backward_##SUF(g_mid, parts[0], parts[1], n_prev, 1, gp);      /* eq. 7 */              \
            }                                                                                                          \
            for (int64_t e = 0; e < 2 * ends; e++) g_sig[e] = g_du[e] * p[e] * (1 - p[e]) * live;                    \
            const T *v = p + 2 * ends;                                                                                 \
            const T *gv_top = g_rows + (n - 1) * m; /* the row pushed at the top: dL/dv (eq. 15 summed) */            \
            for (int64_t j = 0; j < m; j++) g_sig[2 * ends + j] = gv_top[j] * (1 - v[j] * v[j]);                     \
            if (ends == 2)                                                                                             \
                for (int64_t j = 0; j < m; j++) g_sig[2 * ends + m + j] = g_rows[j] * (1 - v[m + j] * v[m + j]);      \
        }                                                                                                              \
    }

DEFINE_MEMORY(float, f32)
DEFINE_MEMORY(double, f64)

/* The scratch buffer forward_* and backward_* need, in bytes. */
int64_t scratch_bytes(int64_t ends, int64_t L) {
    int64_t N = ends * L + 2;
    return (int64_t)sizeof(double) * 16 * N;
}
