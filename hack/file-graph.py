#!/usr/bin/env python3
"""The file graph of the tree, from its sources: an arrow from file A to file B
when A includes B's header or calls (or takes the address of) a function B
defines.  A file is its stem: foo.c and foo.h are one node, cri/foo.

  hack/file-graph.py [--root DIR] cycles        # each circle of files, one a line; exit 1 if any
  hack/file-graph.py [--root DIR] edges [DIR..]  # every arrow, "a -> b (why)"
  hack/file-graph.py [--root DIR] check [--known "A B.."]..  # what check-layers runs

check: no circle of files by calls (a --known circle, its members as a
list, may stay as long as it neither grows nor shrinks: shrinking it means
updating the list), and in cri/server/ the RPC handlers (service_*.c) call
neither the method table (service.c) nor each other (--known "A B": handler
A may still call handler B), and no other file there calls a handler.

Circles are of calls only: a file that includes another's header for its
types depends on the header, which the include rules per room govern, not on
the other .c file.  Seconds on the whole tree: a scan of tokens, no
compiler.  Functions defined in more than one file (main, the plugin
entries) and static ones make no arrow; a call inside #if 0 still counts.
"""
import os
import re
import sys

FOLDERS = ("common", "include", "runtime", "image", "cri")
TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*|'
                   r'[A-Za-z_]\w*|[{}();]|\S', re.S)
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
DIRECTIVE = re.compile(r'^\s*#(?:[^\n]*\\\n)*[^\n]*', re.M)


def sources(root):
    for folder in FOLDERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def stem(path):
    return path[:-2]


def scan(text):
    """-> (functions defined at file level and not static, identifiers used in bodies)"""
    text = DIRECTIVE.sub("", text)
    defined, used = set(), set()
    depth = paren = 0
    statement = []  # tokens of the current file-level declaration
    for match in TOKEN.finditer(text):
        tok = match.group(0)
        if tok.startswith(("/*", "//", '"', "'")):
            continue
        if depth > 0:
            if tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
            elif tok[0].isalpha() or tok[0] == "_":
                used.add(tok)
            continue
        if tok == "(":
            paren += 1
        elif tok == ")":
            paren -= 1
        if tok == "{" and paren == 0:
            # a function body follows "name ( ... )"; anything else (struct,
            # enum, an initializer) is read as a body too, for its uses.
            if statement and statement[-1] == ")" and "=" not in statement:
                level, i = 0, len(statement) - 1
                while i >= 0:
                    if statement[i] == ")":
                        level += 1
                    elif statement[i] == "(":
                        level -= 1
                        if level == 0:
                            break
                    i -= 1
                if i > 0 and re.match(r"[A-Za-z_]\w*$", statement[i - 1]) and "static" not in statement:
                    defined.add(statement[i - 1])
            else:
                used.update(t for t in statement if re.match(r"[A-Za-z_]\w*$", t))
            depth = 1
            statement = []
            continue
        if tok == ";" and paren == 0:
            if "=" in statement:
                used.update(t for t in statement[statement.index("="):] if re.match(r"[A-Za-z_]\w*$", t))
            statement = []
            continue
        statement.append(tok)
    return defined, used


def graph(root):
    files = list(sources(root))
    nodes = {stem(f) for f in files}
    includes, defines, uses = {}, {}, {}
    for f in files:
        with open(os.path.join(root, f), errors="replace") as fh:
            text = fh.read()
        node = stem(f)
        for header in INCLUDE.findall(text):
            for target in (header, "include/" + header):
                if target.endswith(".h") and stem(target) in nodes:
                    includes.setdefault(node, {}).setdefault(stem(target), f)
                    break
        if f.endswith(".c"):
            d, u = scan(text)
            for name in d:
                defines.setdefault(name, set()).add(node)
            uses.setdefault(node, set()).update(u)
    edges = {}  # a -> {b: why}
    for node, targets in includes.items():
        for target, f in targets.items():
            if target != node:
                edges.setdefault(node, {})[target] = "includes " + target + ".h"
    for node, names in uses.items():
        for name in sorted(names):
            owners = defines.get(name, ())
            if len(owners) != 1:
                continue
            (owner,) = owners
            if owner == node:
                continue
            why = edges.setdefault(node, {}).get(owner)
            edges[node][owner] = (why + ", " if why else "") + "calls " + name + "()"
    return nodes, edges


