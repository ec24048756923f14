"""The history's writes: a writer that batches them off the event loop, and the journal that keeps what the
database cannot take yet, so that every write of what was said is made exactly once, in its chat's order.

The narrow interface: `Writer` (read, write, keep, start, close), `Kept` (a write as data), `Journal` and
`Saving` (where a message waits). The package never imports Chainlit.
"""

from app.history.writes.journal import Journal, Kept, Saving
from app.history.writes.writer import DRAIN_S, SCRATCH, Backoff, Writer

__all__ = ["DRAIN_S", "SCRATCH", "Backoff", "Journal", "Kept", "Saving", "Writer"]
