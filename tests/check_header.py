#!/usr/bin/env python3
"""The public header and the shared library agree (TAP output):
 - every TSR_API function in include/tessera.h is exported by libtessera.so and every exported
   function is declared there;
 - every TSR_API declaration carries a doc comment (the comment may head a group of declarations
   with no blank line between them);
 - every tsr_ name a comment mentions exists in the header's code;
 - tests/test_header.c names every TSR_API function, so its link against the shared library
   proves each one is there;
 - no TSR_API function takes more than MAX_PARAMS parameters, except the CLBlast shims tsr_sgemm and
   tsr_sgemm_strided_batched (calls with more take a descriptor); the counter is itself checked on
   a planted violation, so the check cannot pass by counting nothing.
Usage: check_header.py HEADER LIBRARY TEST_HEADER_C"""
import re
import subprocess
import sys

header_path, lib_path, test_c_path = sys.argv[1:4]
text = open(header_path).read()
lines = text.split('\n')

comment_re = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
comments = ' '.join(comment_re.findall(text))
code = comment_re.sub(lambda m: '\n' * m.group(0).count('\n'), text)

# TSR_API function declarations, with the line each starts on (line numbers survive comment removal).
decls = {}
for m in re.finditer(r'\bTSR_API\b[^;(]*?\b(tsr_\w+)\s*\(', code):
    if not m.group(0).startswith('TSR_API __attribute__'):
        decls[m.group(1)] = code.count('\n', 0, m.start())


MAX_PARAMS = 12
PARAM_EXEMPT = {'tsr_sgemm', 'tsr_sgemm_strided_batched'}


def parameter_counts(code_text):
    """{name: parameters} of every TSR_API function declared in comment-free header text."""
    counts = {}
    for m in re.finditer(r'\bTSR_API\b[^;(]*?\b(tsr_\w+)\s*\(', code_text):
        depth, i, commas, empty = 1, m.end(), 0, True
        while depth:
            ch = code_text[i]
            depth += (ch == '(') - (ch == ')')
            if depth == 1 and ch == ',':
                commas += 1
            if depth and not ch.isspace():
                empty = False
            i += 1
        params = code_text[m.end():i - 1].strip()
        counts[m.group(1)] = 0 if empty or params == 'void' else commas + 1
    return counts


def too_many_parameters(code_text):
    return sorted('%s (%d parameters)' % (n, c) for n, c in parameter_counts(code_text).items()
                  if c > MAX_PARAMS and n not in PARAM_EXEMPT)


PLANTED = ('TSR_API tsr_status tsr_planted(int a, int b, int c, int d, int e, int f, int g, int h, int i, int j,\n'
           '                              int k, void (*l)(int, int), int m);\n'
           'TSR_API void tsr_planted_ok(int (*f)(int, int), int g);\n'
           'TSR_API size_t tsr_planted_none(void);\n')


def documented(line_no):
    """Walk up over the declaration group: a comment must end right above it."""
    i = line_no - 1
    while i >= 0:
        s = lines[i].strip()
        if s.endswith('*/'):
            return True
        if not s or s.startswith('#') or '{' in s or '}' in s:
            return False
        i -= 1
    return False


out = subprocess.run(['nm', '-D', '--defined-only', lib_path], check=True, capture_output=True, text=True).stdout
exported = {f[2] for f in (l.split() for l in out.splitlines()) if len(f) == 3 and f[1] in 'TtWi' and f[2].startswith('tsr_')}
code_names = set(re.findall(r'\btsr_\w+', code))
mentioned = set(re.findall(r'\btsr_\w+', comments))
test_c = open(test_c_path).read()

checks = [
    ('the header declares TSR_API functions', sorted([] if decls else ['(none found)'])),
    ('every declared function is exported by ' + lib_path.split('/')[-1], sorted(set(decls) - exported)),
    ('every exported tsr_ function is declared in the header', sorted(exported - set(decls))),
    ('every TSR_API function has a doc comment', sorted(n for n, l in decls.items() if not documented(l))),
    ('every tsr_ name the comments mention exists in the header', sorted(mentioned - code_names)),
    ('tests/test_header.c names every TSR_API function',
     sorted(n for n in decls if not re.search(r'\b' + n + r'\b', test_c))),
    ('the parameter counter flags a planted 13-parameter function and counts the others right',
     [] if too_many_parameters(PLANTED) == ['tsr_planted (13 parameters)'] and
     parameter_counts(PLANTED) == {'tsr_planted': 13, 'tsr_planted_ok': 2, 'tsr_planted_none': 0} and
     parameter_counts(code).get('tsr_sgemm') == 20 else ['the counter is broken: %r' % parameter_counts(PLANTED)]),
    ('no public function takes more than %d parameters (the CLBlast shims excepted)' % MAX_PARAMS,
     too_many_parameters(code)),
]
print('1..%d' % len(checks))
failed = 0
for i, (name, bad) in enumerate(checks, 1):
    if bad:
        failed += 1
        print('not ok %d - %s' % (i, name))
        for b in bad:
            print('# offending: ' + b)
    else:
        print('ok %d - %s' % (i, name))
sys.exit(1 if failed else 0)
