"""Output formats of report tables: ``FORMATS[name]()`` is a Renderer (csv, json, text); each format is a
small module whose class registers itself."""
from msprof.renderers import csvfile, jsonfile, terminal
from msprof.renderers.base import FORMATS, Renderer

__all__ = ["FORMATS", "Renderer", "csvfile", "jsonfile", "terminal"]
