"""Start and end records paired by key: the one mechanism of every family that logs a start and an end (HWTS
and STARS task logs, step-trace iteration marks, api_event event pairs).

Records are given in the order that pairs them (a stream's, or a sort's). A start waits for the next end of
its key. An end that finds no start waiting is *alone*; a start that another start of its key replaces, or
that is still waiting when the records end, *never ended*. Both are counted and the earliest of each is kept
(its ``where``: a record index, or what names it in a warning), and each is handed back, so that the family
decides what becomes of it: HWTS keeps such a task with its one time, STARS and step trace drop it.
"""
from typing import Dict, Hashable, List, Optional, Tuple


class Pairing:
    """``waiting`` maps a key to its start: a tuple whose last item is its ``where`` (any comparable value).
    A family whose pairing is its hot loop (HWTS, STARS) uses ``waiting`` itself, since a method call per
    record costs that loop more than the pairing does, and calls ``never_ended``/``alone`` for what it meets."""

    def __init__(self):
        self.waiting: Dict[Hashable, tuple] = {}
        self.unended = 0                 # starts that never ended
        self.ends_alone = 0
        self.first_unended = None        # the earliest ``where`` of each, and its key
        self.first_alone = None
        self.first_unended_key = self.first_alone_key = None

    def start(self, key, record: tuple) -> Optional[tuple]:
        """``record`` (its last item its where) waits for its end; returns the start it replaces, which never
        ended (counted), or None."""
        earlier = self.waiting.get(key)
        if earlier is not None:
            self.never_ended(earlier[-1], key)
        self.waiting[key] = record
        return earlier

    def end(self, key, where) -> Optional[tuple]:
        """The start waiting for this end (no longer waiting), or None: an end alone (counted)."""
        started = self.waiting.pop(key, None)
        if started is None:
            self.alone(where, key)
        return started

    def never_ended(self, where, key=None) -> None:
        self.unended += 1
        if self.first_unended is None or where < self.first_unended:
            self.first_unended, self.first_unended_key = where, key

    def alone(self, where, key=None) -> None:
        self.ends_alone += 1
        if self.first_alone is None or where < self.first_alone:
            self.first_alone, self.first_alone_key = where, key

    def finish(self) -> List[Tuple[Hashable, tuple]]:
        """The starts still waiting, as (key, record): they never ended (counted)."""
        left = list(self.waiting.items())
        self.waiting.clear()
        for key, record in left:
            self.never_ended(record[-1], key)
        return left

    @property
    def unpaired(self) -> int:
        return self.unended + self.ends_alone
