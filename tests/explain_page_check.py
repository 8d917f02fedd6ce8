"""Checks a page of `tessera explain` and its --json (tests/test_explain.cpp runs this).

  explain_page_check.py PAGE.html JSON.json

The page: well-formed HTML5 (every element closed in order, void elements aside), a doctype, unique
ids, every in-page link pointing at an id, every section present, and nothing outside the file: no
http:// or https:// anywhere, every src, href and CSS url() a data: URI or an #anchor.
The JSON: the invariants of each kind of map (softmax rows sum to 1, XNorm'd clusters have the
learned norm, XCA maps are d_h x d_h), a picture of each paper's attention the model uses (several for a
hybrid model file), query patches inside their grids, and one entry per block of the page.
Exits 1 with every problem listed.
"""
import html.parser
import json
import math
import re
import sys

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
SECTIONS = ["input", "tree", "tokens", "attention", "compute", "reading"]
problems = []


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.ids, self.links, self.doctype = [], [], [], False
        self.text_in_style = []

    def handle_decl(self, decl):
        self.doctype |= decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        for name in ("src", "href"):
            if name in a:
                v = a[name] or ""
                if v.startswith("#"):
                    self.links.append(v[1:])
                elif not v.startswith("data:"):
                    problems.append(f"<{tag} {name}=\"{v[:60]}\">: not inside the file")
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1][0] == tag:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1][0] != tag:
            open_tag = self.stack[-1] if self.stack else None
            problems.append(f"</{tag}> at {self.getpos()} closes {open_tag}")
            return
        self.stack.pop()


def check_page(path):
    text = open(path, encoding="utf-8").read()
    for scheme in ("http://", "https://"):
        if scheme in text:
            problems.append(f"{scheme} in the page at offset {text.index(scheme)}")
    for url in re.findall(r"url\(([^)]*)\)", text):
        if not url.strip("'\"").startswith("data:"):
            problems.append(f"CSS url({url[:60]}) is not inside the file")
    page = Page()
    page.feed(text)
    page.close()
    if not page.doctype:
        problems.append("no <!DOCTYPE html>")
    if page.stack:
        problems.append(f"elements never closed: {page.stack[:5]}")
    dupes = {i for i in page.ids if page.ids.count(i) > 1}
    if dupes:
        problems.append(f"duplicate ids: {sorted(dupes)[:5]}")
    missing = sorted({l for l in page.links if l not in page.ids})
    if missing:
        problems.append(f"links to missing ids: {missing[:5]}")
    for s in SECTIONS:
        if s not in page.ids:
            problems.append(f"section '{s}' missing")
    return page.ids


def close(a, b, tol=1e-4):
    return abs(a - b) <= tol * max(1.0, abs(b))


def check_json(path, ids):
    e = json.load(open(path))
    family, families = e["family"], e["families"]
    if not families or family != (families[0] if len(families) == 1 else "hybrid"):
        problems.append(f"family {family} for the papers {families}")
    probs = [t["probability"] for t in e["top5"]]
    if not probs or probs != sorted(probs, reverse=True) or sum(probs) > 1 + 1e-6:
        problems.append(f"top-5 probabilities {probs}")
    for block in e["blocks"]:
        where = block["path"]
        if "block-" + where not in ids:
            problems.append(f"{where}: in the JSON, not on the page")
        for u in block["relative_update"]:
            if not (u >= 0 and math.isfinite(u)):
                problems.append(f"{where}: relative update {u}")
        figs = block["figures"]
        for key, f in figs.items():
            if len(f["maps"]) != len(f["labels"]):
                problems.append(f"{where}.{key}: {len(f['maps'])} maps, {len(f['labels'])} labels")
        if "xca_map" in figs:
            for m in figs["xca_map"]["maps"]:
                if len(m) != len(m[0]):
                    problems.append(f"{where}: XCA map {len(m)}x{len(m[0])} is not d_h x d_h")
                for row in m:
                    if not close(sum(row), 1.0):
                        problems.append(f"{where}: an XCA map row sums to {sum(row)}")
        if "class_attention" in figs:
            f = figs["class_attention"]
            for m, cls in zip(f["maps"], f["cls_weight"]):
                total = sum(sum(r) for r in m) + cls
                if not close(total, 1.0):
                    problems.append(f"{where}: class attention sums to {total}")
        if "attention_before_talking_heads" in figs:
            for m in figs["attention_before_talking_heads"]["maps"]:
                if not close(sum(sum(r) for r in m), 1.0):
                    problems.append(f"{where}: a softmax attention row sums to {sum(sum(r) for r in m)}")
        if "clusters" in figs:
            f = figs["clusters"]
            for m, g in zip(f["maps"], f["gamma"]):
                for j in range(len(m[0])):
                    n = math.sqrt(sum(m[i][j] ** 2 for i in range(len(m))))
                    if not close(n, abs(g)):
                        problems.append(f"{where}: cluster {j} has norm {n}, gamma {g}")
        if "self_attention" in figs:
            for m in figs["self_attention"]["maps"]:
                total = sum(sum(r) for r in m)  # 1 less the weight on a class token, when there is one
                if not (0 < total <= 1 + 1e-4):
                    problems.append(f"{where}: a self-attention row sums to {total} over the patches")
        for key, f in figs.items():
            if "query_patch" in f and not 0 <= f["query_patch"] < len(f["maps"][0]) * len(f["maps"][0][0]):
                problems.append(f"{where}.{key}: query patch {f['query_patch']} outside its grid")
        for key in [k for k in figs if k.startswith("context")]:
            for m in figs[key]["maps"]:
                if len(m) != len(m[0]):
                    problems.append(f"{where}: context {len(m)}x{len(m[0])} is not C_h x C_h")
    # A named model draws its trunk's attention; a hybrid, each paper's attention or class attention.
    trunk = {"xcit": ["xca_map"], "cait": ["attention_after_talking_heads"], "coat": ["context"],
             "ufo_vit": ["clusters"], "vit": ["self_attention"]}
    families = [f for f in families if f != "own"]  # a program's own token mixers: no picture
    keys = {k for b in e["blocks"] for k in b["figures"]}
    for f in families:
        expected = trunk[f] + (["class_attention"] if family == "hybrid" and f in ("xcit", "cait") else [])
        if not any(k.startswith(x) for k in keys for x in expected):
            problems.append(f"no {' or '.join(expected)} figure for {f}")
    quadratic = bool(keys & {"attention_after_talking_heads", "self_attention"})
    if len(e["compute"]) != 3:
        problems.append(f"compute at {len(e['compute'])} sizes, expected 3")
        return
    first, last = e["compute"][0], e["compute"][-1]
    if not (0 < first["attention_macs"] < first["macs"] and 0 < first["mlp_macs"] < first["macs"]):
        problems.append(f"attention / MLP MACs {first['attention_macs']} / {first['mlp_macs']} of {first['macs']}")
    else:
        # Token attention (CaiT) grows faster than the tokens; the linear attentions at most as fast.
        tokens = (last["img_size"] / first["img_size"]) ** 2
        growth = last["attention_macs"] / first["attention_macs"]
        if (growth > tokens * 1.001) != quadratic:
            problems.append(f"attention MACs grow {growth:.3f}x for {tokens:.3f}x the tokens")


ids = check_page(sys.argv[1])
check_json(sys.argv[2], ids)
for p in problems:
    print("explain_page_check:", p)
sys.exit(1 if problems else 0)
