"""Output formats, one family for every command that prints or writes: ``FORMATS[name]()`` is a Renderer
(csv, json, table), each format a small module whose class registers itself and prints summary files,
show and query's listings, compare's comparison and advise's findings where the format supports them
(msprof.renderers.base; what they print: msprof.renderers.documents)."""
from msprof.renderers import csvfile, jsonfile, terminal
from msprof.renderers.base import FORMATS, Renderer

__all__ = ["FORMATS", "Renderer", "csvfile", "jsonfile", "terminal"]
