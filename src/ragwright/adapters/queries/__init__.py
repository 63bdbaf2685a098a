"""The SQL of the stores kept in SQLite or PostgreSQL (API keys, drafts, answer jobs).

:mod:`.dialect` holds every difference between the two engines that the statements
meet: how a named parameter is written, column types, row locks, a list parameter.
Each store's statements are written once, in its own module (:mod:`.keys`,
:mod:`.drafts`, :mod:`.jobs`), as text built from a :class:`~.dialect.Dialect`; the
stores in :mod:`ragwright.adapters` run them through a :class:`~.dialect.SqlSession`
with named parameters, whatever the driver.
"""
