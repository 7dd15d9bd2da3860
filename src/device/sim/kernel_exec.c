/* The simulated GPU's kernel execution (kernel_exec.h): launch as a stream
 * operation, blocks in a seeded order, threads as plain calls or as fibers that
 * meet at barriers and warp operations. The fibers of a stream thread (stacks
 * and contexts) are kept for its next kernel and freed when the thread ends. */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include "common/error.h"
#include "device/sim/kernel_exec.h"
#include "device/sim/sim.h"
#include "device/sim/sim_internal.h"

/* gcc says which sanitizer with a macro, clang with __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define FKSIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FKSIM_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define FKSIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FKSIM_TSAN 1
#endif
#endif
#if FKSIM_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#if FKSIM_TSAN
#include <sanitizer/tsan_interface.h>
#endif

__thread fksim_thread *ferry_simk_self;

/* The context switch. swapcontext also saves and restores the signal mask, a
 * system call per switch, and the simulation switches at every barrier and
 * shuffle of every thread: on x86-64 a switch of the callee-saved registers and
 * the stack pointer does (the System V ABI's callee-saved set; the floating-point
 * control words are the same on every fiber of a thread). Elsewhere, ucontext. */
#if defined(__x86_64__)
typedef struct fk_ctx_sw {
    void *sp;
} fk_ctx_sw;
void ferry_simk_switch_(void **save_sp, void *to_sp);
__asm__(".text\n"
        ".globl ferry_simk_switch_\n"
        ".hidden ferry_simk_switch_\n"
        ".type ferry_simk_switch_, @function\n"
        "ferry_simk_switch_:\n"
        "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
        "    ret\n"
        ".size ferry_simk_switch_, .-ferry_simk_switch_\n");

/* A fresh stack whose first switch "returns" into entry, aligned as a call. */
static void ctx_make(fk_ctx_sw *c, void *stack, size_t size, void (*entry)(void))
{
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;            /* entry's return address: it never returns */
    *--sp = (void *)entry;
    for (int i = 0; i < 6; i++)
        *--sp = NULL;        /* rbp, rbx, r12-r15 */
    c->sp = sp;
}

static void ctx_swap(fk_ctx_sw *from, fk_ctx_sw *to) { ferry_simk_switch_(&from->sp, to->sp); }
#else
typedef ucontext_t fk_ctx_sw;

static void ctx_make(fk_ctx_sw *c, void *stack, size_t size, void (*entry)(void))
{
    getcontext(c); /* cppcheck-suppress getcontextCalled ; the portable fallback */
    c->uc_stack.ss_sp = stack;
    c->uc_stack.ss_size = size;
    c->uc_link = NULL;
    makecontext(c, entry, 0); /* cppcheck-suppress makecontextCalled */
}

static void ctx_swap(fk_ctx_sw *from, fk_ctx_sw *to)
{
    swapcontext(from, to); /* cppcheck-suppress swapcontextCalled */
}
#endif

/* ---- the launching side ---- */

static _Thread_local int launch_dev;
static _Thread_local ferry_status launch_status;
static _Thread_local char launch_msg[384];
static atomic_ullong launch_count;

int ferry_simk_enter(int dev)
{
    int prev = launch_dev;
    launch_dev = dev;
    return prev;
}

void ferry_simk_leave(int prev) { launch_dev = prev; }
int ferry_simk_device(void) { return launch_dev; }

ferry_status ferry_simk_oom(int dev, const char *what)
{
    return ferry_fail(FERRY_ERR_DEVICE_OOM, "cuda:%d (simulated): %s: out of device memory, also after "
                      "emptying the caching allocator's cache", dev, what);
}

static void launch_failed(ferry_status st)
{
    if (launch_status == FERRY_OK) {
        launch_status = st;
        snprintf(launch_msg, sizeof launch_msg, "%s", ferry_last_error());
    }
}

ferry_status ferry_simk_launched(const char *what)
{
    ferry_status st = launch_status;
    launch_status = FERRY_OK;
    if (st == FERRY_OK)
        return FERRY_OK;
    return ferry_fail(st, "%s: %s", what, launch_msg);
}

typedef struct exec_op {
    sim_op op;
    fksim_kernel k;
    uint64_t seed;
    bool fault;
} exec_op;

