#!/usr/bin/env python3
"""Every relative link of the documentation resolves (TAP output, one test per page).

Reads README.md and docs/*.md (and, with --all, every .md under docs/), finds each Markdown link
or image `[text](target)` outside code blocks and code spans, and checks that a relative target
names an existing file or folder and that its #anchor, if any, is a heading of the target page
(GitHub's anchors: the heading's text in lower case, punctuation dropped, spaces as hyphens, a
repeated heading numbered -1, -2, ...). Links with a scheme (https:, mailto:) are not fetched.
A path written out from the source root, `docs/...` (a command's --json docs/data/x.json, code blocks
included), must name an existing file or folder too, so moving a data file cannot leave a stale name
(not checked in the generated reports under docs/data/: they keep the paths their commands wrote).
One more test checks the layout: docs/ holds the pages (*.md) and data/; everything else (JSON, logs,
charts, generated reports) lives under docs/data/.
Usage: check_doc_links.py SOURCE_ROOT [--all]"""
import os
import re
import sys

FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
CODE_SPAN = re.compile(r'(`+)(.+?)\1')
# [text](target) or ![alt](target), target up to the first space or ')' (an optional title follows).
LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
SCHEME = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')
# docs/<path> written out in prose or code (not part of a longer path or a URL).
ROOT_PATH = re.compile(r'(?<![\w/.-])docs/[\w./-]*[\w/]')


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks, code spans blanked."""
    inside = False
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
                continue
            if not inside:
                yield number, CODE_SPAN.sub(lambda m: ' ' * len(m.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link reads as its text
    text = text.replace('`', '')
    text = re.sub(r'[*_]{1,3}(\S[^*_]*?)[*_]{1,3}', r'\1', text)  # emphasis
    text = text.strip().lower()
    text = ''.join(c for c in text if c.isalnum() or c in ' -_')
    return text.replace(' ', '-')


_anchors = {}


def anchors(path):
    """The anchors a page defines: its headings' slugs (numbered when repeated) and HTML ids."""
    if path not in _anchors:
        found, seen = set(), {}
        inside = False
        with open(path, encoding='utf-8') as f:
            for line in f:
                if FENCE.match(line):
                    inside = not inside
                    continue
                if inside:
                    continue
                m = HEADING.match(line)
                if m:
                    base = slug(m.group(2))
                    count = seen.get(base, 0)
                    seen[base] = count + 1
                    found.add(base if count == 0 else '%s-%d' % (base, count))
                for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', line):
                    found.add(m.group(1))
        _anchors[path] = found
    return _anchors[path]


def named_paths(path):
    """(line number, path) of each docs/... path written out in a page, code blocks included."""
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            for m in ROOT_PATH.finditer(line):
                yield number, m.group(0)


def check_page(root, page):
    """The broken links of one page, as messages."""
    broken = []
    records = page.startswith(os.path.join('docs', 'data') + os.sep)  # they keep the paths their commands wrote
    for number, named in [] if records else named_paths(os.path.join(root, page)):
        if not os.path.exists(os.path.join(root, named)):
            broken.append('%s:%d: %s: no such file (a path from the source root)' % (page, number, named))
    here = os.path.dirname(os.path.join(root, page))
    for number, line in prose_lines(os.path.join(root, page)):
        for m in LINK.finditer(line):
            target = m.group(1)
            if SCHEME.match(target):
                continue
            file_part, _, anchor = target.partition('#')
            resolved = os.path.normpath(os.path.join(here, file_part)) if file_part else os.path.join(root, page)
            if not os.path.exists(resolved):
                broken.append('%s:%d: %s: no such file' % (page, number, target))
            elif anchor and resolved.endswith('.md') and anchor not in anchors(resolved):
                broken.append('%s:%d: %s: no heading #%s in %s' %
                              (page, number, target, anchor, os.path.relpath(resolved, root)))
    return broken


def main():
    root = sys.argv[1]
    pages = ['README.md']
    docs = os.path.join(root, 'docs')
    if '--all' in sys.argv[2:]:
        for folder, _, files in sorted(os.walk(docs)):
            pages += sorted(os.path.relpath(os.path.join(folder, f), root) for f in files if f.endswith('.md'))
    else:
        pages += sorted(os.path.join('docs', f) for f in os.listdir(docs) if f.endswith('.md'))
    print('1..%d' % (len(pages) + 1))
    failed = 0
    for i, page in enumerate(pages, 1):
        broken = check_page(root, page)
        print('%s %d - %s' % ('not ok' if broken else 'ok', i, page))
        for message in broken:
            print('# ' + message)
        failed += bool(broken)
    strays = sorted(f for f in os.listdir(docs)
                    if f != 'data' and not (f.endswith('.md') and os.path.isfile(os.path.join(docs, f))))
    print('%s %d - docs/ holds pages and data/ only' % ('not ok' if strays else 'ok', len(pages) + 1))
    for f in strays:
        print('# docs/%s: not a page; data files belong under docs/data/' % f)
    failed += bool(strays)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
