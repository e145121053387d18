"""Answers from the tables: ``compare`` (two collections, side by side) and ``advise`` (findings from rules).

Both read a unit through its layout's *facts* (msprof.analysis.facts): a few aggregates computed in SQL by
the layout (msprof.layouts.job.facts, msprof.layouts.prof.facts), so nothing here knows whether the data
came from an SS928 JOB or an Ascend PROF_ directory.
"""
