"""Test helpers for users' own jobs: replay equality and keyed frame equality."""
