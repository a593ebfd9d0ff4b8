/* Data derived from constant buffers (tsr_buffer_set_constant): an op's per-call work on an
 * operand that does not change between calls (conv2d's transformed or widened weights) kept per
 * device and reused while the buffer's generation is the one it was derived at.
 *
 * Staleness: a watch (one per marked root buffer) carries a generation that every write tessera
 * knows of advances: op outputs (tsr_buffer_written, from each op and from graph replays) and
 * the caller's tsr_buffer_changed for writes of its own. Derived data records the generation it
 * was made at and is made again when that moved. The buffer's release is seen through a
 * destructor callback, which runs before the buffer's memory is freed, so a new buffer at the same
 * address can never match the old watch; the callback only sets an atomic flag (it may run on a
 * driver thread while a tessera thread holds registry_lock across an enqueue), and the watch and
 * its data go at the next registry operation or at the device's close.
 *
 * Lifetimes: a caller of tsr_derived_get gets the derived buffer retained and hands it back with
 * tsr_derived_done and its last event, which releases it once that event completes; so data
 * dropped (stale, evicted, its device closing) stays alive for every command already enqueued on
 * it, also on implementations that free a released buffer early. */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct watch {
    cl_mem root;                 /* the marked buffer (never retained: its release must be seen) */
    _Atomic uint64_t generation; /* advanced by every known write */
    _Atomic bool released;       /* set by the destructor callback */
    _Atomic int refs;            /* the registry's and the callback's */
    bool listed;                 /* in the registry (guarded by registry_lock) */
    bool warned;                 /* an op said once that it could not keep its data (registry_lock) */
    uint64_t serial;             /* this marking's number (a re-marked buffer gets a new one) */
    struct watch *next;
} watch;

typedef struct derived {
    tsr_device *device;
    watch *w;
    size_t offset;          /* the source's byte offset in the root */
    char key[96];           /* what was derived (the op's text: form, types, sizes) */
    uint64_t generation;    /* w's when the data was made */
    cl_mem mem;
    size_t bytes;
    cl_event ready;         /* the command that made it (retained; NULL: none) */
    uint64_t used;          /* registry_clock at its last use (least recently used goes first) */
    struct derived *next;
} derived;

/* Guards the lists and every `listed`; taken after a device's lock, never before it. Recursive:
 * a derivation may run an op (tsr_convert) whose output hook takes it again. */
static pthread_mutex_t registry_lock;
static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static watch *watches;
static derived *entries;
static uint64_t registry_clock;
static uint64_t watch_serials; /* the last serial given (registry_lock) */
static _Atomic size_t nwatches; /* listed watches: 0 lets every hook return at once */
/* A lock-free first test for the hot paths (op outputs, GEMM's B): per slot of a root's address,
 * how many listed watches hash there (0: that root is certainly not marked); and whether a marked
 * buffer was released since the last sweep (then the next registry operation sweeps, as before). */
#define MARK_SLOTS 256
static _Atomic unsigned marked_slots[MARK_SLOTS];
static _Atomic bool released_pending;

static size_t mark_slot(cl_mem root) {
    uintptr_t a = (uintptr_t)root;
    return (size_t)((a >> 4) ^ (a >> 12) ^ (a >> 20)) % MARK_SLOTS;
}

/* Whether `root` may be marked or a sweep is due (false: neither, no need for the lock). */
static bool may_be_marked(cl_mem root) {
    return atomic_load(&released_pending) || atomic_load(&marked_slots[mark_slot(root)]) > 0;
}

static void registry_init(void) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&registry_lock, &attr);
    pthread_mutexattr_destroy(&attr);
}

static void registry_enter(void) {
    pthread_once(&registry_once, registry_init);
    pthread_mutex_lock(&registry_lock);
}

static void watch_drop(watch *w) {
    if (atomic_fetch_sub(&w->refs, 1) == 1) free(w);
}

