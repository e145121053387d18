"""PROF_ entry points (placeholder until the PROF support lands)."""
from msprof.errors import DataError


def _todo(root):
    raise DataError(f"{root}: PROF_ layout support is not available yet")


def import_prof(root):
    _todo(root)


def export_timeline(root, model_id=None, iteration_id=None):
    _todo(root)


def export_summary(root, fmt="csv", model_id=None, iteration_id=None):
    _todo(root)


def show(root, **options):
    _todo(root)


def query(root):
    _todo(root)
