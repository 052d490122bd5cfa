/* optim (single process): schedules at their key points, AdamW and LAMB
 * against a double-precision re-implementation of the papers' formulas,
 * the weight-decay name rule. With "--adamw-file IN OUT" it runs AdamW on
 * the inputs written by tests/test_optim_torch.py (PyTorch reference). */
#include "cloze/optim.h"
#include "cloze/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int close_to(double a, double b, double rel) {
    return fabs(a - b) <= rel * fabs(b) + 1e-15;
}

static cz_optim_config base_cfg(void) {
    cz_optim_config c;
    memset(&c, 0, sizeof c);
    c.kind = CZ_OPT_ADAMW;
    c.lr = 1e-3;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-6;
    c.weight_decay = 0.01;
    c.bias_correction = 1;
    c.n_no_decay = 2;
    strcpy(c.no_decay[0], "LayerNorm");
    strcpy(c.no_decay[1], "bias");
    c.schedule = CZ_SCHEDULE_LINEAR;
    c.warmup_steps = 10;
    return c;
}

static void test_schedules(void) {
    cz_optim_config c = base_cfg();
    /* linear: warmup (step+1)/10, then (100-step)/90 */
    CHECK(close_to(cz_lr_at(&c, 0, 100), 1e-4, 1e-12), "linear step 0: %g", cz_lr_at(&c, 0, 100));
    CHECK(close_to(cz_lr_at(&c, 9, 100), 1e-3, 1e-12), "linear end of warmup");
    CHECK(close_to(cz_lr_at(&c, 10, 100), 1e-3, 1e-12), "linear peak");
    CHECK(close_to(cz_lr_at(&c, 55, 100), 0.5e-3, 1e-12), "linear middle: %g",
          cz_lr_at(&c, 55, 100));
    CHECK(close_to(cz_lr_at(&c, 99, 100), 1e-3 / 90, 1e-9), "linear last");
    CHECK(cz_lr_at(&c, 100, 100) == 0, "linear end");
    c.min_lr_ratio = 0.1;
    CHECK(close_to(cz_lr_at(&c, 99, 100), 1e-4, 1e-12), "linear floor");
    CHECK(close_to(cz_lr_at(&c, 55, 100), 0.5e-3, 1e-12), "linear above floor");
    c.schedule = CZ_SCHEDULE_COSINE;
    CHECK(close_to(cz_lr_at(&c, 10, 100), 1e-3, 1e-12), "cosine peak");
    CHECK(close_to(cz_lr_at(&c, 55, 100), 1e-3 * (0.1 + 0.9 * 0.5), 1e-12), "cosine middle");
    CHECK(close_to(cz_lr_at(&c, 100, 100), 1e-4, 1e-12), "cosine floor");
    c.min_lr_ratio = 0;
    CHECK(close_to(cz_lr_at(&c, 40, 130), 1e-3 * 0.5 * (1 + cos(M_PI * 0.25)), 1e-12),
          "cosine quarter");
    c.schedule = CZ_SCHEDULE_CONSTANT;
    CHECK(close_to(cz_lr_at(&c, 4, 100), 5e-4, 1e-12), "constant warmup");
    CHECK(close_to(cz_lr_at(&c, 80, 100), 1e-3, 1e-12), "constant");
    c.warmup_fraction = 0.1;
    CHECK(cz_lr_warmup_steps(&c, 250) == 25, "warmup fraction: %ld", cz_lr_warmup_steps(&c, 250));
    c.warmup_steps = 0;
    c.warmup_fraction = 0;
    CHECK(close_to(cz_lr_at(&c, 0, 100), 1e-3, 1e-12), "no warmup");
}

static void test_names(void) {
    cz_optim_config c = base_cfg();
    CHECK(cz_optim_name_no_decay(&c, "bert.encoder.layer.0.attention.output.LayerNorm.weight"),
          "LN");
    CHECK(cz_optim_name_no_decay(&c, "bert.encoder.layer.0.attention.self.query.bias"), "bias");
    CHECK(!cz_optim_name_no_decay(&c, "bert.encoder.layer.0.attention.self.query.weight"),
          "weight");
    cz_tensor_info t[2];
    memset(t, 0, sizeof t);
    strcpy(t[0].name, "a.weight");
    t[0].numel = 5;
    strcpy(t[1].name, "a.bias");
    t[1].offset = 5;
    t[1].numel = 2;
    cz_param_range r[2];
    cz_error err;
    CHECK(cz_optim_ranges_from_tensors(t, 2, &c, r, &err) == 0 && !r[0].no_decay && r[1].no_decay,
          "ranges");
    t[1].offset = 3;
    CHECK(cz_optim_ranges_from_tensors(t, 2, &c, r, &err) != 0 && strstr(err.msg, "a.bias"),
          "overlap not caught");
}

/* Independent double-precision AdamW / LAMB (Loshchilov & Hutter Alg. 2;
 * You et al. Alg. 2) over `steps` steps of grads g[s][i]. */
static void reference(int lamb, const cz_optim_config *c, int n, int steps, const float *w0,
                      const float *g, const int *no_decay, double *w) {
    double *m = calloc((size_t)n, sizeof(double)), *v = calloc((size_t)n, sizeof(double));
    double *u = calloc((size_t)n, sizeof(double));
    for (int i = 0; i < n; i++) w[i] = w0[i];
    for (int s = 0; s < steps; s++) {
        int t = s + 1;
        double c1 = c->bias_correction ? 1 - pow(c->beta1, t) : 1;
        double c2 = c->bias_correction ? 1 - pow(c->beta2, t) : 1;
        double wn = 0, un = 0;
        for (int i = 0; i < n; i++) {
            double gi = g[(size_t)s * n + i];
            m[i] = c->beta1 * m[i] + (1 - c->beta1) * gi;
            v[i] = c->beta2 * v[i] + (1 - c->beta2) * gi * gi;
            u[i] = (m[i] / c1) / (sqrt(v[i] / c2) + c->eps) +
                   (no_decay[i] ? 0 : c->weight_decay * w[i]);
            wn += w[i] * w[i];
            un += u[i] * u[i];
        }
        double trust = lamb && wn > 0 && un > 0 ? sqrt(wn) / sqrt(un) : 1;
        for (int i = 0; i < n; i++) w[i] -= c->lr * trust * u[i];
    }
    free(m);
    free(v);
    free(u);
}

