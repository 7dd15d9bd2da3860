/* Internal to src/device/sim: the records behind the simulated devices, streams
 * and events, shared by the stream engine, the backend table and the kernels. */
#ifndef FERRY_DEVICE_SIM_INTERNAL_H
#define FERRY_DEVICE_SIM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "common/error.h"
#include "common/mutex.h"
#include "device/sim/sim.h"

typedef struct sim_device {
    ferry_mutex lock;         /* guards used, streams, dflt; host threads only */
    size_t used, limit;       /* device memory, bytes */
    sim_stream *streams;      /* every live stream, the default one included */
    sim_stream *dflt;         /* the legacy default (NULL) stream, made on first use */
    pthread_mutex_t err_lock; /* guards sticky_msg and writes of sticky */
    _Atomic int sticky;       /* FERRY_OK until a fault; then every call fails */
    char sticky_msg[FERRY_ERROR_MAX];
    atomic_llong fault_countdown;
    /* What ferry_sim_debug_counts reports: host calls that CUDA would make wait
     * or that a training step should not make (see sim.h). */
    atomic_llong n_syncs, n_d2h, n_launches, n_mallocs, n_frees;
} sim_device;

/* Adds one to counter c of device dev (no-op for a device out of range). */
void ferry_sim_count_(int dev, int which);
enum { SIM_COUNT_SYNC, SIM_COUNT_D2H, SIM_COUNT_LAUNCH, SIM_COUNT_MALLOC, SIM_COUNT_FREE };

extern sim_device ferry_sim_devices[FERRY_SIM_MAX_DEVICES];

struct sim_stream {
    int dev;
    uint64_t id;              /* unique for the process: never reused */
    uint64_t rng;             /* the delays; only the stream's thread touches it */
    pthread_t thread;
    ferry_mutex lock;         /* guards the queue, the counts, running and stop */
    pthread_cond_t cv;
    sim_op *head, *tail;      /* queued, not yet taken by the stream's thread */
    uint64_t queued, done;    /* operations ever queued / ever finished */
    bool running;             /* one is taken off the queue and not yet counted */
    bool stop;
    struct sim_graph *capture; /* non-NULL while capturing (graph_sim.c): ops go
                                * there instead of to the queue */
    sim_stream *next_in_dev;  /* guarded by the device's lock */
};

typedef struct sim_event {
    int dev;
    bool timing;
    atomic_int refs;          /* the handle and every queued record or wait */
    pthread_mutex_t lock;     /* guards recorded, completed, ms */
    pthread_cond_t cv;
    uint64_t recorded;        /* records issued */
    uint64_t completed;       /* the latest record the device has passed */
    double ms;                /* when it passed it */
} sim_event;

uint64_t ferry_sim_seed(void);
/* FERRY_ASSERT of a device's invariants (stream_sim.c); d->lock held. */
void ferry_sim_check_device(sim_device *d);
ferry_status ferry_sim_sticky(int dev);

ferry_status ferry_sim_stream_new(int dev, sim_stream **out);
void ferry_sim_stream_free(sim_stream *s);
sim_stream *ferry_sim_default_stream(int dev, ferry_status *st);
void ferry_sim_stream_wait_ticket(sim_stream *s, uint64_t ticket);
ferry_status ferry_sim_stream_sync(sim_stream *s);
ferry_status ferry_sim_stream_query(sim_stream *s, bool *done);
ferry_status ferry_sim_device_sync(int dev);

ferry_status ferry_sim_event_new(int dev, bool timing, sim_event **out);
void ferry_sim_event_unref(sim_event *e);
ferry_status ferry_sim_event_record(sim_event *e, sim_stream *s);
ferry_status ferry_sim_stream_wait_event(sim_stream *s, sim_event *e);
ferry_status ferry_sim_event_sync(sim_event *e);
ferry_status ferry_sim_event_query(sim_event *e, bool *done);
ferry_status ferry_sim_event_elapsed(sim_event *a, sim_event *b, float *ms);

/* ---- stream capture and graphs (graph_sim.c) ----
 * A capturing stream records the operations queued on it into a graph instead
 * of running them; the graph replays them in order as one launch. CUDA's rules
 * (thread-local capture mode, as the CUDA backend uses) are errors here: a wait
 * for a capturing stream, an allocation or free or a device-wide wait by the
 * capturing thread, the legacy stream used by it, a pageable or waiting copy,
 * an event crossing the capture's boundary. Each such call fails, naming
 * CUDA's error, and invalidates the capture, as CUDA does. */
typedef struct sim_graph sim_graph;
ferry_status ferry_sim_capture_begin(sim_stream *s);
/* Ends s's capture (on the thread that began it); *out the replayable graph,
 * or an error (the capture was invalidated) with the recording dropped. */
ferry_status ferry_sim_capture_end(sim_stream *s, sim_graph **out);
ferry_status ferry_sim_graph_launch(sim_graph *g, sim_stream *s);
void ferry_sim_graph_unref(sim_graph *g);
/* Queues op into s's capture when s captures (true: taken; s->lock held). */
bool ferry_sim_capture_take_(sim_stream *s, sim_op *op);
/* The stream the calling thread captures into, or NULL. */
sim_stream *ferry_sim_thread_capture(void);
/* The error for `what` (a call CUDA forbids during capture, as CUDA's error
 * `cuda_err` names it): invalidates the capture of s (NULL: the calling
 * thread's) and returns FERRY_ERR_CUDA with the message set. */
ferry_status ferry_sim_capture_violation(sim_stream *s, const char *what, const char *cuda_err);
/* True while s captures (takes s->lock). */
bool ferry_sim_stream_capturing(sim_stream *s);
/* True while some stream of device dev captures. */
bool ferry_sim_device_capturing(int dev);

/* The calling thread's current simulated device (cudaGetDevice). */
int ferry_sim_current(void);

#endif
