"""Documents too big to read whole: split into passages, indexed by the history database, retrieved per question."""