static void CL_CALLBACK watch_destructed(cl_mem mem, void *data) {
    (void)mem;
    watch *w = data;
    atomic_store(&w->released, true);
    atomic_store(&released_pending, true); /* after `released`: a sweep that clears it sees that */
    watch_drop(w);
}

static void entry_free(derived *e) {
    if (e->ready) clReleaseEvent(e->ready);
    clReleaseMemObject(e->mem); /* callers hold their own reference until their commands finish */
    free(e);
}

/* Drops entries matching `pred` (registry_lock held). */
static void entries_drop(bool (*pred)(const derived *, const void *), const void *arg) {
    for (derived **pe = &entries; *pe;) {
        derived *e = *pe;
        if (pred(e, arg)) {
            *pe = e->next;
            entry_free(e);
        } else {
            pe = &e->next;
        }
    }
}

static bool of_watch(const derived *e, const void *w) { return e->w == w; }
static bool stale(const derived *e, const void *unused) {
    (void)unused;
    return e->generation != atomic_load(&e->w->generation);
}
static bool of_device(const derived *e, const void *dev) { return e->device == dev; }

static void unlist(watch *w) {
    entries_drop(of_watch, w);
    for (watch **pw = &watches; *pw; pw = &(*pw)->next)
        if (*pw == w) {
            *pw = w->next;
            break;
        }
    w->listed = false;
    atomic_fetch_sub(&marked_slots[mark_slot(w->root)], 1);
    atomic_fetch_sub(&nwatches, 1);
    watch_drop(w);
}

/* Removes the watches of released buffers and their data (registry_lock held). */
static void sweep(void) {
    atomic_store(&released_pending, false); /* before the scan: a release after it sets it again */
    for (watch *w = watches, *next; w; w = next) {
        next = w->next;
        if (atomic_load(&w->released)) unlist(w);
    }
}

/* The listed watch of `root`, or NULL (registry_lock held; after sweep, so never a released one). */
static watch *find_watch(cl_mem root) {
    for (watch *w = watches; w; w = w->next)
        if (w->root == root && !atomic_load(&w->released)) return w;
    return NULL;
}

static tsr_status root_of(cl_mem buffer, const char *what, tsr_mem_region *r) {
    if (!buffer) return tsr_fail(TSR_ERR_INVALID_ARG, "%s: buffer is NULL", what);
    return tsr_mem_region_of(buffer, "buffer", r);
}

/* root_of for the public entry points: also refuses a memory object that is no buffer (an image);
 * op outputs (tsr_buffer_written) were validated as buffers by their op. */
static tsr_status buffer_root_of(cl_mem buffer, const char *what, tsr_mem_region *r) {
    tsr_status st = root_of(buffer, what, r);
    if (st != TSR_SUCCESS) return st;
    cl_mem_object_type type = 0;
    cl_int err = clGetMemObjectInfo(buffer, CL_MEM_TYPE, sizeof type, &type, NULL);
    if (err != CL_SUCCESS || type != CL_MEM_OBJECT_BUFFER)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "%s: buffer is not a buffer (an image or another memory object: type 0x%x)", what,
                        (unsigned)type);
    return TSR_SUCCESS;
}

tsr_status tsr_buffer_set_constant(cl_mem buffer, bool constant) {
    tsr_clear_diagnostics();
    tsr_mem_region r;
    tsr_status st = buffer_root_of(buffer, "tsr_buffer_set_constant", &r);
    if (st != TSR_SUCCESS) return st;
    if (r.root != buffer)
        return tsr_fail(TSR_ERR_INVALID_ARG,
                        "tsr_buffer_set_constant: buffer is a sub-buffer; mark its parent buffer (the promise covers "
                        "the whole allocation, and its sub-buffers then count as constant)");
    registry_enter();
    sweep();
    watch *w = find_watch(buffer);
    if (constant && !w) {
        w = calloc(1, sizeof *w);
        if (!w) {
            st = tsr_fail(TSR_ERR_OUT_OF_MEMORY, "tsr_buffer_set_constant: out of host memory");
        } else {
            w->root = buffer;
            w->serial = ++watch_serials;
            atomic_init(&w->refs, 2);
            cl_int err = clSetMemObjectDestructorCallback(buffer, watch_destructed, w);
            if (err != CL_SUCCESS) {
                free(w);
                st = tsr_fail_cl(err, "clSetMemObjectDestructorCallback", __FILE__, __LINE__);
            } else {
                w->listed = true;
                w->next = watches;
                watches = w;
                atomic_fetch_add(&marked_slots[mark_slot(buffer)], 1);
                atomic_fetch_add(&nwatches, 1);
            }
        }
    } else if (!constant && w) {
        unlist(w); /* its callback keeps its own reference */
    }
    pthread_mutex_unlock(&registry_lock);
    return st;
}