static ferry_status run_kernel(exec_op *e);

static ferry_status exec_run(sim_op *op)
{
    exec_op *e = (exec_op *)op;
    if (e->fault)
        return ferry_fail(FERRY_ERR_CUDA, "kernel %s: injected fault (an illegal memory access)", e->k.name);
    return run_kernel(e);
}

static void exec_done(sim_op *op)
{
    exec_op *e = (exec_op *)op;
    e->k.free_closure(e->k.closure);
}

/* CUDA's limits on a launch's shape (compute capability 7.5 and later). */
static ferry_status check_config(const fksim_kernel *k)
{
    uint64_t threads = (uint64_t)k->block.x * k->block.y * k->block.z;
    if (threads == 0 || threads > 1024 || k->block.x > 1024 || k->block.y > 1024 || k->block.z > 64)
        return ferry_fail(FERRY_ERR_CUDA, "kernel %s: block (%u, %u, %u) is not a valid block "
                          "(1 to 1024 threads, z <= 64; cudaErrorInvalidConfiguration)",
                          k->name, k->block.x, k->block.y, k->block.z);
    if (k->grid.x == 0 || k->grid.y == 0 || k->grid.z == 0 || k->grid.x > 0x7fffffffu ||
        k->grid.y > 65535 || k->grid.z > 65535)
        return ferry_fail(FERRY_ERR_CUDA, "kernel %s: grid (%u, %u, %u) is not a valid grid "
                          "(x 1 to 2^31-1, y and z 1 to 65535; cudaErrorInvalidConfiguration)",
                          k->name, k->grid.x, k->grid.y, k->grid.z);
    return FERRY_OK;
}

void ferry_simk_launch(const fksim_kernel *k, void *stream)
{
    int dev = launch_dev;
    char what[160];
    snprintf(what, sizeof what, "kernel %s", k->name);
    sim_stream *s;
    ferry_status st = check_config(k);
    if (st == FERRY_OK)
        st = ferry_sim_launch_stream(dev, stream, what, &s);
    exec_op *e = NULL;
    if (st == FERRY_OK && !(e = calloc(1, sizeof *e)))
        st = ferry_fail(FERRY_ERR_NO_MEMORY, "%s: no memory to launch", what);
    if (st != FERRY_OK || !e) {
        k->free_closure(k->closure);
        launch_failed(st);
        return;
    }
    e->op.run = exec_run;
    e->op.done = exec_done;
    e->op.what = k->name;
    e->k = *k;
    e->seed = ferry_sim_seed() ^ (atomic_fetch_add(&launch_count, 1) * UINT64_C(0x9E3779B97F4A7C15));
    e->fault = ferry_sim_take_fault(dev);
    (void)ferry_sim_enqueue(s, &e->op, NULL);
}

/* ---- the running side ---- */

