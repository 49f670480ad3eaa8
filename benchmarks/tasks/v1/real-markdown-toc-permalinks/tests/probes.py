"""Probes of real-markdown-toc-permalinks: what the workspace's markdown package answers (bench/verdict_runner.py).

Fail-to-pass (Python-Markdown 3.5): the toc extension's permalink_leading puts the permanent link first in the
heading, title_class sets the class of the TOC title; an admonition whose first block is an indented code block
renders that block as code inside the admonition; the serializers treat every HTML void element the standard
library knows (source, track, wbr, embed) as empty. Pass-to-pass: the toc extension's other options, admonitions,
core Markdown and the serializers as 3.4.4 rendered them. Extensions are named by module path (no installed entry
points in the sandbox).
"""

TOC = "markdown.extensions.toc"
DOC = "[TOC]\n\n# Intro\n\nText.\n\n## Details *here*\n\n### Deep\n\n# Second\n"


def _md(ctx, exts=(), **configs):
    m = ctx.load("markdown")
    return m.Markdown(extensions=list(exts), extension_configs=configs)


def _toc(ctx, text=DOC, **cfg):
    md = _md(ctx, [TOC], **{TOC: cfg})
    html = md.convert(text)
    return [html, md.toc]


def probe_permalink_leading(ctx):
    return _toc(ctx, permalink=True, permalink_leading=True)


def probe_permalink_leading_custom_text(ctx):
    return [_toc(ctx, "# A *b* c\n", permalink="#", permalink_leading=True, permalink_class="pl",
                 permalink_title="Link here"),
            _toc(ctx, "## Only\n", permalink=True, permalink_leading="true", anchorlink=False)]


def probe_permalink_trailing_by_default(ctx):
    return [_toc(ctx, "# Title\n", permalink=True), _toc(ctx, "# Title\n", permalink=True, permalink_leading=False)]


def probe_title_class(ctx):
    return [_toc(ctx, title="Contents", title_class="my-title"), _toc(ctx, title="Contents", title_class="")]


def probe_title_and_toc_class_together(ctx):
    return _toc(ctx, title="On this page", title_class="t1 t2", toc_class="side-toc")


def probe_toc_defaults_unchanged(ctx):
    return [_toc(ctx), _toc(ctx, title="Contents"), _toc(ctx, toc_depth="2-3", baselevel=2),
            _toc(ctx, anchorlink=True, marker="")]


def probe_toc_tokens_unchanged(ctx):
    md = _md(ctx, [TOC])
    md.convert(DOC)
    return md.toc_tokens


def probe_admonition_code_first(ctx):
    md = _md(ctx, ["markdown.extensions.admonition"])
    return [md.convert("!!! note\n\n        code\n\n    text\n"),
            md.convert('!!! warning "Careful"\n        x = 1\n    after\n')]


def probe_admonition_unchanged(ctx):
    md = _md(ctx, ["markdown.extensions.admonition"])
    return [md.convert('!!! danger "Don\'t"\n    body *em*\n\n    second\n'),
            md.convert('!!! tip ""\n    no title\n'), md.convert("!!! note\n    one\n\n!!! note\n    two\n")]


def probe_void_elements(ctx):
    from xml.etree.ElementTree import Element, SubElement
    s = ctx.load("markdown.serializers")
    v = Element("video")
    SubElement(v, "source", src="a.mp4")
    SubElement(v, "track", src="t.vtt")
    p = Element("p")
    p.text = "long"
    SubElement(p, "wbr").tail = "word"
    SubElement(p, "embed", src="x.swf")
    return [s.to_html_string(v), s.to_html_string(p), s.to_xhtml_string(v), s.to_xhtml_string(p)]


def probe_serializers_unchanged(ctx):
    from xml.etree.ElementTree import Element, SubElement
    s = ctx.load("markdown.serializers")
    d = Element("div", {"class": "x"})
    SubElement(d, "br")
    SubElement(d, "img", src="a.png", alt='say "hi"')
    i = SubElement(d, "input", type="checkbox", checked="checked")
    i.tail = "tail & more"
    return [s.to_html_string(d), s.to_xhtml_string(d)]


def probe_core_markdown_unchanged(ctx):
    m = ctx.load("markdown")
    text = ("Title\n=====\n\n* one\n* two\n\n1. a\n2. b\n\n> quote\n\n    code\n\n"
            "[link](http://x.org \"t\") and ![img](a.png) `code` **bold** _em_\n\n---\n\n<div>raw</div>\n")
    return [m.markdown(text), m.markdown(text, output_format="xhtml")]


def probe_other_extensions_unchanged(ctx):
    m = ctx.load("markdown")
    text = "| a | b |\n|---|:-:|\n| 1 | 2 |\n\nTerm\n:   Def\n\nFoo[^1]\n\n[^1]: Note.\n\n*[HTML]: Hyper\n\nHTML\n"
    exts = ["markdown.extensions.tables", "markdown.extensions.def_list", "markdown.extensions.footnotes",
            "markdown.extensions.abbr"]
    return m.markdown(text, extensions=exts)


def probe_fenced_and_attr_list_unchanged(ctx):
    m = ctx.load("markdown")
    text = "```python\nx = 1\n```\n\n# Head {: #custom .cls }\n\nPara {: data-x=\"1\" }\n"
    return m.markdown(text, extensions=["markdown.extensions.fenced_code", "markdown.extensions.attr_list"])


def probe_extension_loading_errors_unchanged(ctx):
    m = ctx.load("markdown")
    return [ctx.raises(ImportError, m.Markdown, extensions=["markdown.extensions.nope"]),
            ctx.raises(TypeError, m.Markdown, extensions=[object()]),
            ctx.raises(KeyError, m.Markdown, extensions=[TOC], extension_configs={TOC: {"nope": 1}})]