/* Advances the generation of `buffer`'s root, if marked, and drops the data derived from it. */
static tsr_status bump(cl_mem buffer, const char *what) {
    if (atomic_load(&nwatches) == 0) return TSR_SUCCESS;
    tsr_mem_region r;
    tsr_status st = root_of(buffer, what, &r);
    if (st != TSR_SUCCESS) return st;
    if (!may_be_marked(r.root)) return TSR_SUCCESS; /* most op outputs: no lock */
    registry_enter();
    sweep();
    watch *w = find_watch(r.root);
    if (w) {
        atomic_fetch_add(&w->generation, 1);
        entries_drop(stale, NULL);
    }
    pthread_mutex_unlock(&registry_lock);
    return TSR_SUCCESS;
}

tsr_status tsr_buffer_changed(cl_mem buffer) {
    tsr_clear_diagnostics();
    tsr_mem_region r;
    tsr_status st = buffer_root_of(buffer, "tsr_buffer_changed", &r); /* a checked argument, marks or not */
    if (st != TSR_SUCCESS || atomic_load(&nwatches) == 0) return st;
    return bump(buffer, "tsr_buffer_changed");
}

void tsr_buffer_written(cl_mem buffer) {
    if (!buffer || atomic_load(&nwatches) == 0) return;
    if (bump(buffer, "an op's output") != TSR_SUCCESS) tsr_clear_diagnostics(); /* validated by the op */
}

/* Drops least recently used entries of `dev` until `room` more bytes fit its cap. */
static void make_room(tsr_device *dev, size_t room, size_t cap) {
    for (;;) {
        size_t total = 0;
        derived *oldest = NULL;
        for (derived *e = entries; e; e = e->next)
            if (e->device == dev) {
                total += e->bytes;
                if (!oldest || e->used < oldest->used) oldest = e;
            }
        if (!oldest || total + room <= cap) return;
        for (derived **pe = &entries; *pe; pe = &(*pe)->next)
            if (*pe == oldest) {
                *pe = oldest->next;
                break;
            }
        entry_free(oldest);
    }
}

static _Atomic size_t cap_for_tests; /* 0: none */

void tsr_derived_test_cap(size_t bytes) { atomic_store(&cap_for_tests, bytes); }

size_t tsr_derived_cap(const tsr_device *dev) {
    size_t forced = atomic_load(&cap_for_tests);
    if (forced) return forced;
    uint64_t cap = dev->info.global_mem_bytes / 8;
    if (cap > ((uint64_t)1 << 30)) cap = (uint64_t)1 << 30;
    return (size_t)cap;
}

/* A new entry made by `fill` (registry_lock held): *e, or NULL where the buffer could not be
 * allocated (the caller's per-call path runs, no error); with the data made but no host memory for
 * the entry, *out and *ready hand it to this call alone. */
