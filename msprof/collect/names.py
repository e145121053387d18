"""Names that come from outside (the board, the project tree): how to print them and which ones to accept."""
import re

# What a JOB directory name may be made of: it ends up in paths we print, in shell hints and in the names of
# result files, so nothing a shell or a terminal would interpret.
JOB_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def is_job_name(name: str) -> bool:
    return JOB_NAME.fullmatch(name) is not None and name not in (".", "..") and len(name) <= 255
