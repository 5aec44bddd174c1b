"""Reads for the Models pages: the live version, every version, the runs and their reports.

Everything here is bounded by what a taxonomy has few of (versions, runs): one query each, with
the rows they show joined in, so a page costs the same however many inputs and verdicts exist.

By subject: ``versions``, ``runs``, ``reports`` (a version's test suite, a run's gate and flip
reports), ``charts`` (the history and training curves).
Callers import from the module that defines what they need.
"""