static tsr_status make(tsr_device *dev, watch *w, size_t offset, const char *key, uint64_t gen, size_t bytes,
                       tsr_derive_fn fill, void *ctx, cl_command_queue queue, derived **e, cl_mem *out,
                       cl_event *ready) {
    *e = NULL;
    cl_int err;
    cl_mem mem = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err != CL_SUCCESS) return TSR_SUCCESS;
    cl_event made = NULL;
    tsr_status st = fill(dev, ctx, mem, queue, &made);
    if (st != TSR_SUCCESS) {
        clReleaseMemObject(mem);
        return st;
    }
    derived *n = calloc(1, sizeof *n);
    if (!n) {
        *out = mem, *ready = made;
        return TSR_SUCCESS;
    }
    n->device = dev, n->w = w, n->offset = offset, n->generation = gen, n->mem = mem, n->bytes = bytes;
    n->ready = made;
    strcpy(n->key, key);
    n->next = entries;
    entries = n;
    *e = n;
    return TSR_SUCCESS;
}

tsr_status tsr_derived_get(tsr_device *dev, cl_mem src, size_t src_offset, const char *key, size_t bytes,
                           tsr_derive_fn fill, void *ctx, cl_command_queue queue, cl_mem *out, cl_event *ready) {
    *out = NULL, *ready = NULL;
    if (atomic_load(&nwatches) == 0 || bytes == 0 || bytes > tsr_derived_cap(dev) ||
        bytes > dev->info.max_alloc_bytes || strlen(key) >= sizeof ((derived *)0)->key)
        return TSR_SUCCESS;
    tsr_mem_region r;
    tsr_status st = tsr_mem_region_of(src, "the source", &r);
    if (st != TSR_SUCCESS) return st;
    size_t offset;
    if (__builtin_add_overflow(r.origin, src_offset, &offset)) return TSR_SUCCESS;
    registry_enter();
    sweep();
    watch *w = find_watch(r.root);
    derived *e = NULL;
    if (w) {
        uint64_t gen = atomic_load(&w->generation);
        for (e = entries; e; e = e->next)
            if (e->device == dev && e->w == w && e->offset == offset && !strcmp(e->key, key)) break;
        if (e && e->generation != gen) { /* stale: made again below, in a new buffer */
            entries_drop(stale, NULL);
            e = NULL;
        }
        if (!e) {
            make_room(dev, bytes, tsr_derived_cap(dev));
            TSR_CHECK(st, make(dev, w, offset, key, gen, bytes, fill, ctx, queue, &e, out, ready), done);
            if (*out) goto done; /* made but not kept (no host memory for the entry) */
        }
        if (e) {
            e->used = ++registry_clock;
            clRetainMemObject(e->mem);
            *out = e->mem;
            if (e->ready) {
                cl_int status = CL_QUEUED;
                if (clGetEventInfo(e->ready, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL) ==
                        CL_SUCCESS && status == CL_COMPLETE) {
                    clReleaseEvent(e->ready); /* done: later users need not wait */
                    e->ready = NULL;
                } else {
                    clRetainEvent(e->ready);
                    *ready = e->ready;
                }
            }
        }
    }
done:
    pthread_mutex_unlock(&registry_lock);
    return st;
}

bool tsr_derived_any(void) { return atomic_load(&nwatches) > 0; }

bool tsr_derived_may_hold(cl_mem src) {
    if (atomic_load(&nwatches) == 0) return false;
    tsr_mem_region r;
    if (tsr_mem_region_of(src, "the source", &r) != TSR_SUCCESS) {
        tsr_clear_diagnostics(); /* the op reports a bad buffer itself */
        return true;
    }
    return may_be_marked(r.root);
}

bool tsr_derived_first_miss(cl_mem src) {
    tsr_mem_region r;
    if (atomic_load(&nwatches) == 0 || tsr_mem_region_of(src, "the source", &r) != TSR_SUCCESS) {
        tsr_clear_diagnostics();
        return false;
    }
    registry_enter();
    sweep();
    watch *w = find_watch(r.root);
    bool first = w && !w->warned;
    if (first) w->warned = true;
    pthread_mutex_unlock(&registry_lock);
    return first;
}