def cycles(nodes, edges):
    """Tarjan: the strongly connected components of more than one file."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(out)


TABLE = "cri/server/service"
HANDLER = re.compile(r"cri/server/service_\w+$")


def calls(edges):
    """the arrows that are calls only"""
    return {a: {b: w for b, w in t.items() if "calls" in w} for a, t in edges.items()}


def called(why):
    return why[why.index("calls"):]


def check_includes(root, rules):
    """each "folder:prefixes" rule: the most specific folder a file lives in
    decides which headers (beyond husk/) its #include "..." lines may name"""
    bad = 0
    table = [(r.split(":", 1)[0], r.split(":", 1)[1].split()) for r in rules]
    for f in sources(root):
        best, allowed = "", None
        for folder, prefixes in table:
            if f.startswith(folder + "/") and len(folder) > len(best):
                best, allowed = folder, prefixes
        if allowed is None:
            continue
        with open(os.path.join(root, f), errors="replace") as fh:
            for number, line in enumerate(fh, 1):
                m = re.match(r'\s*#\s*include\s*"([^"]*)"', line)
                if not m or m.group(1).startswith("husk/") or any(m.group(1).startswith(p) for p in allowed):
                    continue
                print(f'check-layers: {f}:{number} includes "{m.group(1)}"; {os.path.dirname(f)}/ may include only husk/ '
                      + " ".join(allowed), file=sys.stderr)
                bad = 1
    return bad


def check(nodes, edges, args, root="."):
    known, rules = [], []
    while len(args) >= 2 and args[0] in ("--known", "--rule"):
        (known if args[0] == "--known" else rules).append(args[1].split() if args[0] == "--known" else args[1])
        args = args[2:]
    bad = check_includes(root, rules)
    # two handlers: handler A may call handler B (that alone, never a circle)
    known_pairs = {(k[0], k[1]) for k in known if len(k) == 2 and all(HANDLER.match(m) for m in k)}
    known_circles = {frozenset(k) for k in known if (k[0], k[-1]) not in known_pairs}
    graph_calls = calls(edges)
    for comp in cycles(nodes, graph_calls):
        if frozenset(comp) in known_circles:
            continue
        members = set(comp)
        arrows = [f"{a} -> {b} ({called(graph_calls[a][b])})" for a in comp
                  for b in sorted(graph_calls.get(a, {})) if b in members]
        print(f"check-layers: a circle of files: {' '.join(comp)}: " + "; ".join(arrows), file=sys.stderr)
        bad = 1
    for a in sorted(graph_calls):
        if not a.startswith("cri/server/") or a == TABLE:
            continue
        for b, why in sorted(graph_calls[a].items()):
            if HANDLER.match(a) and b == TABLE:
                print(f"check-layers: {a}.c {called(why)} of the method table {b}.c; "
                      "a handler replies through cri/server/reply.h", file=sys.stderr)
                bad = 1
            elif HANDLER.match(a) and HANDLER.match(b) and (a, b) not in known_pairs:
                print(f"check-layers: handler {a}.c {called(why)} of handler {b}.c; "
                      "handlers share work through the rooms below them", file=sys.stderr)
                bad = 1
            elif not HANDLER.match(a) and (HANDLER.match(b) or b == TABLE):
                print(f"check-layers: {a}.c, below the handlers, {called(why)} of {b}.c", file=sys.stderr)
                bad = 1
    return bad


def main(argv):
    root = "."
    if len(argv) > 1 and argv[0] == "--root":
        root, argv = argv[1], argv[2:]
    if not argv or argv[0] not in ("cycles", "edges", "check"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    nodes, edges = graph(root)
    if argv[0] == "edges":
        prefixes = argv[1:]
        for a in sorted(edges):
            if prefixes and not any(a.startswith(p) for p in prefixes):
                continue
            for b, why in sorted(edges[a].items()):
                print(f"{a} -> {b} ({why})")
        return 0
    if argv[0] == "check":
        return check(nodes, edges, argv[1:], root)
    bad = 0
    edges = calls(edges)
    for comp in cycles(nodes, edges):
        members = set(comp)
        arrows = [f"{a} -> {b} ({edges[a][b]})" for a in comp for b in sorted(edges.get(a, {})) if b in members]
        print(f"check-layers: a circle of files: {' '.join(comp)}: " + "; ".join(arrows), file=sys.stderr)
        bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
