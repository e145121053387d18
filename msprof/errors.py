"""Exceptions that carry a user-facing message and the process exit code (cli.md "Exit codes")."""


class MsprofError(Exception):
    """An error the user can act on: printed as one line, never as a traceback."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class UsageError(MsprofError):
    exit_code = 2


class NoCollectionError(UsageError):
    """The directory holds no JOB/PROF collection."""


class SshError(MsprofError):
    exit_code = 3


class RemoteError(MsprofError):
    exit_code = 4


class ConfigError(MsprofError):
    exit_code = 5


class ResourceError(MsprofError):
    """The machine does not give msprof enough of what it needs: disk space, or open files (ulimit -n)."""

    exit_code = 6


class DiskSpaceError(ResourceError):
    pass


class OutputError(MsprofError):
    """Results cannot be written where they go (permissions, a read-only directory, a link in the way)."""

    exit_code = 7


class DataError(MsprofError):
    """Invalid or corrupt data that prevents any output."""

    exit_code = 8

    @classmethod
    def unreadable(cls, path, exc: OSError) -> "DataError":
        """An input msprof may not read (a raw file, data/, metadata), named as the system refused it."""
        return cls(f"{path}: cannot read ({exc.strerror})")


class RegressionError(MsprofError):
    """``compare --fail-if-slower``: a model got slower than allowed (a CI gate, not a failure of msprof)."""

    exit_code = 9


class SeveralFailed(MsprofError):
    """Several things went wrong in one run (result directories of a parent, JOBs of a collect): each was said
    as it happened; this is the summary, with the highest of their exit codes."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


EXIT_CODES = {
    0: "success",
    1: "unexpected internal error",
    2: "usage error / invalid path / no collection found",
    3: "SSH connection or authentication failure, host key refused",
    4: "remote command failed (main exited non-zero, upload/download failed)",
    5: "invalid config file",
    6: "not enough disk space, or too few open files allowed (ulimit -n)",
    7: "cannot write results (permission denied, read-only directory, an output directory that is a link): use --output DIR",
    8: "invalid or corrupt data that prevents any output",
    9: "performance regression found by compare --fail-if-slower",
    130: "interrupted",
}
