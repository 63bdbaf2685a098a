"""Fakes and conformance suites shipped with the package, for our tests and yours."""
