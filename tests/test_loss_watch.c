/* The step loop's divergence watch (cz_loss_watch_add): silent on the noisy
 * single-batch losses of a converged fine-tune and on near-zero losses, where
 * comparing each batch's loss with the smallest one seen (the rule it
 * replaces) warned; prompt on a blow-up and on a sustained rise; one warning
 * per episode, again after a recovery. */
#include "cloze/train.h"

#include <math.h>

#include "check.h"

/* Deterministic noise in [lo, hi): a 64-bit LCG (Knuth's MMIX constants). */
static double noise(unsigned long long *s, double lo, double hi) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (hi - lo) * (double)(*s >> 11) / 9007199254740992.0;
}

/* Feeds n losses from f(k) starting at step *step; returns the number of
 * alarms, the first one's step in *first (0: none). */
typedef double (*loss_fn)(long k, unsigned long long *s);
static int feed(cz_loss_watch *w, long *step, long n, loss_fn f, unsigned long long *s,
                long *first) {
    int alarms = 0;
    *first = 0;
    for (long k = 0; k < n; k++, (*step)++) {
        if (cz_loss_watch_add(w, *step, f(k, s))) {
            if (!alarms) *first = *step;
            alarms++;
        }
    }
    return alarms;
}

/* A tagging fine-tune: from 2.5 down to a floor of about 0.1, each batch's
 * loss 0.3-1.8x the trend (a recorded WNUT-17 run went 0.029 to 0.18). */
static double tagging(long k, unsigned long long *s) {
    return fmax(2.5 * exp(-k / 15.0), 0.1) * noise(s, 0.3, 1.8);
}
/* A converged classifier: 0.001-0.012 per batch. */
static double near_zero(long k, unsigned long long *s) {
    (void)k;
    return noise(s, 0.001, 0.012);
}
/* 100 steps at 0.002 then at 0.02 (x10, but the right answers keep 98 % of
 * their probability: no blow-up), or 0.5 then 2.5 (x5 and 2 nats: one) */
static double tiny_step(long k, unsigned long long *s) {
    (void)s;
    return k < 100 ? 0.002 : 0.02;
}
static double big_step(long k, unsigned long long *s) {
    (void)s;
    return k < 100 ? 0.5 : 2.5;
}
/* Pre-training going well: 10 down to 6, +-5 %. */
static double healthy(long k, unsigned long long *s) {
    return (6 + 4 * exp(-k / 20.0)) * noise(s, 0.95, 1.05);
}
static double flat(long k, unsigned long long *s) {
    (void)k;
    return 6 * noise(s, 0.95, 1.05);
}
/* optim.lr far too high: the loss jumps by orders of magnitude */
static double blowup(long k, unsigned long long *s) {
    (void)s;
    return k < 3 ? 6 : 2e5;
}
/* a sustained rise: 2 to 12 over 40 steps */
static double rising(long k, unsigned long long *s) {
    (void)s;
    return 2 + 10 * fmin(k / 40.0, 1.0);
}

int main(void) {
    unsigned long long seed = 1;
    long step, first;

    /* the case that warned before: the old rule (a batch above 4x the
     * smallest batch loss) fires on this very sequence */
    {
        cz_loss_watch w = {0};
        unsigned long long s = seed;
        double raw_min = INFINITY;
        int raw_alarms = 0;
        for (long k = 0; k < 300; k++) {
            double x = tagging(k, &s);
            if (x > 4 * raw_min) raw_alarms++;
            raw_min = fmin(raw_min, x);
        }
        CHECK(raw_alarms > 0, "the tagging sequence is not the hard case (old rule silent)");
        step = 1;
        s = seed;
        int n = feed(&w, &step, 300, tagging, &s, &first);
        CHECK(n == 0, "tagging fine-tune: %d alarm(s), first at step %ld", n, first);
    }
    {
        cz_loss_watch w = {0};
        unsigned long long s = seed;
        step = 1;
        int n = feed(&w, &step, 500, near_zero, &s, &first);
        CHECK(n == 0, "near-zero losses: %d alarm(s), first at step %ld", n, first);
        CHECK(w.min > 0 && w.min < 0.012, "minimum %g", w.min);
    }
    {
        cz_loss_watch w = {0};
        unsigned long long s = seed;
        step = 1;
        int n = feed(&w, &step, 200, tiny_step, &s, &first);
        CHECK(n == 0, "0.002 -> 0.02: %d alarm(s), first at step %ld", n, first);
        cz_loss_watch v = {0};
        step = 1;
        n = feed(&v, &step, 200, big_step, &s, &first);
        CHECK(n == 1 && first > 100 && first < 120, "0.5 -> 2.5: %d alarm(s), first at step %ld", n,
              first);
    }
    {
        cz_loss_watch w = {0};
        unsigned long long s = seed;
        step = 1;
        int n = feed(&w, &step, 200, healthy, &s, &first);
        CHECK(n == 0, "healthy pre-training: %d alarm(s)", n);
    }

    /* a blow-up after 3 steps warns on its first step, once while it lasts */
    {
        cz_loss_watch w = {0};
        unsigned long long s = seed;
        step = 1;
        int n = feed(&w, &step, 30, blowup, &s, &first);
        CHECK(n == 1 && first == 4, "blow-up: %d alarm(s), first at step %ld (want 1 at 4)", n,
              first);
        CHECK(w.min_step <= 3 && fabs(w.min - 6) < 1e-9, "minimum %g at step %ld", w.min,
              w.min_step);
        CHECK(w.smoothed > 4 * w.min, "smoothed %g", w.smoothed);
    }

    /* a sustained rise warns once the average has quadrupled, not before */
    {
        cz_loss_watch w = {0};
        unsigned long long s = seed;
        step = 1;
        double prev = 0;
        int n = 0;
        first = 0;
        for (long k = 0; k < 80; k++, step++) {
            prev = w.n ? w.smoothed : 0;
            if (cz_loss_watch_add(&w, step, rising(k, &s))) {
                if (!n) {
                    first = step;
                    CHECK(w.smoothed > 8 && prev <= 8, "fired at smoothed %g (before: %g)",
                          w.smoothed, prev);
                }
                n++;
            }
        }
        CHECK(n == 1 && first > 1, "sustained rise: %d alarm(s), first at step %ld", n, first);
    }

    /* after a recovery below twice the minimum, a second blow-up warns again */
    {
        cz_loss_watch w = {0};
        unsigned long long s = seed;
        step = 1;
        int a = feed(&w, &step, 10, blowup, &s, &first);
        int b = feed(&w, &step, 200, flat, &s, &first); /* back to 6: the average falls */
        CHECK(w.smoothed < 2 * w.min, "not recovered: %g against minimum %g", w.smoothed, w.min);
        int c = feed(&w, &step, 10, blowup, &s, &first);
        CHECK(a == 1 && b == 0 && c == 1, "alarms per phase %d %d %d (want 1 0 1)", a, b, c);
    }
    return check_finish(NULL);
}
