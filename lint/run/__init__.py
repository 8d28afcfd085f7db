"""A lint run over files."""
