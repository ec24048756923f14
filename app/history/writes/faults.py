"""What a failed database write means: the database is away, the write is wrong, or neither is known.

PostgreSQL says why by its SQLSTATE (class 08 connection, 53 resources, 57 operator intervention ...), SQLite by
its result code's name; an error that says neither is held, never dropped.
"""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout


class Fault(StrEnum):
    """Why a write failed, and so what becomes of it."""

    # The database cannot take writes now (gone, full, restarting, read-only, too slow): retry them later, in order.
    AWAY = "away"
    # This write is wrong and always will be (bad data, a broken constraint): set aside, never retried.
    REFUSED = "refused"
    # Neither is known (permissions, a missing table, corruption): kept and retried, and an operator alerted.
    HELD = "held"


# SQLSTATE classes: connection exception, insufficient resources, operator intervention (a shutdown, a
# cancelled statement), system error, transaction rollback (serialization failure, deadlock).
AWAY_CLASSES = frozenset({"08", "53", "57", "58", "40"})
# A read-only transaction: a standby, or a primary being failed over.
AWAY_STATES = frozenset({"25006"})
# Data exception, integrity constraint violation.
REFUSED_CLASSES = frozenset({"22", "23"})
# SQLite's result codes (extended codes start with the primary one's name).
SQLITE_AWAY = ("SQLITE_FULL", "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_READONLY")
SQLITE_REFUSED = ("SQLITE_CONSTRAINT", "SQLITE_MISMATCH", "SQLITE_TOOBIG", "SQLITE_RANGE")


def classify(error: BaseException) -> Fault:
    """What a write's failure means."""
    if isinstance(error, OSError | PoolTimeout | DisconnectionError):  # TimeoutError is an OSError
        return Fault.AWAY
    if isinstance(error, DBAPIError):
        return of_driver(error)
    # A statement built wrong for this write's data, or data that broke its applier (a key missing, a wrong type).
    return Fault.REFUSED


def of_driver(error: DBAPIError) -> Fault:
    """A driver's error by what the database said: its SQLSTATE, or SQLite's result code."""
    state = getattr(error.orig, "sqlstate", None)
    if isinstance(state, str) and len(state) == 5:
        if state[:2] in AWAY_CLASSES or state in AWAY_STATES:
            return Fault.AWAY
        return Fault.REFUSED if state[:2] in REFUSED_CLASSES else Fault.HELD
    name = getattr(error.orig, "sqlite_errorname", None)
    if isinstance(name, str):
        if name.startswith(SQLITE_AWAY):
            return Fault.AWAY
        return Fault.REFUSED if name.startswith(SQLITE_REFUSED) else Fault.HELD
    # No answer from the server at all (refused, reset, a closed connection): it is away.
    return Fault.AWAY if isinstance(error, OperationalError | InterfaceError) else Fault.HELD
