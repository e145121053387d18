"""msprof: profiling toolchain for SS928-class SoC boards (svp_acl) and Ascend CANN PROF data."""

__version__ = "0.1.0"
SCHEMA_VERSION = 10