static uint64_t mix(uint64_t z)
{
    z += UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t ferry_simk_math_hash(unsigned fn, uint64_t bits)
{
    return mix(ferry_sim_seed() ^ mix(bits ^ ((uint64_t)fn << 56)));
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A seeded permutation of 0..n-1 as i -> (a i + b) mod n with a coprime to n:
 * no table, whatever the grid's size. */
typedef struct perm {
    uint64_t n, a, b;
} perm;

static perm perm_make(uint64_t n, uint64_t *rng)
{
    perm p = {n, 1, 0};
    if (n < 2)
        return p;
    p.b = (*rng = mix(*rng)) % n;
    for (int tries = 0; tries < 16; tries++) {
        uint64_t a = (*rng = mix(*rng)) % n;
        if (a && gcd64(a, n) == 1) {
            p.a = a;
            break;
        }
    }
    return p;
}

/* The permutation's values in order, each from the last by an add and a
 * compare (a division per thread, 128-bit at that, cost more than most
 * simulated threads' own work): x_0 = b, x_{i+1} = (x_i + a) mod n. */
static uint64_t perm_first(const perm *p) { return p->b; }

static uint64_t perm_next(const perm *p, uint64_t x)
{
    uint64_t room = p->n - x; /* x < n, a < n: x + a may pass 2^64 only past n */
    return p->a >= room ? p->a - room : x + p->a;
}

enum { F_READY, F_RUN, F_BARRIER, F_WARP, F_DONE };

typedef struct fiber {
    fk_ctx_sw ctx;
    void *stack;       /* mmap'd, a guard page at its low end */
    size_t size;
    fksim_thread th;
    unsigned linear;
    int state;
    int wop, warg, wwidth;
    unsigned wmask;
    uint64_t wval, wres;
#if FKSIM_ASAN
    void *fake;
#endif
#if FKSIM_TSAN
    void *tsan;
#endif
} fiber;

/* One per stream thread: its fibers and the block running now. */
typedef struct sched {
    fk_ctx_sw main;
    fiber *f;
    unsigned cap;
    unsigned *ready;
    unsigned nready, n, ndone, nbar;
    unsigned arrived[32];   /* per warp: lanes waiting at a warp operation */
    fiber *cur;
    const fksim_kernel *k;
    const fksim_block *blk;
    bool coop;
    bool failed;
    bool from_main;         /* the switch in progress leaves the main stack */
    char msg[320];
    jmp_buf plain_exit;
    uint64_t rng;
#if FKSIM_ASAN
    const void *main_bottom;
    size_t main_size;
#endif
#if FKSIM_TSAN
    void *tsan_main;
#endif
} sched;

static _Thread_local sched *self_sched;
static pthread_key_t sched_key;
static pthread_once_t sched_once = PTHREAD_ONCE_INIT;

#if FKSIM_ASAN || FKSIM_TSAN
#define FIBER_STACK ((size_t)256 << 10)
#else
#define FIBER_STACK ((size_t)64 << 10)
#endif

static void sched_free(void *p)
{
    sched *s = p;
    if (!s)
        return;
    for (unsigned i = 0; i < s->cap; i++) {
#if FKSIM_TSAN
        if (s->f[i].tsan)
            __tsan_destroy_fiber(s->f[i].tsan);
#endif
        if (s->f[i].stack)
            munmap(s->f[i].stack, s->f[i].size);
    }
    free(s->f);
    free(s->ready);
    free(s);
}

static void sched_key_make(void) { (void)pthread_key_create(&sched_key, sched_free); }

static sched *sched_get(void)
{
    if (self_sched)
        return self_sched;
    pthread_once(&sched_once, sched_key_make);
    sched *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    self_sched = s;
    pthread_setspecific(sched_key, s);
    return s;
}

static bool sched_reserve(sched *s, unsigned n)
{
    if (n <= s->cap)
        return true;
    fiber *f = realloc(s->f, n * sizeof *f);
    if (!f)
        return false;
    s->f = f;
    memset(f + s->cap, 0, (n - s->cap) * sizeof *f);
    unsigned *r = realloc(s->ready, n * sizeof *r);
    if (!r)
        return false;
    s->ready = r;
    for (unsigned i = s->cap; i < n; i++) {
        const int rw = PROT_READ | PROT_WRITE, anon = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
        /* cppcheck-suppress invalidFunctionArg ; MAP_ANONYMOUS takes fd -1 */
        void *st = mmap(NULL, FIBER_STACK, rw, anon, -1, 0);
        if (st == MAP_FAILED)
            return false;
        (void)mprotect(st, 4096, PROT_NONE); /* an overflow faults instead of corrupting */
        f[i].stack = st;
        f[i].size = FIBER_STACK;
        s->cap = i + 1;
    }
    return true;
}

static void fail(sched *s, const char *fmt, const char *a, unsigned u1, unsigned u2)
{
    if (s->failed)
        return;
    s->failed = true;
    char what[200];
    snprintf(what, sizeof what, fmt, a, u1, u2);
    snprintf(s->msg, sizeof s->msg, "kernel %s, block (%u, %u, %u): %s", s->k->name, s->blk->idx.x,
             s->blk->idx.y, s->blk->idx.z, what);
}

/* The ASan and TSan annotations of a switch to fiber `to` (NULL: the main
 * stack); `save` keeps the leaving side's fake stack (NULL when it never
 * resumes). */
static void annotate_leave(sched *s, fiber *to, void **save)
{
#if FKSIM_ASAN
    if (to)
        __sanitizer_start_switch_fiber(save, to->stack, to->size);
    else
        __sanitizer_start_switch_fiber(save, s->main_bottom, s->main_size);
#else
    (void)save;
#endif
#if FKSIM_TSAN
    __tsan_switch_to_fiber(to ? to->tsan : s->tsan_main, 0);
#else
    (void)s;
    (void)to;
#endif
}

/* Run by a fiber once it runs again: the main stack's bounds when it came from there. */
static void annotate_arrive(sched *s, void *fake)
{
#if FKSIM_ASAN
    const void *bottom;
    size_t size;
    __sanitizer_finish_switch_fiber(fake, &bottom, &size);
    if (s->from_main) {
        s->main_bottom = bottom;
        s->main_size = size;
    }
#else
    (void)fake;
#endif
    s->from_main = false;
}

static void make_ready(sched *s, unsigned i);
static void account(sched *s, fiber *f);

/* Fiber side: f has stopped (its state says why). Do the bookkeeping, then
 * switch straight to the next fiber to run, or to the main stack when none can
 * (the block is done, or stuck). `dying`: f never resumes. */
static void yield(sched *s, fiber *f, bool dying)
{
    account(s, f);
    fiber *to = NULL;
    if (s->nready && !s->failed) {
        /* A multiply, not a modulo: this runs at every barrier of every thread. */
        unsigned pick = (unsigned)(((s->rng = mix(s->rng)) >> 32) * s->nready >> 32);
        to = &s->f[s->ready[pick]];
        s->ready[pick] = s->ready[--s->nready];
        if (to == f) {
            f->state = F_RUN;
            return;
        }
        to->state = F_RUN;
    }
    s->cur = to;
    ferry_simk_self = to ? &to->th : NULL;
#if FKSIM_ASAN
    annotate_leave(s, to, dying ? NULL : &f->fake);
#else
    (void)dying;
    annotate_leave(s, to, NULL);
#endif
    ctx_swap(&f->ctx, to ? &to->ctx : &s->main);
#if FKSIM_ASAN
    annotate_arrive(s, f->fake);
#else
    annotate_arrive(s, NULL);
#endif
}

static void fiber_main(void)
{
    sched *s = self_sched;
    fiber *f = s->cur;
    annotate_arrive(s, NULL);
    s->k->body(s->k->closure);
    f->state = F_DONE;
    yield(s, f, true);
}

static void make_ready(sched *s, unsigned i)
{
    s->f[i].state = F_READY;
    s->ready[s->nready++] = i;
}

static fksim_dim thread_index(const fksim_dim *dim, unsigned linear)
{
    if (dim->y == 1 && dim->z == 1) { /* the usual 1-D block: no divisions */
        fksim_dim t = {linear, 0, 0};
        return t;
    }
    fksim_dim t = {linear % dim->x, (linear / dim->x) % dim->y, linear / (dim->x * dim->y)};
    return t;
}

static unsigned popcount32(unsigned v)
{
    v = v - ((v >> 1) & 0x55555555u);
    v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
    return (((v + (v >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
}

/* Enough lanes of f's warp wait at a warp operation: if all of f's mask are
 * there, compute each one's result and let them go on. */
static void warp_complete(sched *s, fiber *f)
{
    unsigned warp = f->linear / 32, base = warp * 32, mask = f->wmask;
    if (s->arrived[warp] < popcount32(mask))
        return;
    unsigned lanes = s->n - base < 32 ? s->n - base : 32;
    if (!(mask & (1u << (f->linear % 32)))) {
        fail(s, "%s: thread %u calls a warp operation whose mask 0x%x leaves its own lane out", "warp operation",
             f->linear, mask);
        return;
    }
    if (lanes < 32 && (mask >> lanes)) {
        fail(s, "%s: mask 0x%x names lanes past the block's last thread (warp %u)", "warp operation", mask, warp);
        return;
    }
    uint64_t ballot = 0;
    for (unsigned l = 0; l < lanes; l++) {
        if (!(mask & (1u << l)))
            continue;
        fiber *g = &s->f[base + l];
        if (g->state == F_DONE) {
            fail(s, "%s: lane %u of warp %u exited before a warp operation its mask names", "warp operation", l,
                 warp);
            return;
        }
        if (g->state != F_WARP)
            return; /* not there yet */
        if (g->wmask != mask || g->wop != f->wop) {
            fail(s, "%s: lanes of warp %u disagree on the operation or the mask (0x%x)", "warp operation", warp,
                 mask);
            return;
        }
        if (g->wval)
            ballot |= 1u << l;
    }
    for (unsigned l = 0; l < lanes; l++) {
        if (!(mask & (1u << l)))
            continue;
        fiber *g = &s->f[base + l];
        int w = g->wwidth;
        unsigned seg = l & ~(unsigned)(w - 1), src = l;
        switch (g->wop) {
        case FKSIM_SHFL: src = seg + ((unsigned)g->warg & (unsigned)(w - 1)); break;
        case FKSIM_SHFL_UP: src = (int)(l - seg) >= g->warg ? l - (unsigned)g->warg : l; break;
        case FKSIM_SHFL_DOWN: src = l + (unsigned)g->warg < seg + (unsigned)w ? l + (unsigned)g->warg : l; break;
        case FKSIM_SHFL_XOR: src = ((l ^ (unsigned)g->warg) & ~(unsigned)(w - 1)) == seg ? l ^ (unsigned)g->warg : l;
            break;
        default: break;
        }
        switch (g->wop) {
        case FKSIM_BALLOT: g->wres = ballot; break;
        case FKSIM_ANY: g->wres = ballot != 0; break;
        case FKSIM_ALL: g->wres = ballot == (mask & ((lanes < 32 ? 1u << lanes : 0u) - 1u)); break;
        case FKSIM_SYNCWARP: g->wres = 0; break;
        default:
            if (src >= lanes || !(mask & (1u << src))) {
                fail(s, "%s: lane %u reads lane %u, which is not in the mask", "shuffle", l, src);
                return;
            }
            g->wres = s->f[base + src].wval;
        }
    }
    for (unsigned l = 0; l < lanes; l++)
        if (mask & (1u << l))
            make_ready(s, base + l);
    s->arrived[warp] -= popcount32(mask);
}

/* What f's stop means for the others: a finished thread, one more at the
 * barrier (the last releases them all), one more lane at a warp operation. */
static void account(sched *s, fiber *f)
{
    if (f->state == F_DONE) {
        s->ndone++;
    } else if (f->state == F_BARRIER) {
        if (++s->nbar == s->n) {
            s->nbar = 0;
            for (unsigned j = 0; j < s->n; j++)
                make_ready(s, j);
        }
    } else if (f->state == F_WARP) {
        s->arrived[f->linear / 32]++;
        warp_complete(s, f);
    }
}

static void run_block_coop(sched *s)
{
    s->nready = s->ndone = s->nbar = 0;
    memset(s->arrived, 0, sizeof s->arrived);
    for (unsigned i = 0; i < s->n; i++) {
        fiber *f = &s->f[i];
        f->linear = i;
        f->th.tid = thread_index(&s->blk->dim, i);
        f->th.blk = s->blk;
        ctx_make(&f->ctx, f->stack, f->size, fiber_main);
#if FKSIM_TSAN
        if (!f->tsan)
            f->tsan = __tsan_create_fiber(0);
#endif
        make_ready(s, i);
    }
    /* The first thread; from then on each stopping thread picks the next. */
    unsigned pick = (unsigned)(((s->rng = mix(s->rng)) >> 32) * s->nready >> 32);
    fiber *first = &s->f[s->ready[pick]];
    s->ready[pick] = s->ready[--s->nready];
    first->state = F_RUN;
    s->cur = first;
    ferry_simk_self = &first->th;
    s->from_main = true;
#if FKSIM_ASAN
    void *fake = NULL;
    annotate_leave(s, first, &fake);
#else
    annotate_leave(s, first, NULL);
#endif
    ctx_swap(&s->main, &first->ctx);
#if FKSIM_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
    ferry_simk_self = NULL;
    if (s->failed || s->ndone == s->n)
        return;
    if (s->nbar)
        fail(s, "%s reached by %u of the block's %u threads; the others exited or wait at a warp operation",
             "__syncthreads()", s->nbar, s->n);
    else
        fail(s, "%s never completes: %u of %u threads wait for lanes that do not come", "a warp operation",
             s->n - s->ndone, s->n);
}

/* The block's threads one by one, each to its end. A barrier or warp operation
 * (which a plain launch may not reach) fails the block and jumps back here; the
 * jump buffer is set once per block, not per thread (a thread's own work is
 * often a handful of instructions). */
static __attribute__((noinline)) void run_block_plain(sched *s, perm *tp)
{
    if (setjmp(s->plain_exit) != 0) {
        ferry_simk_self = NULL;
        return; /* s->failed is set */
    }
    fksim_thread th;
    th.blk = s->blk;
    const fksim_dim *dim = &s->blk->dim;
    void (*body)(void *) = s->k->body;
    void *closure = s->k->closure;
    uint64_t lin = perm_first(tp);
    for (unsigned j = 0; j < s->n && !s->failed; j++, lin = perm_next(tp, lin)) {
        th.tid = thread_index(dim, (unsigned)lin);
        ferry_simk_self = &th;
        body(closure);
    }
    ferry_simk_self = NULL;
}

static ferry_status run_kernel(exec_op *e)
{
    sched *s = sched_get();
    const fksim_kernel *k = &e->k;
    unsigned n = k->block.x * k->block.y * k->block.z;
    if (!s || (k->coop && !sched_reserve(s, n)))
        return ferry_fail(FERRY_ERR_NO_MEMORY, "kernel %s: no memory for %u simulated threads", k->name, n);
    s->k = k;
    s->n = n;
    s->coop = k->coop;
    s->failed = false;
    s->rng = e->seed;
#if FKSIM_TSAN
    s->tsan_main = __tsan_get_current_fiber();
#endif
    uint64_t blocks = (uint64_t)k->grid.x * k->grid.y * k->grid.z;
    perm bp = perm_make(blocks, &s->rng);
    fksim_block blk;
    blk.dim = k->block;
    blk.grid = k->grid;
    s->blk = &blk;
    uint64_t b = perm_first(&bp);
    for (uint64_t j = 0; j < blocks && !s->failed; j++, b = perm_next(&bp, b)) {
        blk.idx.x = (unsigned)(b % k->grid.x);
        blk.idx.y = (unsigned)((b / k->grid.x) % k->grid.y);
        blk.idx.z = (unsigned)(b / ((uint64_t)k->grid.x * k->grid.y));
        if (k->coop) {
            run_block_coop(s);
        } else {
            perm tp = perm_make(n, &s->rng);
            run_block_plain(s, &tp);
        }
    }
    s->k = NULL;
    if (s->failed)
        return ferry_fail(FERRY_ERR_CUDA, "%s", s->msg);
    return FERRY_OK;
}

/* ---- device-side primitives ---- */

/* In a plain launch there is no one to meet: the launch chose wrongly. */
static void plain_misuse(sched *s, const char *what)
{
    fail(s, "%s in a kernel launched with FK_LAUNCH: threads run one by one there; launch it with "
            "FK_LAUNCH_COOP", what, 0, 0);
    longjmp(s->plain_exit, 1);
}

void ferry_simk_syncthreads(void)
{
    sched *s = self_sched;
    if (!s || !s->k)
        return;
    if (!s->coop)
        plain_misuse(s, "__syncthreads()");
    fiber *f = s->cur;
    f->state = F_BARRIER;
    yield(s, f, false);
}

uint64_t ferry_simk_warp(int op, unsigned mask, uint64_t v, int arg, int width)
{
    sched *s = self_sched;
    if (!s || !s->k)
        return v;
    if (!s->coop)
        plain_misuse(s, "a warp operation (__shfl_*_sync, __ballot_sync, __syncwarp)");
    fiber *f = s->cur;
    if (width < 1 || width > 32 || (width & (width - 1))) {
        fail(s, "%s: width %u is not a power of two from 1 to 32 (thread %u)", "shuffle", (unsigned)width,
             f->linear);
        width = 32;
    }
    f->wop = op;
    f->wmask = mask;
    f->wval = v;
    f->warg = arg;
    f->wwidth = width;
    f->state = F_WARP;
    yield(s, f, false);
    return f->wres;
}