static void test_update_rules(void) {
    enum { N = 64, S = 5 };
    float w0[N], g[S * N];
    int nd[N];
    cz_rng_stream rs = cz_rng_stream_make(3, CZ_RNG_TEST, 0, 0, 0);
    for (int i = 0; i < N; i++) {
        w0[i] = (float)cz_rng_normal(&rs, (uint64_t)i);
        nd[i] = i >= 40;
    }
    for (int i = 0; i < S * N; i++) g[i] = (float)cz_rng_normal(&rs, (uint64_t)(1000 + i)) * 0.1f;
    cz_param_range r = {0, 40, 0}, r2 = {40, N - 40, 1};
    cz_param_range ranges[2] = {r, r2};
    for (int lamb = 0; lamb < 2; lamb++)
        for (int bc = 0; bc < 2; bc++) {
            cz_optim_config c = base_cfg();
            c.bias_correction = bc;
            c.weight_decay = 0.1;
            float w[N], m[N] = {0}, v[N] = {0}, u[N];
            memcpy(w, w0, sizeof w);
            for (int s = 0; s < S; s++) {
                int t = s + 1;
                cz_adam_coef k = {(float)c.lr,
                                  (float)c.beta1,
                                  (float)c.beta2,
                                  (float)c.eps,
                                  (float)c.weight_decay,
                                  bc ? (float)(1 - pow(c.beta1, t)) : 1.0f,
                                  bc ? (float)(1 - pow(c.beta2, t)) : 1.0f,
                                  1.0f};
                if (!lamb) {
                    cz_adamw_update(&k, ranges, 2, w, g + s * N, m, v, 0, N);
                    continue;
                }
                /* LAMB over the whole buffer as one tensor, in two pieces
                 * (as sharding splits it): partial sums add up */
                double ws1, us1, ws2, us2;
                cz_lamb_direction(&k, 0, w, g + s * N, m, v, u, 40, &ws1, &us1);
                cz_lamb_direction(&k, 1, w + 40, g + s * N + 40, m + 40, v + 40, u + 40, N - 40,
                                  &ws2, &us2);
                double trust = sqrt(ws1 + ws2) / sqrt(us1 + us2);
                cz_lamb_apply((float)(c.lr * trust), w, u, N);
            }
            double ref[N];
            reference(lamb, &c, N, S, w0, g, nd, ref);
            /* error relative to the size of S updates (lr each): float
             * rounding is ~1e-5 of it; a wrong term (decay, correction) is
             * >= 1e-2 of it */
            double worst = 0;
            for (int i = 0; i < N; i++) {
                double e = fabs(w[i] - ref[i]) / (c.lr * S);
                if (e > worst) worst = e;
            }
            CHECK(worst < 1e-4, "%s bias_correction=%d: worst relative error %g",
                  lamb ? "LAMB" : "AdamW", bc, worst);
        }
}

/* For tests/test_optim_torch.py: IN = int32 n, steps, no_decay_from;
 * float64 lr, b1, b2, eps, wd; float32 w[n], g[steps][n]. OUT = float32 w[n]. */
static int adamw_file(const char *in, const char *out) {
    void *data;
    size_t len;
    cz_error err;
    if (cz_read_file(in, &data, &len, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const char *p = data;
    int32_t hdr[3];
    double h[5];
    memcpy(hdr, p, sizeof hdr);
    memcpy(h, p + 12, sizeof h);
    int n = hdr[0], steps = hdr[1], nd_from = hdr[2];
    if (len != 12 + 40 + (size_t)n * 4 * (1 + (size_t)steps)) {
        fprintf(stderr, "%s: size %zu does not match header\n", in, len);
        return 1;
    }
    float *w = malloc((size_t)n * 4), *g = malloc((size_t)n * steps * 4);
    float *m = calloc((size_t)n, 4), *v = calloc((size_t)n, 4);
    memcpy(w, p + 52, (size_t)n * 4);
    memcpy(g, p + 52 + (size_t)n * 4, (size_t)n * steps * 4);
    cz_param_range ranges[2] = {{0, (size_t)nd_from, 0},
                                {(size_t)nd_from, (size_t)(n - nd_from), 1}};
    for (int s = 0; s < steps; s++) {
        int t = s + 1;
        cz_adam_coef k = {(float)h[0],
                          (float)h[1],
                          (float)h[2],
                          (float)h[3],
                          (float)h[4],
                          (float)(1 - pow(h[1], t)),
                          (float)(1 - pow(h[2], t)),
                          1.0f};
        cz_adamw_update(&k, ranges, 2, w, g + (size_t)s * n, m, v, 0, (size_t)n);
    }
    FILE *f = fopen(out, "wb");
    int ok = f && fwrite(w, 4, (size_t)n, f) == (size_t)n;
    if (f) fclose(f);
    free(w);
    free(g);
    free(m);
    free(v);
    cz_free(data);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--adamw-file") == 0) return adamw_file(argv[2], argv[3]);
    test_schedules();
    test_names();
    test_update_rules();
    if (failures) return 1;
    printf("ok\n");
    return 0;
}
