"""Text made from verdicts and records: failure messages, timing and compile tables, the markdown summary."""
