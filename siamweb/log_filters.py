"""Filters for the product's log records."""

from __future__ import annotations

import logging


class RefusalWithoutTraceback(logging.Filter):
    """A 403 is the product refusing as designed (a curator on an admin page): Django logs it
    with the PermissionDenied's traceback, a screenful for one line of news. The line stays."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == 403:
            record.exc_info = None
            record.exc_text = None
        return True