tsr_status tsr_derived_peek(tsr_device *dev, cl_mem src, size_t src_offset, const char *key, cl_mem *out,
                            tsr_derived_ref *ref) {
    *out = NULL;
    memset(ref, 0, sizeof *ref);
    if (atomic_load(&nwatches) == 0 || strlen(key) >= sizeof ref->key) return TSR_SUCCESS;
    tsr_mem_region r;
    tsr_status st = tsr_mem_region_of(src, "the source", &r);
    if (st != TSR_SUCCESS) return st;
    size_t offset;
    if (__builtin_add_overflow(r.origin, src_offset, &offset)) return TSR_SUCCESS;
    cl_event ready = NULL;
    registry_enter();
    sweep();
    watch *w = find_watch(r.root);
    if (w) {
        uint64_t gen = atomic_load(&w->generation);
        for (derived *e = entries; e; e = e->next)
            if (e->device == dev && e->w == w && e->offset == offset && !strcmp(e->key, key)) {
                if (e->generation != gen) break; /* stale: not handed out */
                e->used = ++registry_clock;
                clRetainMemObject(e->mem);
                *out = e->mem;
                if (e->ready) {
                    clRetainEvent(e->ready);
                    ready = e->ready;
                }
                ref->root = r.root, ref->serial = w->serial, ref->generation = gen, ref->offset = offset;
                strcpy(ref->key, key);
                break;
            }
    }
    pthread_mutex_unlock(&registry_lock);
    if (ready) { /* made on some queue: done before anything recorded reads it */
        cl_int err = clWaitForEvents(1, &ready);
        clReleaseEvent(ready);
        if (err != CL_SUCCESS) {
            clReleaseMemObject(*out);
            *out = NULL;
            memset(ref, 0, sizeof *ref);
            return tsr_fail_cl(err, "clWaitForEvents (kept data)", __FILE__, __LINE__);
        }
    }
    return TSR_SUCCESS;
}

bool tsr_derived_current(const tsr_derived_ref *ref) {
    registry_enter();
    sweep();
    watch *w = find_watch(ref->root);
    bool current = w && w->serial == ref->serial && atomic_load(&w->generation) == ref->generation;
    pthread_mutex_unlock(&registry_lock);
    return current;
}

static void CL_CALLBACK release_after(cl_event event, cl_int status, void *data) {
    (void)event, (void)status;
    clReleaseMemObject((cl_mem)data);
}

void tsr_derived_done(cl_mem mem, cl_event ready, cl_event last) {
    if (ready) clReleaseEvent(ready);
    if (!mem) return;
    if (last && clSetEventCallback(last, CL_COMPLETE, release_after, mem) == CL_SUCCESS) return;
    if (last) clWaitForEvents(1, &last); /* no callback: wait, then release */
    clReleaseMemObject(mem);
}

void tsr_derived_release_device(tsr_device *dev) {
    registry_enter();
    entries_drop(of_device, dev);
    pthread_mutex_unlock(&registry_lock);
}

size_t tsr_derived_count_of(cl_mem buffer, size_t *bytes) {
    size_t n = 0, b = 0;
    tsr_mem_region r;
    if (tsr_mem_region_of(buffer, "buffer", &r) == TSR_SUCCESS) {
        registry_enter();
        sweep();
        watch *w = find_watch(r.root);
        for (derived *e = entries; w && e; e = e->next)
            if (e->w == w) ++n, b += e->bytes;
        pthread_mutex_unlock(&registry_lock);
    }
    if (bytes) *bytes = b;
    return n;
}

void tsr_derived_stats(const tsr_device *dev, size_t *count, size_t *bytes, size_t *marked) {
    size_t n = 0, b = 0, m = 0;
    registry_enter();
    sweep();
    for (derived *e = entries; e; e = e->next)
        if (!dev || e->device == dev) ++n, b += e->bytes;
    for (watch *w = watches; w; w = w->next) ++m;
    pthread_mutex_unlock(&registry_lock);
    if (count) *count = n;
    if (bytes) *bytes = b;
    if (marked) *marked = m;
}
