#!/usr/bin/env python3
"""Generate the cffi extension's C source (API mode) from include/tessera.h.

    build_cffi.py include/tessera.h OUT.c

The declarations cffi needs are the header's own, with comments, preprocessor lines and the
TSR_API and TSR_PRINTF_LIKE markers removed and integer #defines substituted; the OpenCL handle types the header
uses are declared opaque (an unknown cl_ type stops the build, so the header cannot grow a
type the bindings would get wrong). API mode compiles the result against the real header, so a
declaration that drifted from it fails to compile instead of corrupting memory at run time.
A few OpenCL calls the package needs for its own buffers are declared after the header's.
"""
import re
import sys

import cffi

# The OpenCL types tessera.h may use: opaque handles and integer typedefs.
CL_HANDLES = ['cl_platform_id', 'cl_device_id', 'cl_context', 'cl_command_queue', 'cl_mem', 'cl_kernel',
              'cl_event', 'cl_program']
CL_INTEGERS = ['cl_int', 'cl_uint', 'cl_ulong', 'cl_bool', 'cl_mem_flags', 'cl_mem_info']

# OpenCL calls used by the package (buffers it allocates for NumPy arrays, copies, contexts).
CL_CALLS = '''
cl_mem clCreateBuffer(cl_context context, cl_mem_flags flags, size_t size, void *host_ptr, cl_int *errcode_ret);
cl_int clReleaseMemObject(cl_mem memobj);
cl_int clRetainMemObject(cl_mem memobj);
cl_int clGetMemObjectInfo(cl_mem memobj, cl_mem_info param_name, size_t param_value_size, void *param_value,
                          size_t *param_value_size_ret);
cl_int clEnqueueReadBuffer(cl_command_queue queue, cl_mem buffer, cl_bool blocking_read, size_t offset, size_t size,
                           void *ptr, cl_uint num_events_in_wait_list, const cl_event *event_wait_list,
                           cl_event *event);
cl_int clEnqueueWriteBuffer(cl_command_queue queue, cl_mem buffer, cl_bool blocking_write, size_t offset,
                            size_t size, const void *ptr, cl_uint num_events_in_wait_list,
                            const cl_event *event_wait_list, cl_event *event);
cl_int clEnqueueCopyBufferRect(cl_command_queue queue, cl_mem src_buffer, cl_mem dst_buffer,
                               const size_t *src_origin, const size_t *dst_origin, const size_t *region,
                               size_t src_row_pitch, size_t src_slice_pitch, size_t dst_row_pitch,
                               size_t dst_slice_pitch, cl_uint num_events_in_wait_list,
                               const cl_event *event_wait_list, cl_event *event);
cl_int clFinish(cl_command_queue queue);
#define CL_SUCCESS 0
#define CL_TRUE 1
#define CL_MEM_READ_WRITE 1
#define CL_MEM_COPY_HOST_PTR 32
#define CL_MEM_SIZE 4354
#define CL_MEM_CONTEXT 4358
#define CL_MEM_ASSOCIATED_MEMOBJECT 4359
#define CL_MEM_OFFSET 4360
'''


def cdef_from_header(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    defines = dict(re.findall(r'^\s*#\s*define\s+(TSR_\w+)\s+(\d+)\s*$', text, re.M))
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith('#') or stripped in ('extern "C" {', '}') and not lines_open_brace(lines):
            continue
        lines.append(line)
    body = '\n'.join(lines)
    body = re.sub(r'\bTSR_API\s+', '', body)
    body = re.sub(r'\s*\bTSR_PRINTF_LIKE\(\s*\d+\s*,\s*\d+\s*\)', '', body)
    for name, value in defines.items():
        body = re.sub(r'\b%s\b' % name, value, body)
    used = set(re.findall(r'\bcl_\w+\b', body))
    unknown = used - set(CL_HANDLES) - set(CL_INTEGERS)
    if unknown:
        sys.exit('build_cffi.py: tessera.h uses OpenCL types the bindings do not declare: %s' % ', '.join(sorted(unknown)))
    prologue = ['typedef struct _%s *%s;' % (t, t) for t in CL_HANDLES]
    prologue += ['typedef int... %s;' % t for t in CL_INTEGERS]
    prologue += ['#define %s %s' % item for item in sorted(defines.items())]
    return '\n'.join(prologue) + '\n' + body + '\n' + CL_CALLS


def lines_open_brace(lines):
    """True while a declaration's braces are open: its closing '}' belongs to it."""
    depth = 0
    for line in lines:
        depth += line.count('{') - line.count('}')
    return depth > 0


def main():
    header, out = sys.argv[1], sys.argv[2]
    ffi = cffi.FFI()
    ffi.cdef(cdef_from_header(open(header, encoding='utf-8').read()))
    ffi.set_source('tessera._tessera_cffi', '#define CL_TARGET_OPENCL_VERSION 120\n#include <tessera.h>\n')
    ffi.emit_c_code(out)


if __name__ == '__main__':
    main()
