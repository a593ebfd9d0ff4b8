/* A preload for bench/program_proof.py (LD_PRELOAD, never linked into a product): writes every
 * OpenCL program a process builds from source into $PROGRAM_DUMP_DIR, as NAME.cl (the text given
 * to clCreateProgramWithSource) and NAME.opts (the options given to clBuildProgram), NAME being
 * the process id and a counter. It forwards every call to the real OpenCL library (dlsym
 * RTLD_NEXT). Programs made from binaries (a cache hit) are not seen: run with empty caches. */
#define _GNU_SOURCE
#include <CL/cl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_PROGRAMS 4096

typedef cl_program (*create_fn)(cl_context, cl_uint, const char **, const size_t *, cl_int *);
typedef cl_int (*build_fn)(cl_program, cl_uint, const cl_device_id *, const char *,
                           void(CL_CALLBACK *)(cl_program, void *), void *);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    cl_program program;
    char *text;
} seen[MAX_PROGRAMS];
static size_t nseen;
static unsigned long counter;

CL_API_ENTRY cl_program CL_API_CALL clCreateProgramWithSource(cl_context context, cl_uint count, const char **strings,
                                                              const size_t *lengths, cl_int *err) {
    static create_fn real;
    if (!real) real = (create_fn)dlsym(RTLD_NEXT, "clCreateProgramWithSource");
    if (!real) {
        if (err) *err = CL_INVALID_OPERATION;
        return NULL;
    }
    cl_program p = real(context, count, strings, lengths, err);
    if (!p || !getenv("PROGRAM_DUMP_DIR")) return p;
    size_t total = 0;
    for (cl_uint i = 0; i < count; ++i) total += lengths && lengths[i] ? lengths[i] : strlen(strings[i]);
    char *text = malloc(total + 1);
    if (!text) return p;
    size_t at = 0;
    for (cl_uint i = 0; i < count; ++i) {
        size_t n = lengths && lengths[i] ? lengths[i] : strlen(strings[i]);
        memcpy(text + at, strings[i], n);
        at += n;
    }
    text[at] = '\0';
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < nseen && seen[i].program != p) ++i; /* a released program's handle may come back */
    if (i < nseen) {
        free(seen[i].text);
        seen[i].text = text;
        text = NULL;
    } else if (nseen < MAX_PROGRAMS) {
        seen[nseen].program = p;
        seen[nseen++].text = text;
        text = NULL;
    }
    pthread_mutex_unlock(&lock);
    free(text);
    return p;
}

static void dump(const char *text, const char *options) {
    const char *dir = getenv("PROGRAM_DUMP_DIR");
    char path[4096];
    pthread_mutex_lock(&lock);
    unsigned long n = counter++;
    pthread_mutex_unlock(&lock);
    const char *parts[2] = {text, options ? options : ""};
    const char *ext[2] = {"cl", "opts"};
    for (int i = 0; i < 2; ++i) {
        snprintf(path, sizeof path, "%s/%ld-%lu.%s", dir, (long)getpid(), n, ext[i]);
        FILE *f = fopen(path, "w");
        if (!f) return;
        fputs(parts[i], f);
        fclose(f);
    }
}

CL_API_ENTRY cl_int CL_API_CALL clBuildProgram(cl_program program, cl_uint ndev, const cl_device_id *devices,
                                               const char *options, void(CL_CALLBACK *notify)(cl_program, void *),
                                               void *user) {
    static build_fn real;
    if (!real) real = (build_fn)dlsym(RTLD_NEXT, "clBuildProgram");
    if (!real) return CL_INVALID_OPERATION;
    char *text = NULL;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nseen; ++i)
        if (seen[i].program == program && seen[i].text) {
            text = strdup(seen[i].text);
            break;
        }
    pthread_mutex_unlock(&lock);
    if (text && getenv("PROGRAM_DUMP_DIR")) dump(text, options);
    free(text);
    return real(program, ndev, devices, options, notify, user);
}
