"""The read-only fleet dashboard the operator serves (`staticfleet operator --ui HOST:PORT`)."""
