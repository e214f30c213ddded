"""Suites: the typed schema, the YAML parser with its checks, and the preset suites (package data)."""
