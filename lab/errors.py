"""The lab's one base error: every failure the user should read as a message, not a traceback."""
from __future__ import annotations


class LabError(Exception):
    """Something the user can fix or should know; the message says what is wrong and what to do."""


class StepFailed(LabError):
    """A step of up, run, status or down failed."""
